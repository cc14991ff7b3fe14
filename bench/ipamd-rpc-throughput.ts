/**
 * bench: ipamd AddNetwork+DelNetwork pairs per second over its Unix socket with a warm
 * pool, and the pair latency p50/p99, at several client concurrencies. ipamd is the
 * real binary in a child process (the clients run here, so they do not share its event
 * loop) with the checkpoint durable on every change before the reply (a journal record
 * written O_DSYNC, group commit; the snapshot rewritten when the journal outgrows it) on
 * the real disk under the OS temp dir. Prints figures, no pass/fail.
 *
 * Set-up: simulated c5.4xlarge, WARM_IP_TARGET = 2 × the highest concurrency and
 * MINIMUM_IP_TARGET = 3 × (at most the 232 secondary IPs of its 8 ENIs), waited for before
 * the first row, so the pool neither runs dry nor grows or shrinks during a row (the `EC2
 * calls` column shows it: with only the warm target the first 64-client row grew the pool
 * by two ENIs, ~20 EC2 calls in the row), and IP_COOLDOWN_PERIOD=0 (a released IP is
 * reusable at once): this measures the request path, not the pool. Before the first row,
 * `--warmup` seconds (default 3) of the first row's load, not measured: ipamd's JIT is
 * cold after its start, and a paced first row that falls behind keeps its backlog. One
 * gRPC channel carries all workers' calls (a real node runs one shim invocation per call,
 * served inside ipamd without gRPC; bench/cni-vs-go measures that path). Each worker loops ADD(new key) → DEL(same key). ipamd starts from a
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
 * clients a pair p99 ≤ 20 ms needs well over 3,200 pairs/s. A paced row (`64@2500`)
 * instead offers a fixed rate from the 64 clients (each pair due at its time, its latency
 * counted from then, so a late start counts against ipamd): the latency a node sees at
 * that load rather than at saturation.
 *
 * ipamd logs as the chart has it log, to a rotating file (AWS_VPC_K8S_CNI_LOG_FILE; one
 * line per ADD and DEL at info) in its node dir; `--log stdout` has it log to stdout, a
 * pipe this process reads and copies to a file (its CPU is then in the bench client's
 * column, on the same 2 vCPU).
 *
 * `--client plugin` makes the clients the plugin code's own gRPC client
 * (cni-plugin/ipamd-client.ts) instead of grpc-js: half the bench's CPU per pair, so less
 * of the 2 vCPU taken from ipamd.
 *
 * After the first and the last concurrency, it prints ipamd's own per-stage trace
 * (`GET /v1/stage-trace`, ipamd/service/stage-trace.ts: the last 4096 samples of each
 * stage, so mostly that row's requests): protobuf decode/encode, datastore, the wait
 * for the durable write, and each checkpoint write's stages.
 *
 * ipamd runs as the image's entrypoint runs it (IPAMD_MALLOC_ENV + IPAMD_NODE_FLAGS,
 * ipamd/v8-flags.ts); `--v8-defaults` runs plain `node main.js`; `--node-flags=<flags>`
 * (with `=`: they start with a dash) runs ipamd as `node <flags> main.js` instead of the
 * entrypoint's flags (add `--cpu-prof` to them to profile it);
 * `--ipamd <path>` runs another build's ipamd/main.js (an A/B of two builds in one session;
 * that dist's parent directory must hold `proto/`, as a checkout's does).
 *
 *   node dist/bench/ipamd-rpc-throughput.js [--seconds 5] [--warmup 3] [--concurrency 1,4,16,64,64@2500] [--released 4096]
 *     [--client grpc-js|plugin] [--log file|stdout] [--v8-defaults | --node-flags=<flags>] [--ipamd <other checkout>/dist/ipamd/main.js]
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { IPAMD_MALLOC_ENV, IPAMD_NODE_FLAGS } from '../ipamd/v8-flags.js';
import { SimCloud } from '../sim/index.js';
import { ipamdClient, type TestIpamdClient } from '../kit/ipamd-client.js';
import { createSimNode, type SimNode } from '../kit/sim-node.js';
import { cpuMsOf, machineLine, pluginClient, row, seedReleasedCheckpoint, sleep } from './bench-util.js';
import { offerLoad } from './offer-load.js';
import { quantile } from './stats.js';

/**
 * argv put before `node main.js` to run ipamd as `env <env> node <flags> <main>`: `flags`
 * node/V8 flags, `env` environment added (the entrypoint's malloc settings), `main`
 * another build's ipamd/main.js (A/B of two builds in one session); undefined when none.
 */
function childPrefix(flags: string[], env: Record<string, string>, main: string | undefined): string[] | undefined {
  if (!flags.length && !main && !Object.keys(env).length) return undefined;
  // sh gets `node` and this build's main.js as "$@": run node with the flags, then main.js or `main`.
  const tail = main ? `"${main.replace(/"/g, '')}"` : '"$@"';
  return [
    'env',
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    '/bin/sh',
    '-c',
    `n="$1"; shift; ${main ? 'shift; ' : ''}exec "$n" ${flags.map((x) => `'${x}'`).join(' ')} ${tail}`,
    'sh',
  ];
}

