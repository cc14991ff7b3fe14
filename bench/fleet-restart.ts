/**
 * bench: a fleet of ipamd instances restarting together against one simulated account
 * whose EC2 throttles each action class (Describe*, mutating) with a token bucket of
 * burst 100, refill 20/s — as EC2 does per account (AWS EC2 Developer Guide, "Request
 * throttling"). Prints figures, no pass/fail.
 *
 * One SimCloud on the main thread (EC2 and IMDS over HTTP), `--nodes` instances (m5.large)
 * launched in it, each with its own IMDS view (`sim.imdsEndpointFor(id)`). The nodes run in
 * `--workers` worker threads (default 1; bench/fleet/worker.ts), each running its share of
 * real ipamd in-process (startDaemon), each ipamd with its own temp dir and CRI stand-in
 * (explicit dummy AWS credentials in the environment, since the SDK's instance-profile
 * lookup would only see the default instance). The simulated cloud has a thread of its own
 * because AWS answers EC2 and IMDS on its own machines: on the daemons' event loop, its
 * work (15–17 % of the loop's busy time in a restart's profile, its GC and socket reads
 * not counted) and the daemons' delayed each other. With the default one worker, the 200
 * daemons still share one event loop, where each would have a node's CPU: the figure is a
 * bound from above.
 *   1. Warm-up, unthrottled: start every node (25 at a time in all), run `--pods` pods
 *      on each, let the pools settle.
 *   2. Stop every ipamd (graceful), switch throttling on, start them all at once. A
 *      start that fails is retried after 2 s, doubling up to 32 s (a kubelet restarting
 *      the pod; kubelet's own back-off starts at 10 s).
 *   3. As each node serves: repeat the ADD of every pod it had (must return the same IP)
 *      and ADD `--new-pods` new pods.
 * Reports: time until all serve, start failures, pods failed (target: none), EC2 calls
 * and throttled calls after the restart, start-up reads per start, time until EC2 calls
 * die down, RSS and CPU (the whole process: every thread). `--no-limits-cache` deletes
 * each node's cached instance-type limits before the restart (every start then makes its
 * one DescribeInstanceTypes).
 *
 * The daemons share this process's one libuv thread pool (4 threads unless
 * UV_THREADPOOL_SIZE says otherwise), where 200 ipamd processes would have 4 each: every
 * file operation of every start (checkpoint and cache writes with fsync) queues there.
 * The header says which size ran; `UV_THREADPOOL_SIZE=64` comes closer to separate processes.
 * The daemons of one worker also share what ipamd keeps once per process: the CNI exec
 * servers' spawn helper and netlink helper, and the parsed gRPC service definition (one
 * daemon per process on a node, so the same cost there).
 * `--cpu-prof FILE` writes V8 CPU profiles of the restart phase (from the restart until
 * every pod ADD is answered): FILE for the main thread (the simulated cloud), FILE.wN for
 * worker N, to see where the per-start CPU goes.
 *
 *   node dist/bench/fleet-restart.js [--nodes 200] [--pods 5] [--new-pods 2] [--burst 100] [--refill 20] [--workers N] [--no-limits-cache] [--cpu-prof FILE]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { SimCloud, type ApiCallRecord } from '../sim/index.js';
import { ensureDummyAwsCredentials } from '../kit/sim-node.js';
import { callsByAction, isMutating, machineLine, rssMiB, sleep, throttledCalls } from './bench-util.js';
import type { FleetCall, FleetReply, FleetRequest, FleetWorkerData, NodeRestartResult } from './fleet/messages.js';
import { startCpuProfile } from './fleet/profile.js';
import { quantile } from './stats.js';

/** One node worker (bench/fleet/worker.ts) and request/answer over its message port. */
class FleetWorker {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve(r: FleetReply): void; reject(e: Error): void }>();
  private seq = 0;

  constructor(readonly data: FleetWorkerData) {
    this.worker = new Worker(new URL('./fleet/worker.js', import.meta.url), { workerData: data });
    this.worker.on('message', (r: FleetReply) => {
      const w = this.waiting.get(r.id);
      this.waiting.delete(r.id);
      if (r.error) w?.reject(new Error(`fleet worker: ${r.error}`));
      else w?.resolve(r);
    });
    this.worker.on('error', (e) => this.failAll(e));
    this.worker.on('exit', (code) => this.failAll(new Error(`fleet worker exited with code ${code}`)));
  }

  /** Sends `req`; resolves with the worker's answer. @throws Error when the worker fails it or dies. */
  call(req: FleetCall): Promise<FleetReply> {
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ ...req, id } satisfies FleetRequest);
    });
  }

  /** Ends the thread. */
  async terminate(): Promise<void> {
    await this.worker.terminate();
  }

  private failAll(e: Error): void {
    for (const w of this.waiting.values()) w.reject(e);
    this.waiting.clear();
  }
}

