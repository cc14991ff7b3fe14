/**
 * The main job, run inside the network namespace that stands for the node: the
 * simulated cloud (EC2 + IMDSv2 on this namespace's loopback) as an m5.large, the real
 * ipamd, N pod namespaces (half `/var/run/netns/<name>`, half `/proc/<pid>/ns/net`),
 * the real CNI plugin ADD for each, a TCP connect from each pod to the node, a table,
 * the pool state, DEL for every pod, and a clean teardown.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { SimCloud } from '../sim/index.js';
import { execPlugin, SHIM_PATH } from '../kit/cni-exec.js';
import { startIpamd, type IpamdProcess } from '../kit/ipamd-process.js';
import { createNamedNetns, createProcNetns, run, tcpSendFrom, type Netns } from '../kit/netns.js';

/** Demo settings. */
export interface ScenarioOptions {
  pods: number;
  instanceType: string;
  /** Keep ipamd serving until SIGINT/SIGTERM instead of running pods. */
  daemon: boolean;
  /** Extra environment for ipamd (WARM_IP_TARGET=…). */
  ipamdEnv: NodeJS.ProcessEnv;
  print: (line: string) => void;
}

interface Pod {
  name: string;
  ns: Netns;
  containerId: string;
  ip?: string;
  eni?: string;
  device?: number;
  tcp?: string;
  addMs?: number;
}

const NETWORK = 'aws-cni';

/** Runs the scenario; always tears down what it created. Resolves with a process exit code. */
export async function runScenario(o: ScenarioOptions): Promise<number> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-demo-'));
  // ipamd's log is the demo's evidence: it lives outside `work` (removed at the end) and is kept.
  const ipamdLog = path.join(os.tmpdir(), `${path.basename(work)}-ipamd.log`);
  o.print(`ipamd's log: ${ipamdLog} (kept after the demo)`);
  const sim = new SimCloud({ seed: 1 });
  const pods: Pod[] = [];
  let ipamd: IpamdProcess | undefined;
  let listener: net.Server | undefined;
  let failed = false;
  try {
    await run('ip', ['link', 'set', 'lo', 'up']);
    await sim.start();
    const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
    const inst = sim.launchInstance({ instanceType: o.instanceType, subnetId: subnet.subnetId });
    const nodeIp = inst.privateIpAddress;
    await run('ip', ['addr', 'replace', `${nodeIp}/32`, 'dev', 'lo']);
    const socket = path.join(work, 'ipamd.sock');
    const env = {
      AWS_EC2_ENDPOINT: sim.ec2Endpoint,
      AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
      ENI_IPAM_SOCKET: socket,
      ENI_IPAM_CHECKPOINT_PATH: path.join(work, 'ipam.json'),
      // Daemon mode serves like a node: metrics on :61678, introspection on :61679 (loopback of the demo's node netns).
      ...(o.daemon
        ? {
            DISABLE_METRICS: 'false',
            METRICS_BIND_ADDRESS: '127.0.0.1:61678',
            INTROSPECTION_BIND_ADDRESS: '127.0.0.1:61679',
          }
        : {}),
      ...o.ipamdEnv,
    };
    o.print(
      `simulated cloud: EC2 ${sim.ec2Endpoint}, IMDS ${sim.imdsEndpoint}, ${o.instanceType} ${inst.instanceId} (node IP ${nodeIp}, subnet ${subnet.cidr})`,
    );
    ipamd = await startIpamd({ env, logFile: ipamdLog });
    o.print(`ipamd pid ${ipamd.pid} serving on ${socket} (log: ${ipamdLog})`);
    // The native shim is what ipamd installs as `eni-ipam`: it forwards each call to ipamd's
    // exec socket (default: cni-exec.sock beside ENI_IPAM_SOCKET), as on a real node.
    const execSocket = path.join(work, 'cni-exec.sock');
    const config = { cniVersion: '1.0.0', name: NETWORK, type: 'eni-ipam', ipamdSocket: socket, execSocket, mtu: 9001 };

    const node: DemoNode = { sim, nodeIp, socket, checkpointPath: env.ENI_IPAM_CHECKPOINT_PATH, ipamd, config };
    if (o.daemon) {
      await serveAsDaemon(o, node);
      return 0;
    }

    const seen = new Map<string, string>();
    listener = net.createServer((s) => {
      s.once('data', (d) => {
        seen.set(d.toString().trim(), s.remoteAddress ?? '');
        s.end('ok\n');
      });
    });
    await new Promise<void>((r) => listener!.listen(8080, nodeIp, r));

    await createPods(o.pods, pods);
    await addPods(node, pods);
    if (!(await probePods(node, pods, seen))) failed = true;
    o.print('');
    printPodTable(o.print, nodeIp, pods);
    o.print('');
    printPool(o.print, 'pool after ADD', await ipamd.status(), sim);

    if (!(await deletePods(o, node, pods))) failed = true;
    printPool(o.print, 'pool after DEL', await ipamd.status(), sim);
    const code = await ipamd.stop();
    ipamd = undefined;
    o.print(`ipamd stopped on SIGTERM with exit code ${code}`);
    if (code !== 0) failed = true;
    return failed ? 1 : 0;
  } finally {
    listener?.close();
    if (ipamd) await ipamd.stop(5000).catch(() => undefined);
    for (const p of pods) await p.ns.remove();
    await sim.stop().catch(() => undefined);
    await rm(work, { recursive: true, force: true });
    o.print(`ipamd's log is kept at ${ipamdLog}`);
  }
}