/**
 * One row's load from a `--concurrency` item: `64` (64 clients, closed loop: each sends its
 * next pair when the last is answered) or `64@2500` (64 clients offering 2,500 pairs/s
 * between them, open loop: each pair is due at a fixed time).
 * @throws Error for anything else.
 */
function parseLevel(item: string): { conc: number; rate?: number } {
  const m = /^(\d+)(?:@(\d+))?$/.exec(item.trim());
  if (!m || Number(m[1]) < 1) throw new Error(`--concurrency: "${item}" is not N or N@pairs-per-second`);
  return m[2] ? { conc: Number(m[1]), rate: Number(m[2]) } : { conc: Number(m[1]) };
}

/**
 * The command line (see the file's header): the parsed `values`, `seconds` per row,
 * `warmupS` (s of unmeasured load before the first row) and the rows' `levels`.
 * @throws Error for a `--client`, `--log`, `--seconds`, `--warmup` or `--concurrency` it does not take.
 */
function rpcOptions() {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '3' },
      concurrency: { type: 'string', default: '1,4,16,64,64@2500' },
      released: { type: 'string', default: '4096' },
      'node-flags': { type: 'string' },
      'v8-defaults': { type: 'boolean', default: false },
      client: { type: 'string', default: 'grpc-js' },
      ipamd: { type: 'string' },
      log: { type: 'string', default: 'file' },
    },
  });
  if (values.client !== 'grpc-js' && values.client !== 'plugin')
    throw new Error(`--client: "${values.client}" is not grpc-js or plugin`);
  if (values.log !== 'file' && values.log !== 'stdout') throw new Error(`--log: "${values.log}" is not file or stdout`);
  const seconds = Number(values.seconds);
  const warmupS = Number(values.warmup);
  if (!(seconds > 0) || !(warmupS >= 0)) throw new Error('--seconds takes a positive number, --warmup zero or more');
  const levels = values.concurrency!.split(',').map(parseLevel);
  return { values, seconds, warmupS, levels };
}

/** What {@link rpcOptions} returns. */
type RpcOptions = ReturnType<typeof rpcOptions>;

/** ipamd's `GET /v1/stage-trace`: per stage, its sample count and latency quantiles (ms). */
type StageTrace = Record<string, { count: number; p50: number; p90: number; p99: number; max: number }>;

/** The node as {@link createRpcNode} sets it up, and the gRPC client the rows use. */
interface RpcBench {
  opt: RpcOptions;
  sim: SimCloud;
  node: SimNode;
  c: ReturnType<typeof pluginClient> | TestIpamdClient;
  /** MINIMUM_IP_TARGET: the available addresses waited for before the first row. */
  minimum: number;
  /** How ipamd is run, for the heading: "V8 defaults" or `node <flags>`. */
  runAs: string;
}

/**
 * Creates (does not start) the c5.4xlarge node on `sim` with the warm and minimum targets
 * the highest concurrency needs and no cooldown, run and logging as `opt` says, and its
 * client (grpc-js or the plugin's).
 */
async function createRpcNode(opt: RpcOptions, sim: SimCloud): Promise<RpcBench> {
  const { values, levels } = opt;
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/20' });
  const maxConc = Math.max(...levels.map((l) => l.conc));
  const warm = 2 * maxConc;
  const minimum = Math.min(3 * maxConc, 8 * 29); // c5.4xlarge: 8 ENIs of 30 addresses, one of them primary

  const node = await createSimNode({
    sim,
    subnetId: subnet.subnetId,
    instanceType: 'c5.4xlarge',
    mode: 'child',
    cri: false,
    env: { WARM_IP_TARGET: String(warm), MINIMUM_IP_TARGET: String(minimum), IP_COOLDOWN_PERIOD: '0' },
  });
  // The chart's default: ipamd logs to a rotating file (AWS_VPC_K8S_CNI_LOG_FILE), not to a pipe this process reads.
  if (values.log === 'file') node.env.AWS_VPC_K8S_CNI_LOG_FILE = path.join(node.dir, 'log', 'ipamd.log');
  const v8 = values['v8-defaults'];
  const flags = values['node-flags']?.split(' ').filter(Boolean) ?? (v8 ? [] : IPAMD_NODE_FLAGS);
  const runAs = v8 && !values['node-flags'] ? 'V8 defaults' : `node ${flags.join(' ')}`;
  node.childPrefix = childPrefix(flags, v8 ? {} : IPAMD_MALLOC_ENV, values.ipamd);
  const c = values.client === 'plugin' ? pluginClient(node.socket) : ipamdClient(node.socket);
  return { opt, sim, node, c, minimum, runAs };
}

