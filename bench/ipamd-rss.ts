/**
 * bench: ipamd's resident memory (VmRSS from /proc/<pid>/status, MiB) — the figure the
 * chart's memory request and limit come from. ipamd is the real binary in a child
 * process on the simulated cloud, with metrics, introspection, the CRI source (a CRI
 * stand-in listing the sandboxes) and the Kubernetes source (the API stand-in listing
 * the pods, MY_NODE_NAME + KUBECONFIG) on, in prefix mode on an m5.large so it can hold
 * 250 allocations. ipamd starts from a checkpoint of this boot that remembers `--released`
 * (4096) DELs, the datastore's cap, as a node has after 4096 pod deletions: without it the
 * remembered DELs would fill during the churn (~2,400 pairs in 10 min) and read as growth.
 * Samples: idle after start, after 250 ADDs, then after `--churn` seconds of DEL+ADD pairs
 * (about 4 a second, the default 30 s cooldown on) at 250 held (growth, if any, shows as
 * the difference; the peak of samples every 10 s too, and one sample a minute), and the
 * CPU ipamd used per churn pair (ms, /proc/<pid>/stat).
 * Then a restart with the 250 held: graceful stop, spawn, time until the first AddNetwork
 * is answered (process start included: a held pod's ADD repeated from the spawn on, every
 * 2 ms on a new connection, as a runtime retrying it would; the answer must be the pod's
 * address) and until its log file shows "ipamd serving" (the log line reaches the file a
 * batch later, behind the start's own file writes), with the EC2 calls made until serving;
 * and the RSS after it. Prints figures, no pass/fail.
 *
 * ipamd runs as the image's entrypoint runs it (IPAMD_MALLOC_ENV + IPAMD_NODE_FLAGS);
 * `--v8-defaults` runs plain `node main.js` (V8's and glibc's defaults) for comparison;
 * `--node-flag F` (repeatable) adds a node flag after the entrypoint's (trying V8 flags).
 * `--split` also prints where the resident set is at each sample (/proc/<pid>/smaps_rollup:
 * anonymous vs file-backed, MiB); `--heap-snapshot` writes a V8 heap snapshot of ipamd at
 * `--pods` held and another after the churn (SIGUSR2 with `--heapsnapshot-signal`, into the
 * bench's working directory; each is taken after a full GC, so their difference is what
 * the churn left alive).
 *
 * ipamd logs as the chart has it log, to a rotating file (AWS_VPC_K8S_CNI_LOG_FILE) in its
 * node dir; `--log stdout` has it log to stdout (a pipe this process copies to a file).
 *
 * `--restarts N` restarts N times and reports the median (each one listed); `--timeline` prints
 * each restart's log lines as ms after the spawn (where the time to serving goes);
 * `--a-dist DIR` alternates the restarts between another build's `DIR/ipamd/main.js` (A,
 * first) and this one (B), for a same-run A/B (e.g. `cp -r dist dist-a` before a change;
 * keep it beside `dist` so it finds node_modules and proto/).
 *
 *   node dist/bench/ipamd-rss.js [--pods 250] [--churn 600] [--released 4096] [--quick] [--log file|stdout] [--v8-defaults] [--node-flag F]... [--split] [--heap-snapshot] [--restarts N] [--timeline] [--a-dist DIR]   (--quick: 30 s of churn)
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { SimCloud } from '../sim/index.js';
import { KubeApiStandIn } from '../sim/kube/index.js';
import { IPAMD_MALLOC_ENV, IPAMD_NODE_FLAGS } from '../ipamd/v8-flags.js';
import { ipamdClient, type TestIpamdClient } from '../kit/ipamd-client.js';
import { createSimNode, type SimNode } from '../kit/sim-node.js';
import { seedReleasedCheckpoint, sleep } from './bench-util.js';
import {
  cpuSeconds,
  firstAddAnswered,
  heapMiB,
  printTimeline,
  rssSplit,
  statSize,
  vmRssMiB,
} from './ipamd-rss-probes.js';
import { printRssReport, type ChurnResult, type NodeStatus, type RestartResult } from './ipamd-rss-report.js';

/**
 * The command line (see the file's header): the parsed `values`, `pods` (allocations
 * held) and `churnS` (seconds of churn: `--churn`, else 30 with `--quick`, else 600).
 * @throws Error when `--log` is neither file nor stdout.
 */
