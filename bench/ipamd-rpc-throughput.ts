/**
 * bench: ipamd AddNetwork+DelNetwork pairs per second over its Unix socket with a warm
 * pool, and the pair latency p50/p99, at several client concurrencies. ipamd is the
 * real binary in a child process (the clients run here, so they do not share its event
 * loop) with the checkpoint durable on every change before the reply (a journal record
 * written O_DSYNC, group commit; the snapshot rewritten when the journal outgrows it) on
 * the real disk under the OS temp dir. Prints figures, no pass/fail.
 *
 * Set-up: simulated c5.4xlarge, WARM_IP_TARGET = 2 × the highest concurrency (the pool
 * never runs dry) and IP_COOLDOWN_PERIOD=0 (a released IP is reusable at once: this
 * measures the request path, not the pool). One gRPC channel carries all workers' calls
 * (a real node has one short-lived plugin process per call; see bench/cni-add-latency
 * for that path). Each worker loops ADD(new key) → DEL(same key). ipamd starts from a
 * checkpoint of this boot that remembers `--released` (4096) DELs, the datastore's cap,
 * which a node reaches after 4096 pod deletions: the steady state of a busy node (0 =
 * a fresh node).
 *
 * ipamd's CPU time per pair (user + system, from /proc, over each row) is what bounds
 * pairs/s once ipamd's one event loop is saturated (about 1000 / that figure per core),
 * and it moves far less with the machine's load than the latencies do. The bench's own
 * CPU per pair (its grpc-js client, `process.cpuUsage`) is printed beside it: on a
 * 2-core machine the two share the cores, so pairs/s ≤ 2000 / (ipamd + client) at best.
 * With N closed-loop clients the pair latency averages N / pairs/s (Little's law): at 64
 * clients a pair p99 ≤ 20 ms needs well over 3,200 pairs/s.
 *
 * After the first and the last concurrency, it prints ipamd's own per-stage trace
 * (`GET /v1/stage-trace`, ipamd/service/stage-trace.ts: the last 4096 samples of each
 * stage, so mostly that row's requests): protobuf decode/encode, datastore, the wait
 * for the durable write, and each checkpoint write's stages.
 *
 * `--node-flags=<flags>` (with `=`: they start with a dash) runs ipamd as `node <flags> main.js`
 * (the image's entrypoint passes `--max-semi-space-size=1`; `--cpu-prof` profiles it);
 * `--ipamd <path>` runs another build's ipamd/main.js (an A/B of two builds in one session;
 * that dist's parent directory must hold `proto/`, as a checkout's does).
 *
 *   node dist/bench/ipamd-rpc-throughput.js [--seconds 5] [--concurrency 1,4,16,64] [--released 4096]
 *     [--node-flags=<flags>] [--ipamd <other checkout>/dist/ipamd/main.js]
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { readBootId } from '../ipamd/checkpoint/index.js';
import { SimCloud } from '../sim/index.js';
import { ipamdClient } from '../test/helpers/ipamd-client.js';
import { createSimNode } from '../test/property/sim-node.js';
import { machineLine, row, sleep } from './bench-util.js';
import { quantile } from './stats.js';

/** CPU time (user + system, ms) process `pid` used so far, from /proc/<pid>/stat (clock ticks of 10 ms); undefined if unreadable. */
function cpuMsOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime, stime (fields 14, 15); CLK_TCK 100 on Linux
  } catch {
    return undefined;
  }
}

/**
 * argv put before `node main.js` to run ipamd as `node <flags> <main>`: `flags` space-separated
 * node/V8 flags (e.g. the image entrypoint's `--max-semi-space-size=1`, or `--cpu-prof`),
 * `main` another build's ipamd/main.js (A/B of two builds in one session); undefined when neither.
 */