/** The plugin's network config, as the CNI runtime would pass it on stdin. */
type PluginConfig = Record<string, unknown>;

/** What the demo's node is made of once ipamd serves: shared by the steps below. */
interface DemoNode {
  sim: SimCloud;
  /** The node's primary private IPv4 (dotted quad), on the node netns' loopback. */
  nodeIp: string;
  /** ipamd's gRPC socket path. */
  socket: string;
  /** ipamd's checkpoint file path (as given in ipamd's environment). */
  checkpointPath: string | undefined;
  ipamd: IpamdProcess;
  config: PluginConfig;
}

/** Daemon mode: prints how to reach ipamd, then waits for SIGINT or SIGTERM. */
async function serveAsDaemon(o: ScenarioOptions, n: DemoNode): Promise<void> {
  const { sim, ipamd, socket, config } = n;
  o.print(`daemon mode: ipamd keeps running; Ctrl-C stops it and removes everything.`);
  o.print(`  plugin config: ${JSON.stringify(config)}`);
  o.print(`  status: curl http://127.0.0.1:${ipamd.introspectionPort}/v1/status  (inside this network namespace)`);
  o.print(`  metrics: curl http://127.0.0.1:${ipamd.metricsPort ?? 61678}/metrics  (inside this network namespace)`);
  o.print(
    `  operator CLI (in the node netns above): AWS_EC2_ENDPOINT=${sim.ec2Endpoint} AWS_EC2_METADATA_SERVICE_ENDPOINT=${sim.imdsEndpoint} INTROSPECTION_BIND_ADDRESS=127.0.0.1:${ipamd.introspectionPort} ENI_IPAM_SOCKET=${socket} ENI_IPAM_CHECKPOINT_PATH=${n.checkpointPath} node dist/cli/main.js status`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
}

/**
 * Creates `count` pod network namespaces (even: named, odd: `/proc/<pid>/ns/net`), pushing
 * each onto `pods` as soon as it exists so the caller's teardown removes it.
 */
async function createPods(count: number, pods: Pod[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const name = `demo-${i}`;
    const ns = i % 2 === 0 ? await createNamedNetns(`eni-demo-pod-${i}`) : await createProcNetns(name);
    pods.push({ name, ns, containerId: randomBytes(32).toString('hex') });
  }
}

/** CNI ADD through the shim for each pod, one at a time; records its IP and ADD time (ms). Throws on the first failure. */
async function addPods(n: DemoNode, pods: Pod[]): Promise<void> {
  for (const p of pods) {
    const r = await execPlugin({
      command: 'ADD',
      containerId: p.containerId,
      netns: p.ns.path,
      ifName: 'eth0',
      config: n.config,
      plugin: [SHIM_PATH],
      args: {
        IgnoreUnknown: '1',
        K8S_POD_NAMESPACE: 'default',
        K8S_POD_NAME: p.name,
        K8S_POD_INFRA_CONTAINER_ID: p.containerId,
        K8S_POD_UID: randomUUID(),
      },
    });
    if (r.code !== 0) throw new Error(`ADD ${p.name} failed: ${r.stdout}${r.stderr}`);
    p.ip = String(r.json.ips[0].address).split('/')[0];
    p.addMs = r.ms;
  }
}

/**
 * Records each pod's ENI and device number (from ipamd's introspection), then connects
 * from each pod to the node's listener on :8080; `seen` maps the pod name sent to the
 * source address the listener saw. True when every pod connected from its own IP.
 */
async function probePods(n: DemoNode, pods: Pod[], seen: Map<string, string>): Promise<boolean> {
  const { ipamd, nodeIp } = n;
  let ok = true;
  const allocs = (await (await fetch(`http://127.0.0.1:${ipamd.introspectionPort}/v1/allocations`)).json()) as Array<{
    containerID: string;
    eniId: string;
  }>;
  const status = await ipamd.status();
  const devByEni = new Map<string, number>(
    (status.enis as Array<{ eniId: string; deviceNumber: number }>).map((e) => [e.eniId, e.deviceNumber]),
  );
  for (const p of pods) {
    p.eni = allocs.find((a) => a.containerID === p.containerId)?.eniId;
    p.device = p.eni ? devByEni.get(p.eni) : undefined;
    try {
      await tcpSendFrom(p.ns.path, nodeIp, 8080, p.name);
      const from = seen.get(p.name);
      p.tcp = from === p.ip ? `ok (node saw ${from})` : `WRONG SOURCE ${from}`;
      if (from !== p.ip) ok = false;
    } catch (e) {
      p.tcp = `FAILED: ${(e as Error).message.split('\n')[0]}`;
      ok = false;
    }
  }
  return ok;
}

/** The per-pod table: netns, IP, ENI, device, ADD time and the TCP result. */
function printPodTable(print: (l: string) => void, nodeIp: string, pods: Pod[]): void {
  printTable(
    print,
    ['pod', 'netns', 'IP', 'ENI', 'device', 'ADD ms', `TCP to node ${nodeIp}:8080`],
    pods.map((p) => [
      p.name,
      p.ns.path,
      p.ip ?? '-',
      p.eni ?? '-',
      String(p.device ?? '-'),
      p.addMs === undefined ? '-' : p.addMs.toFixed(1),
      p.tcp ?? '-',
    ]),
  );
}

/** CNI DEL for every pod, printing each failure and going on. True when every DEL succeeded. */
async function deletePods(o: ScenarioOptions, n: DemoNode, pods: Pod[]): Promise<boolean> {
  let ok = true;
  for (const p of pods) {
    const r = await execPlugin({
      command: 'DEL',
      containerId: p.containerId,
      netns: p.ns.path,
      ifName: 'eth0',
      config: n.config,
      plugin: [SHIM_PATH],
    });
    if (r.code !== 0) {
      ok = false;
      o.print(`DEL ${p.name} failed: ${r.stdout}`);
    }
  }
  return ok;
}

/** The part of ipamd's `GET /v1/status` that printPool reads. */
interface PoolStatus {
  counts: { total: number; assigned: number; available: number; cooling: number; enis: number };
}

function printPool(print: (l: string) => void, title: string, s: PoolStatus, sim: SimCloud): void {
  const byAction = new Map<string, number>();
  for (const c of sim.calls) byAction.set(c.action, (byAction.get(c.action) ?? 0) + 1);
  const calls = [...byAction].map(([a, n]) => `${a}=${n}`).join(' ');
  print(
    `${title}: total=${s.counts.total} assigned=${s.counts.assigned} available=${s.counts.available} cooling=${s.counts.cooling} ENIs=${s.counts.enis} | EC2 calls: ${sim.calls.length} (${calls})`,
  );
}

function printTable(print: (l: string) => void, head: string[], rows: string[][]): void {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(w[i]!)).join('  ');
  print(line(head));
  print(w.map((n) => '-'.repeat(n)).join('  '));
  for (const r of rows) print(line(r));
}