function rssOptions() {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '250' },
      released: { type: 'string', default: '4096' },
      churn: { type: 'string' },
      quick: { type: 'boolean', default: false },
      log: { type: 'string', default: 'file' },
      'v8-defaults': { type: 'boolean', default: false },
      'node-flag': { type: 'string', multiple: true, default: [] },
      split: { type: 'boolean', default: false },
      'heap-snapshot': { type: 'boolean', default: false },
      restarts: { type: 'string', default: '1' },
      'a-dist': { type: 'string' },
      timeline: { type: 'boolean', default: false },
    },
  });
  if (values.log !== 'file' && values.log !== 'stdout') throw new Error(`--log: "${values.log}" is not file or stdout`);
  const pods = Number(values.pods);
  const churnS = Number(values.churn ?? (values.quick ? 30 : 600));
  return { values, pods, churnS };
}

/** What {@link rssOptions} returns. */
type RssOptions = ReturnType<typeof rssOptions>;

/**
 * The bench's running state, shared by its steps: the options, the simulated cloud and
 * API server, the node (ipamd in a child process) and a gRPC client to it, ipamd's log
 * file, and what the ADDs recorded (each ADD's time in ms; each held pod's address).
 */
interface RssBench {
  opt: RssOptions;
  sim: SimCloud;
  kube: KubeApiStandIn;
  /** Temporary directory holding the API stand-in's kubeconfig; removed at the end. */
  kdir: string;
  nodeName: string;
  node: SimNode;
  /** ipamd's log: the rotating file (`--log file`) or the copy of its stdout. */
  ipamdLog: string;
  c: TestIpamdClient;
  /** Each ADD's gRPC round trip, ms. */
  addMs: number[];
  /** Pod name → the IPv4 address its last ADD answered. */
  heldIp: Map<string, string>;
  /**
   * The command prefix that runs ipamd as the image's entrypoint does (undefined: plain
   * `node main.js`); `main` is another build's ipamd/main.js instead of this one's.
   */
  prefixFor: (main?: string) => string[] | undefined;
  /** `prefixFor()` for this build. */
  ownPrefix: string[] | undefined;
}

/**
 * Starts the simulated cloud and the API stand-in and creates (does not start) the
 * m5.large prefix-mode node with metrics, fast restart and the Kubernetes source on,
 * logging and run as `opt` says. Nothing is stopped if this throws.
 */
async function setUpRssBench(opt: RssOptions): Promise<RssBench> {
  const { values } = opt;
  delete process.env.NODE_EXTRA_CA_CERTS;
  const sim = new SimCloud({ seed: 7 });
  await sim.start();
  const kube = new KubeApiStandIn();
  await kube.start();
  const kdir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-rss-kube-'));
  const kubeconfig = path.join(kdir, 'kubeconfig');
  await kube.writeKubeconfig(kubeconfig);
  const nodeName = 'rss-node';
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/19' });
  const node = await createSimNode({
    sim,
    subnetId: subnet.subnetId,
    instanceType: 'm5.large',
    mode: 'child',
    env: {
      ENABLE_PREFIX_DELEGATION: 'true',
      WARM_PREFIX_TARGET: '1',
      DISABLE_METRICS: 'false',
      METRICS_BIND_ADDRESS: '127.0.0.1:0',
      ENI_IPAM_FAST_RESTART: 'true', // the restart figure is the fast path's
      MY_NODE_NAME: nodeName,
      KUBECONFIG: kubeconfig,
    },
  });
  // ipamd's own log: a rotating file as the chart sets it (AWS_VPC_K8S_CNI_LOG_FILE), or stdout (the kit's copy).
  const ipamdLog = path.join(node.dir, values.log === 'file' ? 'log/ipamd.log' : 'ipamd.log');
  if (values.log === 'file') node.env.AWS_VPC_K8S_CNI_LOG_FILE = ipamdLog;
  // Run as the image's entrypoint does (scripts/image/stage.mjs): malloc env + V8 flags, unless --v8-defaults.
  // `main`: another build's ipamd/main.js instead of this one's ("$1", what startIpamd passes).
  const prefixFor = (main?: string): string[] | undefined =>
    values['v8-defaults']
      ? main
        ? ['/bin/sh', '-c', `exec "$0" ${main}`]
        : undefined
      : [
          'env',
          ...Object.entries(IPAMD_MALLOC_ENV).map(([k, v]) => `${k}=${v}`),
          '/bin/sh',
          '-c',
          `exec "$0" ${[...IPAMD_NODE_FLAGS, ...values['node-flag'], ...(values['heap-snapshot'] ? ['--heapsnapshot-signal=SIGUSR2'] : [])].join(' ')} ${main ?? '"$@"'}`,
        ];
  const ownPrefix = prefixFor();
  if (ownPrefix) node.childPrefix = ownPrefix;
  const c = ipamdClient(node.socket);
  return { opt, sim, kube, kdir, nodeName, node, ipamdLog, c, addMs: [], heldIp: new Map(), prefixFor, ownPrefix };
}