function childPrefix(flags: string, main: string | undefined): string[] | undefined {
  const f = flags.split(' ').filter(Boolean);
  if (!f.length && !main) return undefined;
  // sh gets `node` and this build's main.js as "$@": run node with the flags, then main.js or `main`.
  const tail = main ? `"${main.replace(/"/g, '')}"` : '"$@"';
  return [
    '/bin/sh',
    '-c',
    `n="$1"; shift; ${main ? 'shift; ' : ''}exec "$n" ${f.map((x) => `'${x}'`).join(' ')} ${tail}`,
    'sh',
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '5' },
      concurrency: { type: 'string', default: '1,4,16,64' },
      released: { type: 'string', default: '4096' },
      'node-flags': { type: 'string', default: '' },
      ipamd: { type: 'string' },
    },
  });
  const seconds = Number(values.seconds);
  const levels = values.concurrency!.split(',').map(Number);
  delete process.env.NODE_EXTRA_CA_CERTS;
  const sim = new SimCloud({ seed: 3 });
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/20' });
  const warm = 2 * Math.max(...levels);
  const node = await createSimNode({
    sim,
    subnetId: subnet.subnetId,
    instanceType: 'c5.4xlarge',
    mode: 'child',
    cri: false,
    env: { WARM_IP_TARGET: String(warm), IP_COOLDOWN_PERIOD: '0' },
  });
  node.childPrefix = childPrefix(values['node-flags']!, values.ipamd);
  const c = ipamdClient(node.socket);
  const out: string[] = [];
  const traces: Array<[number, Record<string, { count: number; p50: number; p90: number; p99: number; max: number }>]> =
    [];
  try {
    const released = Array.from({ length: Number(values.released) }, (_, i) => ({
      containerID: `gone${String(i).padStart(60, '0')}`,
      releasedAt: Date.now() - 60_000 + i,
    }));
    await mkdir(path.dirname(node.checkpoint), { recursive: true });
    await writeFile(
      node.checkpoint,
      JSON.stringify({ version: 1, bootId: readBootId(), allocations: [], cooldown: [], released }),
    );
    await node.start();
    for (const until = Date.now() + 30_000; Date.now() < until && (await node.status()).counts.available < warm;)
      await sleep(100);
    for (let i = 0; i < 50; i++) {
      await c.add(`warmup${i}`);
      await c.del(`warmup${i}`);
    }
    for (const conc of levels) {
      const pairMs: number[] = [];
      const addMs: number[] = [];
      const delMs: number[] = [];
      let errors = 0;
      const cpu0 = cpuMsOf(node.pid);
      const own0 = process.cpuUsage();
      const t0 = performance.now();
      const end = t0 + seconds * 1000;
      await Promise.all(
        Array.from({ length: conc }, async (_, w) => {
          for (let i = 0; performance.now() < end; i++) {
            const id = `c${conc}w${w}i${i}`;
            const a = performance.now();
            try {
              await c.add(id);
              const b = performance.now();
              await c.del(id);
              const d = performance.now();
              addMs.push(b - a);
              delMs.push(d - b);
              pairMs.push(d - a);
            } catch {
              errors++;
            }
          }
        }),
      );
      const el = (performance.now() - t0) / 1000;
      const cpu1 = cpuMsOf(node.pid);
      const own = process.cpuUsage(own0);
      const cpuPerPair =
        cpu0 !== undefined && cpu1 !== undefined && pairMs.length ? (cpu1 - cpu0) / pairMs.length : NaN;
      const q = (xs: number[]) => `${quantile(xs, 0.5).toFixed(2)} / ${quantile(xs, 0.99).toFixed(2)}`;
      out.push(
        row([
          conc,
          (pairMs.length / el).toFixed(0),
          q(pairMs),
          q(addMs),
          q(delMs),
          cpuPerPair.toFixed(2),
          pairMs.length ? ((own.user + own.system) / 1000 / pairMs.length).toFixed(2) : 'NaN',
          errors,
        ]),
      );
      if (conc === levels[0] || conc === levels[levels.length - 1])
        traces.push([
          conc,
          (await (node.introspect?.('/v1/stage-trace') ?? Promise.resolve({})).catch(
            () => ({}),
          )) as (typeof traces)[number][1],
        ]);
    }
  } finally {
    c.close();
    await node.close();
    await sim.stop();
  }
  console.log(
    `ipamd ADD+DEL pairs over the Unix socket, warm pool, checkpoint durable on every change (group commit), ${values.released} DELs remembered, ${seconds} s per row, ${machineLine(os.cpus().length)}, ipamd ${values.ipamd ?? 'this build'}${values['node-flags'] ? ` with ${values['node-flags']}` : ''}, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log(
    row([
      'concurrent clients',
      'pairs/s',
      'pair p50 / p99 ms',
      'ADD p50 / p99 ms',
      'DEL p50 / p99 ms',
      'ipamd CPU ms / pair',
      'bench client CPU ms / pair',
      'errors',
    ]),
  );
  console.log(row(Array(8).fill('---')));
  for (const l of out) console.log(l);
  for (const [conc, tr] of traces) {
    if (Object.keys(tr).length === 0) continue; // an ipamd without the trace
    console.log(`\nipamd stage trace after the ${conc}-client row (ms; last ${'4096'} samples per stage)`);
    console.log(row(['stage', 'count', 'p50', 'p90', 'p99']));
    console.log(row(Array(5).fill('---')));
    for (const [stage, v] of Object.entries(tr))
      console.log(row([stage, v.count, v.p50.toFixed(3), v.p90.toFixed(3), v.p99.toFixed(3)]));
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