/**
 * Starts ipamd from a checkpoint remembering `--released` DELs, waits (at most 30 s) for
 * the minimum target available, then 50 ADD+DEL pairs and `--warmup` s of the first row's
 * load, none of it measured.
 */
async function startAndWarm(b: RpcBench): Promise<void> {
  const { node, c, minimum, opt } = b;
  await seedReleasedCheckpoint(node.checkpoint, Number(opt.values.released));
  await node.start();
  for (const until = Date.now() + 30_000; Date.now() < until && (await node.status()).counts.available < minimum;)
    await sleep(100);
  for (let i = 0; i < 50; i++) {
    await c.add(`warmup${i}`);
    await c.del(`warmup${i}`);
  }
  // The first row's load, unmeasured: a paced row that starts on a cold JIT falls behind
  // and its backlog lasts the whole row (a first row's p50 of hundreds of ms).
  if (opt.warmupS > 0) await offerLoad(c, opt.levels[0]!, opt.warmupS, 'warm');
}

/**
 * Offers row `rowNo`'s `level` for `--seconds` and returns its table row: pairs/s, pair,
 * ADD and DEL p50 / p99 (ms), ipamd's and the bench's CPU per pair (ms), errors, EC2 calls.
 */
async function measureRow(b: RpcBench, rowNo: number, level: { conc: number; rate?: number }): Promise<string> {
  const { sim, node, c } = b;
  const { conc, rate } = level;
  const calls0 = sim.countCalls();
  const cpu0 = cpuMsOf(node.pid);
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  const { pairMs, addMs, delMs, errors } = await offerLoad(c, level, b.opt.seconds, `row${rowNo}`);
  const el = (performance.now() - t0) / 1000;
  const cpu1 = cpuMsOf(node.pid);
  const own = process.cpuUsage(own0);
  const cpuPerPair = cpu0 !== undefined && cpu1 !== undefined && pairMs.length ? (cpu1 - cpu0) / pairMs.length : NaN;
  const q = (xs: number[]) => `${quantile(xs, 0.5).toFixed(2)} / ${quantile(xs, 0.99).toFixed(2)}`;
  return row([
    rate ? `${conc}, paced at ${rate}/s` : conc,
    (pairMs.length / el).toFixed(0),
    q(pairMs),
    q(addMs),
    q(delMs),
    cpuPerPair.toFixed(2),
    pairMs.length ? ((own.user + own.system) / 1000 / pairMs.length).toFixed(2) : 'NaN',
    errors,
    sim.countCalls() - calls0,
  ]);
}

/**
 * Prints the heading, the table of `out` (one row per level, from {@link measureRow}) and
 * each of `traces` (a row's label, ipamd's stage trace after it; an empty trace is skipped).
 */
function printRpcReport(b: RpcBench, out: string[], traces: Array<[string, StageTrace]>): void {
  const { values, seconds } = b.opt;
  console.log(
    `ipamd ADD+DEL pairs over the Unix socket, warm pool, checkpoint durable on every change (group commit), ${values.released} DELs remembered, ${values.client} clients on one channel, ${seconds} s per row, ${machineLine(os.cpus().length)}, ipamd ${values.ipamd ?? 'this build'} (${b.runAs}), load ${os.loadavg()[0]!.toFixed(1)}`,
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
      'EC2 calls',
    ]),
  );
  console.log(row(Array(9).fill('---')));
  for (const l of out) console.log(l);
  for (const [conc, tr] of traces) {
    if (Object.keys(tr).length === 0) continue; // an ipamd without the trace
    console.log(`\nipamd stage trace after the ${conc} row (ms; last ${'4096'} samples per stage)`);
    console.log(row(['stage', 'count', 'p50', 'p90', 'p99']));
    console.log(row(Array(5).fill('---')));
    for (const [stage, v] of Object.entries(tr))
      console.log(row([stage, v.count, v.p50.toFixed(3), v.p90.toFixed(3), v.p99.toFixed(3)]));
  }
}

/** The bench (see the file's header): the rows, then the table once the node is closed. */
async function main(): Promise<void> {
  const opt = rpcOptions();
  const { levels } = opt;
  delete process.env.NODE_EXTRA_CA_CERTS;
  const sim = new SimCloud({ seed: 3 });
  await sim.start();
  const b = await createRpcNode(opt, sim);
  const { node, c } = b;
  const out: string[] = [];
  const traces: Array<[string, StageTrace]> = [];
  try {
    await startAndWarm(b);
    for (const [rowNo, level] of levels.entries()) {
      const { conc, rate } = level;
      out.push(await measureRow(b, rowNo, level));
      if (level === levels[0] || level === levels[levels.length - 1])
        traces.push([
          rate ? `${conc}-client (paced at ${rate}/s)` : `${conc}-client`,
          (await (node.introspect?.('/v1/stage-trace') ?? Promise.resolve({})).catch(() => ({}))) as StageTrace,
        ]);
    }
  } finally {
    c.close();
    await node.close();
    await sim.stop();
  }
  printRpcReport(b, out, traces);
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
