/**
 * bench: a fleet of ipamd instances restarting together against one simulated account
 * whose EC2 throttles each action class (Describe*, mutating) with a token bucket of
 * burst 100, refill 20/s — as EC2 does per account (AWS EC2 Developer Guide, "Request
 * throttling"). Prints figures, no pass/fail.
 *
 * One SimCloud, `--nodes` instances (m5.large) launched in it, each with its own IMDS
 * view (`sim.imdsEndpointFor(id)`), temp dir, CRI stand-in and real ipamd, all in this
 * process (startDaemon; explicit dummy AWS credentials in the environment, since the
 * SDK's instance-profile lookup would only see the default instance).
 *   1. Warm-up, unthrottled: start every node (25 at a time), run `--pods` pods on each,
 *      let the pools settle.
 *   2. Stop every ipamd (graceful), switch throttling on, start them all at once. A
 *      start that fails is retried after 2 s, doubling up to 32 s (a kubelet restarting
 *      the pod; kubelet's own back-off starts at 10 s).
 *   3. As each node serves: repeat the ADD of every pod it had (must return the same IP)
 *      and ADD `--new-pods` new pods.
 * Reports: time until all serve, start failures, pods failed (target: none), EC2 calls
 * and throttled calls after the restart, start-up reads per start, time until EC2 calls
 * die down, RSS and CPU. `--no-limits-cache` deletes each node's cached instance-type
 * limits before the restart (every start then makes its one DescribeInstanceTypes).
 *
 * The 200 daemons share this process's one libuv thread pool (4 threads unless
 * UV_THREADPOOL_SIZE says otherwise), where 200 ipamd processes would have 4 each: every
 * file operation of every start (checkpoint and cache writes with fsync) queues there.
 * The header says which size ran; `UV_THREADPOOL_SIZE=64` comes closer to separate processes.
 * They also share what ipamd keeps once per process: the CNI exec servers' spawn helper
 * and netlink helper, and the parsed gRPC service definition (one daemon per process on a
 * node, so the same cost there).
 * `--cpu-prof FILE` writes a V8 CPU profile of the restart phase (from the restart until
 * every pod ADD is answered) to FILE, to see where the per-start CPU goes.
 *
 *   node dist/bench/fleet-restart.js [--nodes 200] [--pods 5] [--new-pods 2] [--burst 100] [--refill 20] [--no-limits-cache] [--cpu-prof FILE]
 */
import { rm, writeFile } from 'node:fs/promises';
import inspector from 'node:inspector';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SimCloud } from '../sim/index.js';
import { ipamdClient, type GrpcError, type TestIpamdClient } from '../test/helpers/ipamd-client.js';
import { createSimNode, type SimNode } from '../test/property/sim-node.js';
import { callsByAction, isMutating, machineLine, rssMiB, sleep, throttledCalls } from './bench-util.js';
import { quantile } from './stats.js';

interface FleetNode {
  node: SimNode;
  client: TestIpamdClient;
  pods: Map<string, string>;
  servedAtMs?: number;
  startFailures: number;
}

async function addPod(f: FleetNode, id: string): Promise<string> {
  f.node.cri?.add({ id, name: `pod-${id}`, namespace: 'fleet', uid: `uid-${id}` });
  const r = await f.client.add(id);
  f.node.cri?.setIp(id, r.ipv4_addr);
  return r.ipv4_addr;
}

/** Starts the V8 CPU profiler of this process (node:inspector); `stop(file)` writes the .cpuprofile. */
async function startProfile(): Promise<{ stop(file: string): Promise<void> }> {
  const session = new inspector.Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<{ profile?: object }>((resolve, reject) =>
      session.post(method, params, (e, r) => (e ? reject(e) : resolve(r as { profile?: object }))),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 500 });
  await post('Profiler.start');
  return {
    async stop(file) {
      const { profile } = await post('Profiler.stop');
      await writeFile(file, JSON.stringify(profile));
      session.disconnect();
      console.log(`CPU profile of the restart (until all ADDs answered) written to ${file}`);
    },
  };
}