async function waitQuiet(sim: SimCloud, quietMs: number, maxMs: number): Promise<void> {
  for (const until = Date.now() + maxMs; Date.now() < until && Date.now() - (sim.calls.at(-1)?.at ?? 0) < quietMs;)
    await sleep(200);
}

/** The command line: `--nodes`, `--pods`, `--new-pods`, `--burst`, `--refill`, `--workers`, `--no-limits-cache`, `--cpu-prof`. */
function fleetOptions() {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '200' },
      pods: { type: 'string', default: '5' },
      'new-pods': { type: 'string', default: '2' },
      burst: { type: 'string', default: '100' },
      refill: { type: 'string', default: '20' },
      workers: { type: 'string', default: '1' },
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
    workers: Number(values.workers),
    noLimitsCache: values['no-limits-cache'] ?? false,
  };
  return { o, values };
}

type FleetOptions = ReturnType<typeof fleetOptions>['o'];

/** Everything {@link printFleetReport} prints: options, per-node results, the EC2 calls of the window, times (ms), CPU, RSS. */
interface FleetReport {
  o: FleetOptions;
  allServingMs: number;
  served: number[];
  results: NodeRestartResult[];
  failedPods: string[];
  podsDoneMs: number;
  windowS: number;
  calls: ApiCallRecord[];
  desc: ApiCallRecord[];
  mut: ApiCallRecord[];
  lastThrottledMs: number;
  unconfirmed: number;
  rssWarm: number | string;
  cpuToServed: NodeJS.CpuUsage;
  confirmedMs: number;
  cpuToConfirmed: NodeJS.CpuUsage;
  cpu: NodeJS.CpuUsage;
  startErrors: string[];
}