/** Prints where `pid`'s resident set is (anonymous vs file-backed, MiB) under `label`, with `--split`. */
function printSplit(b: RssBench, label: string, pid: number): void {
  if (b.opt.values.split) console.log(`${label}: ${rssSplit(pid)}`);
}

/** With `--heap-snapshot`: has ipamd (`pid`) write a V8 heap snapshot (SIGUSR2), waits 5 s for it, says where. */
async function heapSnapshot(b: RssBench, pid: number, label: string): Promise<void> {
  if (!b.opt.values['heap-snapshot']) return;
  process.kill(pid, 'SIGUSR2');
  await sleep(5000);
  console.log(`heap snapshot of ${pid} (${label}) written to ${process.cwd()} (Heap.*.${pid}.*.heapsnapshot)`);
}

/** A pod `k` as the runtime and the API server see it, then its ADD (timed into `b.addMs`, its address into `b.heldIp`). */
async function addPod(b: RssBench, k: string): Promise<void> {
  const { node, c, kube, nodeName } = b;
  node.cri?.add({ id: k, name: k, namespace: 'bench', uid: `uid-${k}` });
  const t = performance.now();
  const r = await c.add(k);
  b.addMs.push(performance.now() - t);
  b.heldIp.set(k, r.ipv4_addr);
  node.cri?.setIp(k, r.ipv4_addr);
  kube.upsertPod({ namespace: 'bench', name: k, uid: `uid-${k}`, nodeName, podIP: r.ipv4_addr, containerID: k });
}

/** The DEL of pod `k`, then its removal from the runtime and the API server. */
async function delPod(b: RssBench, k: string): Promise<void> {
  await b.c.del(k);
  b.node.cri?.remove(k);
  b.kube.deletePod('bench', k);
}

/** ADDs pods `pod0`…`pod<pods-1>` in turn. @throws Error naming the failed ADD and ipamd's counts. */
async function addAllPods(b: RssBench): Promise<void> {
  const { pods } = b.opt;
  for (let i = 0; i < pods; i++) {
    await addPod(b, `pod${i}`).catch(async (e: Error) => {
      const st = await b.node.status();
      throw new Error(`ADD ${i + 1} of ${pods} failed: ${e.message}; counts ${JSON.stringify(st.counts)}`);
    });
  }
}

/**
 * `--churn` seconds of DEL+ADD pairs of the held pods in turn, 250 ms apart, sampling
 * ipamd's (`pid`) VmRSS every 10 s for the peak (from `held`, MiB) and once a minute.
 */
async function churn(b: RssBench, pid: number, held: number): Promise<ChurnResult> {
  const { pods, churnS } = b.opt;
  let pairs = 0;
  const cpu0 = cpuSeconds(pid);
  let peak = held;
  let sampledAt = Date.now();
  const perMinute: string[] = [];
  const churnFrom = Date.now();
  for (const until = Date.now() + churnS * 1000; Date.now() < until; pairs++) {
    const k = `pod${pairs % pods}`;
    await delPod(b, k);
    await addPod(b, k);
    await sleep(250); // ~4 pairs/s: with the default 30 s cooldown, 120 cooling + 250 held fit the 432
    if (Date.now() - sampledAt >= 10_000) {
      peak = Math.max(peak, vmRssMiB(pid));
      sampledAt = Date.now();
    }
    if (Date.now() - churnFrom >= (perMinute.length + 1) * 60_000)
      perMinute.push(`${vmRssMiB(pid)} (${await heapMiB(b.ipamdLog)})`);
  }
  const cpuMsPerPair = ((cpuSeconds(pid) - cpu0) * 1000) / Math.max(1, pairs);
  return { pairs, peak, perMinute, cpuMsPerPair };
}