async function waitQuiet(sim: SimCloud, quietMs: number, maxMs: number): Promise<void> {
  for (const until = Date.now() + maxMs; Date.now() < until && Date.now() - (sim.calls.at(-1)?.at ?? 0) < quietMs;)
    await sleep(200);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '200' },
      pods: { type: 'string', default: '5' },
      'new-pods': { type: 'string', default: '2' },
      burst: { type: 'string', default: '100' },
      refill: { type: 'string', default: '20' },
      'no-limits-cache': { type: 'boolean', default: false },
      'cpu-prof': { type: 'string' },
    },
  });
  const o = {
    nodes: Number(values.nodes),
    pods: Number(values.pods),
    newPods: Number(values['new-pods']),
    burst: Number(values.burst),
    refill: Number(values.refill),
    noLimitsCache: values['no-limits-cache'] ?? false,
  };
  delete process.env.NODE_EXTRA_CA_CERTS;
  const sim = new SimCloud({ seed: 5 });
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/17' });
  sim.faults.setLatency('*', { min: 5, max: 30 });
  const fleet: FleetNode[] = [];
  const cpu0 = process.cpuUsage();
  try {
    for (let i = 0; i < o.nodes; i++) {
      const node = await createSimNode({
        sim,
        subnetId: subnet.subnetId,
        instanceType: 'm5.large',
        env: { ENI_IPAM_FAST_RESTART: process.env.ENI_IPAM_FAST_RESTART ?? 'true' },
      });
      fleet.push({ node, client: ipamdClient(node.socket), pods: new Map(), startFailures: 0 });
    }
    // 1. Warm-up.
    for (let i = 0; i < fleet.length; i += 25) {
      await Promise.all(
        fleet.slice(i, i + 25).map(async (f) => {
          await f.node.start();
          for (let p = 0; p < o.pods; p++)
            f.pods.set(`${f.node.instanceId}-p${p}`, await addPod(f, `${f.node.instanceId}-p${p}`));
        }),
      );
    }
    await waitQuiet(sim, 3000, 120_000);
    const rssWarm = rssMiB();
    // 2. Restart together, throttled.
    // A node's kubelet calls only once the node serves: each client closes here (its channel
    // would otherwise retry the missing socket with back-off through the restart, CPU this
    // process shares with the daemons) and a new one connects once its node serves.
    await Promise.all(
      fleet.map(async (f) => {
        await f.node.stop();
        f.client.close();
      }),
    );
    if (o.noLimitsCache)
      await Promise.all(fleet.map((f) => rm(path.join(f.node.dir, 'instance-limits.json'), { force: true })));
    sim.faults.setThrottle('describe', { burst: o.burst, refillPerSecond: o.refill });
    sim.faults.setThrottle('mutating', { burst: o.burst, refillPerSecond: o.refill });
    const from = sim.calls.length;
    const prof = values['cpu-prof'] ? await startProfile() : undefined;
    const cpuRestart0 = process.cpuUsage();
    const t0 = Date.now();
    const failedPods: string[] = [];
    const startErrors: string[] = [];
    let newSeq = 0;
    await Promise.all(
      fleet.map(async (f) => {
        for (let backoff = 2000; ; backoff = Math.min(backoff * 2, 32_000)) {
          try {
            await f.node.start();
            break;
          } catch (e) {
            f.startFailures++;
            startErrors.push(`${f.node.instanceId}: ${(e as Error).message}`);
            await sleep(backoff);
          }
        }
        f.servedAtMs = Date.now() - t0;
        f.client = ipamdClient(f.node.socket);
        // 3. Pods: the old ones keep their IPs, new ones get one.
        await Promise.all(
          [...f.pods].map(async ([id, ip]) => {
            try {
              const got = await addPod(f, id);
              if (got !== ip) failedPods.push(`${id}: had ${ip}, repeated ADD returned ${got}`);
            } catch (e) {
              failedPods.push(`${id} (existing): ${(e as GrpcError).details ?? (e as Error).message}`);
            }
          }),
        );
        await Promise.all(
          Array.from({ length: o.newPods }, async () => {
            const id = `${f.node.instanceId}-new${newSeq++}`;
            try {
              await addPod(f, id);
            } catch (e) {
              failedPods.push(`${id} (new): ${(e as GrpcError).details ?? (e as Error).message}`);
            }
          }),
        );
      }),
    );
    const allServingMs = Math.max(...fleet.map((f) => f.servedAtMs ?? Infinity));
    const cpuToServed = process.cpuUsage(cpuRestart0);
    if (prof) await prof.stop(values['cpu-prof']!);
    const podsDoneMs = Date.now() - t0;
    // Every start's background confirm (one DescribeNetworkInterfaces after a jitter) counts: wait until all have confirmed (at most 60 s).
    const confirming = () =>
      fleet.filter((f) => f.node.daemonHandle?.gate.describe().some((d) => d.startsWith('ec2-confirm')));
    for (const until = Date.now() + 60_000; Date.now() < until && confirming().length > 0;) await sleep(200);
    const unconfirmed = confirming().length;
    // Let the pools finish their post-restart work: until no call was throttled for 10 s (at most 120 s more).
    const lastThrottled = () =>
      sim.calls.slice(from).reduce((m, c) => (c.errorCode === 'RequestLimitExceeded' ? Math.max(m, c.at) : m), t0);
    for (const until = Date.now() + 120_000; Date.now() < until && Date.now() - lastThrottled() < 10_000;)
      await sleep(500);
    const calls = sim.calls.slice(from);
    const lastThrottledMs = lastThrottled() - t0;
    const windowS = (Date.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const served = fleet.map((f) => f.servedAtMs ?? Infinity);
    const desc = calls.filter((c) => !isMutating(c.action));
    const mut = calls.filter((c) => isMutating(c.action));
    console.log(
      `Fleet restart: ${o.nodes} ipamd (m5.large, default WARM_ENI_TARGET=1, ${o.pods} pods each) restarting together in one process against one simulated account, ` +
        `throttled per class at burst ${o.burst} / refill ${o.refill}/s, EC2 latency 5–30 ms, UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'}, ${machineLine(os.cpus().length)}`,
    );
    console.log('| figure | value |\n|---|---|');
    console.log(
      `| time until all ${o.nodes} serve | ${(allServingMs / 1000).toFixed(1)} s (p50 ${(quantile(served, 0.5) / 1000).toFixed(1)} s, p90 ${(quantile(served, 0.9) / 1000).toFixed(1)} s) |`,
    );
    console.log(
      `| starts that failed and were retried | ${fleet.reduce((s, f) => s + f.startFailures, 0)} (on ${fleet.filter((f) => f.startFailures > 0).length} nodes) |`,
    );
    console.log(
      `| pods failed (of ${o.nodes * (o.pods + o.newPods)}: ${o.pods} existing + ${o.newPods} new per node) | ${failedPods.length} |`,
    );
    console.log(`| all pod ADDs answered | ${(podsDoneMs / 1000).toFixed(1)} s |`);
    console.log(
      `| EC2 calls in the ${windowS.toFixed(0)} s after the restart (Describe* / mutating) | ${calls.length} (${desc.length} / ${mut.length}) |`,
    );
    console.log(
      `| throttled (RequestLimitExceeded) (Describe* / mutating) | ${throttledCalls(calls)} (${throttledCalls(desc)} / ${throttledCalls(mut)}) |`,
    );
    console.log(`| last throttled call after the restart | ${(lastThrottledMs / 1000).toFixed(1)} s |`);
    console.log(`| calls by action | ${[...callsByAction(calls)].map(([a, n]) => `${a} ${n}`).join(', ')} |`);
    const starts = fleet.reduce((s, f) => s + 1 + f.startFailures, 0);
    const perStart = (action: string) => (calls.filter((c) => c.action === action).length / starts).toFixed(2);
    console.log(
      `| DescribeInstanceTypes and DescribeNetworkInterfaces per start, in the window, attempts incl. throttled (${starts} starts${o.noLimitsCache ? ', limits cache deleted' : ''}) | DescribeInstanceTypes ${perStart('DescribeInstanceTypes')}, DescribeNetworkInterfaces ${perStart('DescribeNetworkInterfaces')} |`,
    );
    console.log(
      `| EC2 attempts per start, all actions (every start's confirm in the window; ${unconfirmed} not confirmed) | ${(calls.length / starts).toFixed(2)} (DescribeSubnets ${perStart('DescribeSubnets')}) |`,
    );
    console.log(`| bench process RSS after warm-up / at the end | ${rssWarm} / ${rssMiB()} MiB |`);
    console.log(
      `| bench process CPU (user + system) from the restart until all pod ADDs answered, per start | ${((cpuToServed.user + cpuToServed.system) / 1e3 / starts).toFixed(1)} ms |`,
    );
    console.log(`| bench process CPU (user + system), whole run | ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s |`);
    for (const p of failedPods.slice(0, 10)) console.log(`  failed: ${p}`);
    for (const e of startErrors.slice(0, 10)) console.log(`  start failed: ${e}`);
  } finally {
    await Promise.all(
      fleet.map(async (f) => {
        f.client.close();
        await f.node.close();
      }),
    );
    await sim.stop();
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