/** Prints the fleet restart's figures as a Markdown table (the form docs/ keeps). */
function printFleetReport(f: FleetReport): void {
  const {
    o,
    allServingMs,
    served,
    results,
    failedPods,
    podsDoneMs,
    windowS,
    calls,
    desc,
    mut,
    lastThrottledMs,
    unconfirmed,
    rssWarm,
    cpuToServed,
    confirmedMs,
    cpuToConfirmed,
    cpu,
    startErrors,
  } = f;
  console.log(
    `Fleet restart: ${o.nodes} ipamd (m5.large, default WARM_ENI_TARGET=1, ${o.pods} pods each) restarting together in ${o.workers} worker thread(s) of one process (the simulated cloud on the main thread) against one simulated account, ` +
      `throttled per class at burst ${o.burst} / refill ${o.refill}/s, EC2 latency 5–30 ms, UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'}, ${machineLine(os.cpus().length)}`,
  );
  console.log('| figure | value |\n|---|---|');
  console.log(
    `| time until all ${o.nodes} serve | ${(allServingMs / 1000).toFixed(1)} s (p50 ${(quantile(served, 0.5) / 1000).toFixed(1)} s, p90 ${(quantile(served, 0.9) / 1000).toFixed(1)} s) |`,
  );
  console.log(
    `| starts that failed and were retried | ${results.reduce((s, r) => s + r.startFailures, 0)} (on ${results.filter((r) => r.startFailures > 0).length} nodes) |`,
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
  const starts = results.reduce((s, r) => s + 1 + r.startFailures, 0);
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
  // The window above ends when the last ADD is answered: a shorter restart leaves more of
  // each start's later work (its EC2 confirm after a jitter) out. This one holds all of it.
  console.log(
    `| same, until every start's EC2 confirm is done (${(confirmedMs / 1000).toFixed(1)} s), per start | ${((cpuToConfirmed.user + cpuToConfirmed.system) / 1e3 / starts).toFixed(1)} ms |`,
  );
  console.log(`| bench process CPU (user + system), whole run | ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s |`);
  for (const p of failedPods.slice(0, 10)) console.log(`  failed: ${p}`);
  for (const e of startErrors.slice(0, 10)) console.log(`  start failed: ${e}`);
}

async function main(): Promise<void> {
  const { o, values } = fleetOptions();
  if (!Number.isInteger(o.workers) || o.workers < 1)
    throw new Error(`--workers: a whole number ≥ 1, got ${values.workers}`);
  delete process.env.NODE_EXTRA_CA_CERTS;
  ensureDummyAwsCredentials(); // before the workers start: they copy this environment
  const sim = new SimCloud({ seed: 5 });
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/17' });
  sim.faults.setLatency('*', { min: 5, max: 30 });
  const workers: FleetWorker[] = [];
  const all = (req: FleetCall) => Promise.all(workers.map((w) => w.call(req)));
  const cpu0 = process.cpuUsage();
  try {
    const nodes = Array.from({ length: o.nodes }, () => {
      const id = sim.launchInstance({ instanceType: 'm5.large', subnetId: subnet.subnetId }).instanceId;
      return { instanceId: id, imdsEndpoint: sim.imdsEndpointFor(id) };
    });
    const env = { ENI_IPAM_FAST_RESTART: process.env.ENI_IPAM_FAST_RESTART ?? 'true' };
    for (let w = 0; w < o.workers; w++)
      workers.push(
        new FleetWorker({ ec2Endpoint: sim.ec2Endpoint, env, nodes: nodes.filter((_, i) => i % o.workers === w) }),
      );
    // 1. Warm-up.
    await all({ op: 'warm-up', pods: o.pods, batch: Math.ceil(25 / o.workers) });
    await waitQuiet(sim, 3000, 120_000);
    const rssWarm = rssMiB();
    // 2. Restart together, throttled.
    await all({ op: 'stop', dropLimitsCache: o.noLimitsCache });
    sim.faults.setThrottle('describe', { burst: o.burst, refillPerSecond: o.refill });
    sim.faults.setThrottle('mutating', { burst: o.burst, refillPerSecond: o.refill });
    const from = sim.calls.length;
    const prof = values['cpu-prof'] ? await startCpuProfile() : undefined;
    if (prof) await all({ op: 'profile', action: 'start' });
    const cpuRestart0 = process.cpuUsage();
    const t0 = Date.now();
    // 3. As each node serves, its pods: the old ones keep their IPs, new ones get one.
    const results: NodeRestartResult[] = (await all({ op: 'restart', t0, newPods: o.newPods })).flatMap(
      (r) => r.restart ?? [],
    );
    const failedPods = results.flatMap((r) => r.failedPods);
    const startErrors = results.flatMap((r) => r.startErrors);
    const allServingMs = Math.max(...results.map((r) => r.servedAtMs));
    const cpuToServed = process.cpuUsage(cpuRestart0);
    if (prof) {
      const file = values['cpu-prof']!;
      await prof.stop(file);
      await Promise.all(workers.map((w, i) => w.call({ op: 'profile', action: 'stop', file: `${file}.w${i}` })));
      console.log(
        `CPU profiles of the restart (until all ADDs answered) written to ${file} (main) and ${file}.w0… (workers)`,
      );
    }
    const podsDoneMs = Date.now() - t0;
    // Every start's background confirm (one DescribeNetworkInterfaces after a jitter) counts: wait until all have confirmed (at most 60 s).
    const confirming = async () => (await all({ op: 'confirming' })).reduce((n, r) => n + (r.confirming ?? 0), 0);
    for (const until = Date.now() + 60_000; Date.now() < until && (await confirming()) > 0;) await sleep(200);
    const unconfirmed = await confirming();
    const cpuToConfirmed = process.cpuUsage(cpuRestart0);
    const confirmedMs = Date.now() - t0;
    // Let the pools finish their post-restart work: until no call was throttled for 10 s (at most 120 s more).
    const lastThrottled = () =>
      sim.calls.slice(from).reduce((m, c) => (c.errorCode === 'RequestLimitExceeded' ? Math.max(m, c.at) : m), t0);
    for (const until = Date.now() + 120_000; Date.now() < until && Date.now() - lastThrottled() < 10_000;)
      await sleep(500);
    const calls = sim.calls.slice(from);
    const lastThrottledMs = lastThrottled() - t0;
    const windowS = (Date.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const served = results.map((r) => r.servedAtMs);
    const desc = calls.filter((c) => !isMutating(c.action));
    const mut = calls.filter((c) => isMutating(c.action));
    printFleetReport({
      o,
      allServingMs,
      served,
      results,
      failedPods,
      podsDoneMs,
      windowS,
      calls,
      desc,
      mut,
      lastThrottledMs,
      unconfirmed,
      rssWarm,
      cpuToServed,
      confirmedMs,
      cpuToConfirmed,
      cpu,
      startErrors,
    });
  } finally {
    await Promise.all(workers.map((w) => w.call({ op: 'close' }).catch((e: Error) => console.error(e.message))));
    await Promise.all(workers.map((w) => w.terminate()));
    await sim.stop();
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
