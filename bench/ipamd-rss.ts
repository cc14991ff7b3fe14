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
import { readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { SimCloud } from '../sim/index.js';
import { KubeApiStandIn } from '../sim/kube/index.js';
import { IPAMD_MALLOC_ENV, IPAMD_NODE_FLAGS } from '../ipamd/v8-flags.js';
import { ipamdClient } from '../test/helpers/ipamd-client.js';
import { createSimNode } from '../test/property/sim-node.js';
import { machineLine, pluginClient, row, seedReleasedCheckpoint, sleep } from './bench-util.js';
import { quantile } from './stats.js';

/** VmRSS of `pid` in MiB (Linux /proc). @throws Error when the process is gone. */
function vmRssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Math.round((Number(m[1]) / 1024) * 10) / 10;
}

/** CPU seconds (user + system) `pid` has used (/proc/<pid>/stat fields 14 and 15, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Size of `file` in bytes, 0 when it does not exist. */
function statSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * Prints each log line ipamd wrote from byte `from` of `file` on, as ms after `spawnedAt`
 * (epoch ms) with its message: where the time between spawn and "ipamd serving" went.
 */
function printTimeline(file: string, from: number, spawnedAt: number): void {
  const text = readFileSync(file, 'utf8').slice(from);
  const out: string[] = [];
  for (const line of text.split('\n')) {
    try {
      const o = JSON.parse(line) as { time?: string; msg?: string };
      if (o.time && o.msg) out.push(`${String(Date.parse(o.time) - spawnedAt).padStart(5)} ms  ${o.msg}`);
      if (o.msg === 'ipamd serving') break;
    } catch {
      /* not JSON */
    }
  }
  console.log(`restart timeline (ms after spawn):\n${out.join('\n')}`);
}

/**
 * ipamd's V8 heap, committed / used, and external memory (MiB) from its Prometheus
 * endpoint (prom-client's default `nodejs_heap_size_total_bytes`,
 * `nodejs_heap_size_used_bytes`, `nodejs_external_memory_bytes`); its port is read from
 * the "ipamd serving" log line (`metricsPort`) of `logFile`. "n/a" when unreadable.
 */
async function heapMiB(logFile: string): Promise<string> {
  try {
    const serving = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"ipamd serving"'))
      .at(-1);
    const port = (JSON.parse(serving ?? '{}') as { metricsPort?: number }).metricsPort;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const v = (name: string) =>
      (Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1]) / 1048576).toFixed(1);
    return `${v('nodejs_heap_size_total_bytes')}/${v('nodejs_heap_size_used_bytes')}/${v('nodejs_external_memory_bytes')}`;
  } catch {
    return 'n/a';
  }
}

/** Anonymous and file-backed resident MiB of `pid` (/proc/<pid>/smaps_rollup, Linux ≥ 4.14). */
function rssSplit(pid: number): string {
  const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(t)?.[1] ?? NaN);
  const mib = (v: number) => (v / 1024).toFixed(1);
  return `rss ${mib(kb('Rss'))} = anonymous ${mib(kb('Anonymous'))} + file-backed ${mib(kb('Rss') - kb('Anonymous'))} MiB`;
}

/**
 * Repeats the ADD of held pod `id` on `socket` from now on, each try on a new connection
 * 2 ms after the last failed, until one is answered; resolves with the time it was
 * answered (performance.now(), ms). @throws Error when the answer is another address than
 * `expectIp` (the restart lost the allocation), or after `timeoutMs` without an answer.
 */
async function firstAddAnswered(socket: string, id: string, expectIp: string, timeoutMs: number): Promise<number> {
  for (const until = performance.now() + timeoutMs; performance.now() < until; await sleep(2)) {
    const c = pluginClient(socket);
    const r = (await c.add(id).catch(() => undefined)) as { ipv4_addr?: string } | undefined; // not serving yet
    const at = performance.now();
    c.close();
    if (!r) continue;
    if (r.ipv4_addr !== expectIp)
      throw new Error(`restart: ADD of held ${id} answered ${r.ipv4_addr}, had ${expectIp}`);
    return at;
  }
  throw new Error(`restart: no ADD of ${id} answered within ${timeoutMs} ms`);
}