/**
 * `--restarts` graceful restarts with the allocations held (twice as many with
 * `--a-dist`, A and B alternating, A first): spawn → first ADD answered, and → "ipamd
 * serving" in the log; prints each restart's timeline with `--timeline`.
 */
async function restartLoop(b: RssBench, before: NodeStatus): Promise<RestartResult> {
  const { node, sim, ipamdLog, opt } = b;
  const { values } = opt;
  const restarts: number[] = [];
  const restartsA: number[] = [];
  const logLines: number[] = [];
  const logLinesA: number[] = [];
  const restartCalls: string[] = [];
  let s2 = before;
  const aMain = values['a-dist'] ? path.resolve(values['a-dist'], 'ipamd/main.js') : undefined;
  for (let i = 0; i < Math.max(1, Number(values.restarts)) * (aMain ? 2 : 1); i++) {
    // With --a-dist: A (the other build) and B (this one) alternate, A first.
    const isA = aMain !== undefined && i % 2 === 0;
    const prefix = isA ? b.prefixFor(aMain) : b.ownPrefix;
    if (prefix) node.childPrefix = prefix;
    else delete node.childPrefix;
    await node.stop();
    const logFrom = statSize(ipamdLog);
    const calls0 = sim.calls.length;
    const spawnedAt = Date.now();
    const t0 = performance.now();
    const probe = firstAddAnswered(node.socket, 'pod0', b.heldIp.get('pod0')!, 30_000);
    probe.catch(() => undefined); // awaited below; a failed start must not leave it unhandled meanwhile
    await node.start();
    (isA ? logLinesA : logLines).push(performance.now() - t0);
    (isA ? restartsA : restarts).push((await probe) - t0);
    restartCalls.push(...sim.calls.slice(calls0).map((x) => x.action));
    s2 = await node.status();
    if (values.timeline && isA) console.log('A build:');
    if (values.timeline) printTimeline(ipamdLog, logFrom, spawnedAt);
    await sleep(500);
  }
  return { restarts, restartsA, logLines, logLinesA, restartCalls, s2, aMain };
}

/** The bench (see the file's header): idle, held, churn, restarts, then the table. */
async function main(): Promise<void> {
  const opt = rssOptions();
  const b = await setUpRssBench(opt);
  const { node } = b;
  try {
    await seedReleasedCheckpoint(node.checkpoint, Number(opt.values.released));
    await node.start();
    await sleep(2000);
    const pid = node.pid!;
    const idle = vmRssMiB(pid);
    printSplit(b, 'idle', pid);
    await addAllPods(b);
    await sleep(2000);
    const held = vmRssMiB(pid);
    printSplit(b, `${opt.pods} held`, pid);
    await heapSnapshot(b, pid, `${opt.pods} held`);
    const ch = await churn(b, pid, held);
    await sleep(2000);
    const after = vmRssMiB(pid);
    printSplit(b, 'after churn', pid);
    await heapSnapshot(b, pid, 'after churn');
    const s = await node.status();
    // Restarts with the allocations held: spawn → first ADD answered, and → "ipamd serving" in the log (medians of `--restarts`).
    const rs = await restartLoop(b, s);
    if (ch.perMinute.length)
      console.log(`RSS each minute of the churn, MiB (V8 heap committed/used/external): ${ch.perMinute.join(', ')}`);
    await sleep(2000);
    const afterRestart = vmRssMiB(node.pid!);
    printRssReport(opt, { idle, held, after, afterRestart, s, addMs: b.addMs }, ch, rs);
  } finally {
    b.c.close();
    await node.close();
    await b.kube.stop();
    await rm(b.kdir, { recursive: true, force: true });
    await b.sim.stop();
  }
}

await main();
