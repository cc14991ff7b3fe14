/**
 * bench: the eni-ipam CNI plugin against the Go baseline, Debian's `ptp` + `host-local`
 * (package containernetworking-plugins, /usr/lib/cni; `bash scripts/ensure-deps.sh
 * --containerd` installs it), in one run on one machine, NODE_EXTRA_CA_CERTS unset:
 *
 * (a) CNI ADD and DEL, median/p90 over `--pods` (50) fresh named netns each, for three
 *     plugins: the native shim's fast path (dist/cni-plugin/eni-ipam → ipamd's CNI exec
 *     socket; ipamd and its own sim process in the shim's netns, as a hostNetwork ipamd
 *     is: bench/shim-node.ts), the Node plugin (dist/cni-plugin/eni-ipam.cjs as built, V8
 *     code cache warmed by the warm-up rounds) against the real ipamd with a warm pool on
 *     the simulated cloud, and ptp + host-local; all exec'd the same way inside a
 *     throw-away node netns, timed from inside bash (bench/timed-exec.ts: wall time from
 *     $EPOCHREALTIME, µs; CPU from `time`), rounds
 *     interleaved so all see the same machine load;
 * (b) containerd RunPodSandbox median over `--sandboxes` (20) pods: two private
 *     containerd 1.6 (kit/containerd.ts), one whose conflist is ours (the full
 *     test node of kit/containerd-node.ts: sim + ipamd, with the shim installed
 *     beside the Node plugin and `execSocket` in the conflist; ipamd runs outside the
 *     node netns there, so it wires the node side through ENI_IPAM_CNI_EXEC_NETNS, one
 *     `nsenter` more per ADD than in production), one with ptp + host-local, pods
 *     alternating between them; StopPodSandbox/RemovePodSandbox too;
 * (c) `node -e 0`, the floor, in the same rounds as (a);
 * (d) where the shim's ADD goes: the shim's own trace (ENI_IPAM_SHIM_TRACE: its start,
 *     connect, send, answer, against bash's `$EPOCHREALTIME` around the exec) and ipamd's
 *     stage marks of the same ADDs (`GET /v1/stage-trace`, `cni.add.*`: ms since the exec
 *     socket accepted the connection; ipamd/cni-exec/server.ts), medians over the run.
 *
 * Prints a markdown table with the ratios (targets, issue 13: ADD ≤ 1.3×, RunPodSandbox ≤ 1.1×), and
 * the CPU time (user+sys) of ADD/DEL, which other load on the machine distorts less.
 * Needs root. Everything created (netns, containerd, ipamd, temp dirs) is removed.
 *
 * `--before DIR` adds a fourth plugin to (a)'s rounds: this shim against the ipamd of another
 * build's dist/ (e.g. a copy of main's), for a before/after in the same run.
 *
 *   node dist/bench/cni-vs-go.js [--pods 50] [--sandboxes 20] [--no-cri] [--before DIR]
 */
import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PLUGIN_PATH } from '../kit/cni-exec.js';
import { startIpamd } from '../kit/ipamd-process.js';
import { createNamedNetns, type Netns } from '../kit/netns.js';
import { SimCloud } from '../sim/index.js';
import { startContainerd } from '../kit/containerd.js';
import { createContainerdNode } from '../kit/containerd-node.js';
import { CriTestClient } from '../kit/cri-client.js';
import { startShimNode, type ShimNode } from './shim-node.js';
import { newShimTrace, printShimTrace, recordShimTrace, type ShimTrace, type StageSummary } from './shim-trace.js';
import { ms, summarize, timedExec, type Summary } from './timed-exec.js';

const SHIM_PATH = new URL('../cni-plugin/eni-ipam', import.meta.url).pathname;

/** Debian's Go plugins. */
const GO_CNI_DIR = '/usr/lib/cni';

/** The ptp + host-local plugin entry (the reference baseline's), host-local state in `dataDir`. */
function goPlugin(dataDir: string, subnet: string): Record<string, unknown> {
  return {
    type: 'ptp',
    ipMasq: false,
    mtu: 9001,
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
  };
}