async function main(): Promise<void> {
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
  const split = (label: string, pid: number) => {
    if (values.split) console.log(`${label}: ${rssSplit(pid)}`);
  };
  const c = ipamdClient(node.socket);
  // A pod as the runtime and the API server see it, then its ADD.
  const addMs: number[] = [];
  const heldIp = new Map<string, string>();
  const addPod = async (k: string): Promise<void> => {
    node.cri?.add({ id: k, name: k, namespace: 'bench', uid: `uid-${k}` });
    const t = performance.now();
    const r = await c.add(k);
    addMs.push(performance.now() - t);
    heldIp.set(k, r.ipv4_addr);
    node.cri?.setIp(k, r.ipv4_addr);
    kube.upsertPod({ namespace: 'bench', name: k, uid: `uid-${k}`, nodeName, podIP: r.ipv4_addr, containerID: k });
  };
  const delPod = async (k: string): Promise<void> => {
    await c.del(k);
    node.cri?.remove(k);
    kube.deletePod('bench', k);
  };
  try {
    await seedReleasedCheckpoint(node.checkpoint, Number(values.released));
    await node.start();
    await sleep(2000);
    const pid = node.pid!;
    const idle = vmRssMiB(pid);
    split('idle', pid);
    for (let i = 0; i < pods; i++) {
      await addPod(`pod${i}`).catch(async (e: Error) => {
        const st = await node.status();
        throw new Error(`ADD ${i + 1} of ${pods} failed: ${e.message}; counts ${JSON.stringify(st.counts)}`);
      });
    }
    await sleep(2000);
    const held = vmRssMiB(pid);
    split(`${pods} held`, pid);
    const snapshot = async (label: string) => {
      if (!values['heap-snapshot']) return;
      process.kill(pid, 'SIGUSR2');
      await sleep(5000);
      console.log(`heap snapshot of ${pid} (${label}) written to ${process.cwd()} (Heap.*.${pid}.*.heapsnapshot)`);
    };
    await snapshot(`${pods} held`);
    let pairs = 0;
    const cpu0 = cpuSeconds(pid);
    let peak = held;
    let sampledAt = Date.now();
    const perMinute: string[] = [];
    const churnFrom = Date.now();
    for (const until = Date.now() + churnS * 1000; Date.now() < until; pairs++) {
      const k = `pod${pairs % pods}`;
      await delPod(k);
      await addPod(k);
      await sleep(250); // ~4 pairs/s: with the default 30 s cooldown, 120 cooling + 250 held fit the 432
      if (Date.now() - sampledAt >= 10_000) {
        peak = Math.max(peak, vmRssMiB(pid));
        sampledAt = Date.now();
      }
      if (Date.now() - churnFrom >= (perMinute.length + 1) * 60_000)
        perMinute.push(`${vmRssMiB(pid)} (${await heapMiB(ipamdLog)})`);
    }
    const cpuMsPerPair = ((cpuSeconds(pid) - cpu0) * 1000) / Math.max(1, pairs);
    await sleep(2000);
    const after = vmRssMiB(pid);
    split('after churn', pid);
    await snapshot('after churn');
    const s = await node.status();
    // Restarts with the allocations held: spawn → first ADD answered, and → "ipamd serving" in the log (medians of `--restarts`).
    const restarts: number[] = [];
    const restartsA: number[] = [];
    const logLines: number[] = [];
    const logLinesA: number[] = [];
    const restartCalls: string[] = [];
    let s2 = s;
    const aMain = values['a-dist'] ? path.resolve(values['a-dist'], 'ipamd/main.js') : undefined;
    for (let i = 0; i < Math.max(1, Number(values.restarts)) * (aMain ? 2 : 1); i++) {
      // With --a-dist: A (the other build) and B (this one) alternate, A first.
      const isA = aMain !== undefined && i % 2 === 0;
      const prefix = isA ? prefixFor(aMain) : ownPrefix;
      if (prefix) node.childPrefix = prefix;
      else delete node.childPrefix;
      await node.stop();
      const logFrom = statSize(ipamdLog);
      const calls0 = sim.calls.length;
      const spawnedAt = Date.now();
      const t0 = performance.now();
      const probe = firstAddAnswered(node.socket, 'pod0', heldIp.get('pod0')!, 30_000);
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
    const restartMs = quantile(restarts, 0.5);
    if (perMinute.length)
      console.log(`RSS each minute of the churn, MiB (V8 heap committed/used/external): ${perMinute.join(', ')}`);
    await sleep(2000);
    const afterRestart = vmRssMiB(node.pid!);
    console.log(machineLine(os.cpus().length));
    console.log(
      row([
        'ipamd RSS (MiB)',
        'idle',
        `${pods} held`,
        `after ${churnS} s churn`,
        'peak during churn',
        'churn pairs',
        'assigned',
        'ADD p50 / p90 ms (gRPC, one client)',
        'ipamd CPU ms per churn pair',
      ]),
    );
    console.log(
      row([
        values['v8-defaults'] ? 'm5.large, prefix mode, V8 defaults' : 'm5.large, prefix mode',
        idle,
        held,
        after,
        peak,
        pairs,
        s.counts.assigned,
        `${quantile(addMs, 0.5).toFixed(2)} / ${quantile(addMs, 0.9).toFixed(2)}`,
        cpuMsPerPair.toFixed(1),
      ]),
    );
    console.log(
      row([
        'restart',
        `to the first ADD answered (ms, spawn included; median of ${restarts.length}: ${restarts.map((r) => Math.round(r)).join(', ')}); to "ipamd serving" in its log: ${Math.round(quantile(logLines, 0.5))}`,
        'EC2 calls until serving',
        'assigned after',
        'RSS 2 s after (MiB)',
      ]),
    );
    if (aMain)
      console.log(
        row([
          `A: ${values['a-dist']}`,
          `${Math.round(quantile(restartsA, 0.5))} (median of ${restartsA.length}: ${restartsA.map((r) => Math.round(r)).join(', ')}); log line: ${Math.round(quantile(logLinesA, 0.5))}`,
          '',
          '',
          '',
        ]),
      );
    console.log(
      row([
        `${s.counts.assigned} held`,
        Math.round(restartMs),
        restartCalls.length ? restartCalls.join(' ') : 0,
        s2.counts.assigned,
        afterRestart,
      ]),
    );
  } finally {
    c.close();
    await node.close();
    await kube.stop();
    await rm(kdir, { recursive: true, force: true });
    await sim.stop();
  }
}

await main();