const sleep = (msec: number) => new Promise((r) => setTimeout(r, msec));

/** Results of part (a). */
interface PluginTimes {
  add: number[];
  del: number[];
  version: number[];
  addCpu: number[];
  delCpu: number[];
}
type Who = 'shim' | 'ours' | 'go' | 'before';
interface CniResults {
  /** `--before`: the shim against another build's ipamd, same rounds. */
  before: PluginTimes;
  shimTrace: ShimTrace;
  /** ipamd's stage trace on the shim node (`cni.*` and `add.*` stages), read at the end. */
  ipamdTrace: Record<string, StageSummary>;
  shim: PluginTimes;
  ours: PluginTimes;
  go: PluginTimes;
  floor: number[];
  floorCpu: number[];
}

/** What one ADD/VERSION/DEL cycle of {@link benchCni} needs: the results, the nodes, the plugin configs. */
interface CycleContext {
  r: CniResults;
  node: { path: string };
  shimNode: ShimNode;
  beforeNode: ShimNode | undefined;
  plugin: string;
  ours: object;
  go: object;
}

/** One pod's VERSION, ADD and DEL through `who`'s plugin in a fresh netns; recorded into `ctx.r` when `record`. */
async function cniCycle(ctx: CycleContext, who: Who, i: number, record: boolean): Promise<void> {
  const { r, node, shimNode, beforeNode, plugin, ours, go } = ctx;
  const pod = await createNamedNetns(`eni-vs-go-${who}-${process.pid}`);
  try {
    const sn = who === 'before' ? beforeNode! : shimNode;
    const isShim = who === 'shim' || who === 'before';
    const argv = who === 'ours' ? [process.execPath, plugin] : isShim ? [sn.plugin] : [path.join(GO_CNI_DIR, 'ptp')];
    const input = JSON.stringify(who === 'ours' ? ours : isShim ? sn.config : go);
    const nodeNs = isShim ? sn.netns.path : node.path;
    const env = {
      CNI_CONTAINERID: `${who}${process.pid}x${i}`,
      CNI_NETNS: pod.path,
      CNI_IFNAME: 'eth0',
      CNI_PATH: GO_CNI_DIR,
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-${i};K8S_POD_INFRA_CONTAINER_ID=${who}${i}`,
    };
    const v = await timedExec(argv, { env: { ...env, CNI_COMMAND: 'VERSION' }, input, netns: nodeNs });
    const a = await timedExec(argv, {
      env: { ...env, CNI_COMMAND: 'ADD', ENI_IPAM_SHIM_DEBUG: '1', ENI_IPAM_SHIM_TRACE: '1' },
      input,
      netns: nodeNs,
    });
    if (a.code !== 0) throw new Error(`${who} ADD ${i} failed: ${a.stdout}${a.stderr}`);
    if (isShim && a.stderr.includes('eni-ipam.cjs'))
      throw new Error(`the shim fell back to the Node plugin: ${a.stderr}`);
    const d = await timedExec(argv, { env: { ...env, CNI_COMMAND: 'DEL' }, input, netns: nodeNs });
    if (d.code !== 0) throw new Error(`${who} DEL ${i} failed: ${d.stdout}${d.stderr}`);
    if (record && who === 'shim') recordShimTrace(r.shimTrace, a);
    if (record) {
      r[who].add.push(a.wallMs);
      r[who].del.push(d.wallMs);
      r[who].version.push(v.wallMs);
      r[who].addCpu.push(a.cpuMs);
      r[who].delCpu.push(d.cpuMs);
    }
  } finally {
    await pod.remove();
  }
}

/** (a) + (c): ADD/DEL of both plugins in fresh netns inside a node netns, and the node floor. */
async function benchCni(pods: number, work: string, beforeDist?: string): Promise<CniResults> {
  const times = (): PluginTimes => ({ add: [], del: [], version: [], addCpu: [], delCpu: [] });
  const r: CniResults = {
    before: times(),
    shimTrace: newShimTrace(),
    ipamdTrace: {},
    shim: times(),
    ours: times(),
    go: times(),
    floor: [],
    floorCpu: [],
  };
  const sim = new SimCloud();
  await sim.start();
  const cleanups: Array<() => Promise<unknown>> = [() => sim.stop()];
  try {
    const subnet = sim.addSubnet({ cidr: '10.0.0.0/22' });
    sim.launchInstance({ instanceType: 'c5.4xlarge', subnetId: subnet.subnetId });
    const node = await createNamedNetns(`eni-vs-go-node-${process.pid}`);
    cleanups.push(() => node.remove());
    const binDir = path.join(work, 'bin');
    await mkdir(binDir, { recursive: true });
    const plugin = path.join(binDir, 'eni-ipam');
    await copyFile(PLUGIN_PATH, plugin); // its V8 code cache will sit next to it
    const socket = path.join(work, 'ipamd.sock');
    const ipamd = await startIpamd({
      env: {
        AWS_EC2_ENDPOINT: sim.ec2Endpoint,
        AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
        ENI_IPAM_SOCKET: socket,
        ENI_IPAM_CHECKPOINT_PATH: path.join(work, 'ipam.json'),
        WARM_IP_TARGET: '20',
        ENI_IPAM_POOL_INTERVAL: '200ms',
        AWS_VPC_K8S_CNI_LOGLEVEL: 'info',
      },
      logFile: path.join(work, 'ipamd.log'),
    });
    cleanups.push(() => ipamd.stop());
    const shimNode = await startShimNode(path.join(work, 'shim'), 'bench', { WARM_IP_TARGET: '20' });
    cleanups.push(() => shimNode.stop());
    const beforeNode = beforeDist
      ? await startShimNode(
          path.join(work, 'before'),
          'bfr',
          { WARM_IP_TARGET: '20' },
          path.resolve(beforeDist, 'ipamd/main.js'),
        )
      : undefined;
    if (beforeNode) cleanups.push(() => beforeNode.stop());
    for (let t = 0; t < 100 && (await ipamd.status()).counts.available < 20; t++) await sleep(100);
    for (const n of [shimNode, beforeNode])
      for (let t = 0; n && t < 100 && (await n.available()) < 20; t++) await sleep(100);
    const ours = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: socket };
    const go = { cniVersion: '1.0.0', name: 'gobench', ...goPlugin(path.join(work, 'host-local'), '10.234.0.0/22') };

    const ctx: CycleContext = { r, node, shimNode, beforeNode, plugin, ours, go };
    const cycle = (who: Who, i: number, record: boolean) => cniCycle(ctx, who, i, record);
    const all: Who[] = beforeNode ? ['shim', 'ours', 'go', 'before'] : ['shim', 'ours', 'go'];
    for (let i = 0; i < 3; i++) for (const who of all) await cycle(who, -1 - i, false); // warm-up (writes the V8 cache)
    // Each round rotates the order, so every plugin runs in every position equally often.
    const orders: Who[][] = all.map((_, k) => [...all.slice(k), ...all.slice(0, k)]);
    for (let i = 0; i < pods; i++) {
      const order = orders[i % orders.length]!;
      for (const who of order) await cycle(who, i, true);
      const f = await timedExec([process.execPath, '-e', '0']);
      r.floor.push(f.wallMs);
      r.floorCpu.push(f.cpuMs);
    }
    r.ipamdTrace = (await shimNode.introspect('/v1/stage-trace')) as Record<string, StageSummary>;
    return r;
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch((e: Error) => console.error(`cleanup: ${e.message}`));
  }
}

/** Results of part (b), per runtime setup: RunPodSandbox / StopPodSandbox / RemovePodSandbox in ms. */
interface CriResults {
  run: number[];
  stop: number[];
  remove: number[];
}

/** (b): RunPodSandbox with our plugin vs ptp + host-local, two containerd, pods alternating. */
async function benchCri(sandboxes: number, work: string): Promise<{ ours: CriResults; go: CriResults }> {
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    const oursNode = await createContainerdNode({
      instanceType: 'c5.4xlarge',
      startIpamd: false,
      ipamdEnv: { WARM_IP_TARGET: '20', AWS_VPC_K8S_CNI_LOGLEVEL: 'info' },
    });
    cleanups.push(() => oursNode.close());
    // Install as ipamd does: the shim as eni-ipam, the Node plugin beside it, execSocket in the conflist.
    const oursBin = path.join(oursNode.dir, 'cni', 'bin');
    await rename(path.join(oursBin, 'eni-ipam'), path.join(oursBin, 'eni-ipam.cjs'));
    await copyFile(SHIM_PATH, path.join(oursBin, 'eni-ipam'));
    const conflistFile = path.join(oursNode.dir, 'cni', 'conf', '10-eni-ipam.conflist');
    const conflist = JSON.parse(await readFile(conflistFile, 'utf8')) as { plugins: Array<Record<string, unknown>> };
    conflist.plugins[0]!.execSocket = path.join(oursNode.dir, 'cni-exec.sock');
    await writeFile(`${conflistFile}.tmp`, JSON.stringify(conflist));
    await rename(`${conflistFile}.tmp`, conflistFile);
    oursNode.env.ENI_IPAM_CNI_EXEC_NETNS = oursNode.nodeNetns.path;
    await oursNode.startIpamd();
    // The Go side: its own node netns, bin dir (ptp, host-local, loopback) and conf dir.
    const goDir = path.join(work, 'go-cri');
    const binDir = path.join(goDir, 'bin');
    const confDir = path.join(goDir, 'conf');
    await mkdir(binDir, { recursive: true });
    await mkdir(confDir, { recursive: true });
    for (const p of ['ptp', 'host-local', 'loopback']) await copyFile(path.join(GO_CNI_DIR, p), path.join(binDir, p));
    // Written as temp file + rename in the same dir (what containerd's conf watcher expects).
    const tmp = path.join(confDir, '.10-gobench.conflist.tmp');
    await writeFile(
      tmp,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'gobench',
        plugins: [goPlugin(path.join(goDir, 'host-local'), '10.235.0.0/22')],
      }),
    );
    await rename(tmp, path.join(confDir, '10-gobench.conflist'));
    const goNetns: Netns = await createNamedNetns(`eni-vs-go-cri-${process.pid}`);
    cleanups.push(() => goNetns.remove());
    const goContainerd = await startContainerd({
      baseDir: path.join(goDir, 'containerd'),
      nodeNetnsPath: goNetns.path,
      cniBinDir: binDir,
      cniConfDir: confDir,
    });
    cleanups.push(() => goContainerd.stop());
    const goCri = new CriTestClient(goContainerd.socket, 60_000);
    cleanups.push(async () => goCri.close());
    for (let t = 0; t < 100 && (await oursNode.status()).counts.available < 10; t++) await sleep(100);

    const res = {
      ours: { run: [], stop: [], remove: [] } as CriResults,
      go: { run: [], stop: [], remove: [] } as CriResults,
    };
    const one = async (who: 'ours' | 'go', i: number, record: boolean): Promise<void> => {
      const cri = who === 'ours' ? oursNode.cri : goCri;
      const t0 = performance.now();
      const id = await cri.runPodSandbox({ name: `bench-${who}-${i}`, namespace: 'bench', uid: randomUUID() });
      const t1 = performance.now();
      await cri.stopPodSandbox(id);
      const t2 = performance.now();
      await cri.removePodSandbox(id);
      const t3 = performance.now();
      if (record) {
        res[who].run.push(t1 - t0);
        res[who].stop.push(t2 - t1);
        res[who].remove.push(t3 - t2);
      }
    };
    for (let i = 0; i < 2; i++) {
      await one('ours', -1 - i, false);
      await one('go', -1 - i, false);
    }
    for (let i = 0; i < sandboxes; i++) {
      const order: Array<'ours' | 'go'> = i % 2 ? ['go', 'ours'] : ['ours', 'go'];
      for (const who of order) await one(who, i, true);
    }
    return res;
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch((e: Error) => console.error(`cleanup: ${e.message}`));
  }
}

const cell = (s: Summary) => `${ms(s.median)} / ${ms(s.p90)}`;
const ratio = (a: Summary, b: Summary) => `${(a.median / b.median).toFixed(2)}×`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '50' },
      sandboxes: { type: 'string', default: '20' },
      'no-cri': { type: 'boolean', default: false },
      before: { type: 'string' },
    },
  });
  delete process.env.NODE_EXTRA_CA_CERTS;
  const load0 = os.loadavg()[0]!;
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-vs-go-'));
  let cni: CniResults;
  let cri: { ours: CriResults; go: CriResults } | undefined;
  try {
    cni = await benchCni(Number(values.pods), path.join(work, 'cni'), values.before);
    if (!values['no-cri']) cri = await benchCri(Number(values.sandboxes), work);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const s = summarize;
  console.log(
    `eni-ipam CNI plugin vs Go ptp + host-local, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} vCPU, Node ${process.version}, load average ${load0.toFixed(1)} → ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log('');
  const row3 = (what: string, k: 'add' | 'del' | 'addCpu' | 'delCpu' | 'version', target: string) =>
    `| ${what} | ${cell(s(cni.shim[k]))} | ${cell(s(cni.ours[k]))} | ${cell(s(cni.go[k]))} | ${ratio(s(cni.shim[k]), s(cni.go[k]))} | ${ratio(s(cni.ours[k]), s(cni.go[k]))} | ${target} |`;
  console.log(
    '| what (ms, median / p90) | eni-ipam shim → ipamd | eni-ipam Node plugin | Go ptp + host-local | ratio shim/Go | ratio Node/Go | target |',
  );
  console.log('|---|---|---|---|---|---|---|');
  console.log(row3(`CNI ADD, ${cni.shim.add.length} fresh netns`, 'add', '≤ 1.3×'));
  console.log(row3('CNI DEL', 'del', '–'));
  if (values.before) {
    const b = cni.before;
    console.log(
      `| CNI ADD / DEL, the shim → ipamd of \`--before ${values.before}\` (same rounds) | ${cell(s(b.add))} / ${cell(s(b.del))} | – | – | ${ratio(s(b.add), s(cni.go.add))} / ${ratio(s(b.del), s(cni.go.del))} | – | after/before ADD ${ratio(s(cni.shim.add), s(b.add))} |`,
    );
  }
  console.log(row3('CNI ADD, CPU time (user+sys of the plugin process and its children)', 'addCpu', '–'));
  console.log(row3('CNI DEL, CPU time', 'delCpu', '–'));
  console.log(row3('plugin start only (VERSION)', 'version', '–'));
  if (cri) {
    console.log(
      `| containerd RunPodSandbox, ${cri.ours.run.length} pods | ${cell(s(cri.ours.run))} | – | ${cell(s(cri.go.run))} | ${ratio(s(cri.ours.run), s(cri.go.run))} | – | ≤ 1.1× |`,
    );
    console.log(
      `| containerd StopPodSandbox | ${cell(s(cri.ours.stop))} | – | ${cell(s(cri.go.stop))} | ${ratio(s(cri.ours.stop), s(cri.go.stop))} | – | – |`,
    );
    console.log(
      `| containerd RemovePodSandbox | ${cell(s(cri.ours.remove))} | – | ${cell(s(cri.go.remove))} | ${ratio(s(cri.ours.remove), s(cri.go.remove))} | – | – |`,
    );
  }
  console.log(
    `| \`node -e 0\` (the floor), same rounds | – | ${cell(s(cni.floor))} (CPU ${ms(s(cni.floorCpu).median)}) | – | – | – | – |`,
  );
  console.log('');
  console.log(
    'CPU time of the shim counts the shim process only: the work ipamd does for it (in-process) is not in it.',
  );
  printShimTrace(cni.shimTrace, cni.ipamdTrace, cni.shim.add, cni.go.add);
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(e.stack);
    process.exit(1);
  },
);
