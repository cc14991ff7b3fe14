/**
 * One simulated Kubernetes node for the restore scenarios of docs/design.md#9-restore-sources-and-the-nothing-lost-check, built from real
 * parts: a "node" network namespace running a private containerd 1.6 (CRI plugin) whose
 * CNI bin dir holds the project's plugin, the simulated cloud (EC2 + IMDS) in-process, a
 * Kubernetes API stand-in with a kubeconfig, and the real ipamd binary in the test's own
 * namespace pointed at all three (CRI_RUNTIME_ENDPOINT, MY_NODE_NAME + KUBECONFIG, short
 * GC interval and grace). The test plays kubelet: RunPodSandbox through the CRI, then the
 * pod (with its IP) is published in the stand-in; StopPodSandbox/RemovePodSandbox tear it
 * down and delete the pod. `assertNothingLost()` is the check of docs/design.md#9-restore-sources-and-the-nothing-lost-check. The stand-in's
 * node reports containerd's own CRI identity (`containerd://<version>`), as kubelet would.
 *
 * With `ipamdInNodeNetns`, ipamd runs inside the node namespace, as on a real node
 * (hostNetwork: it sees the pods' host-side veths, routes and rules), and reaches the
 * sim and the stand-in, and the test reaches its introspection, through netns-bridge.ts.
 *
 * Needs root, Debian's containerd, runc and containernetworking-plugins, and a built
 * tree (`npm run build`: dist/cni-plugin/eni-ipam.cjs).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { copyFile, chmod, mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PLUGIN_PATH } from './cni-exec.js';
import { startIpamd as spawnIpamd, type IpamdProcess } from './ipamd-process.js';
import { ipIn, type Netns } from './netns.js';
import { buildNode, withContainerd, type KitNode, type NodeOptions } from './node.js';
import type { SimCloud, Subnet } from '../sim/index.js';
import type { KubeApiStandIn } from '../sim/kube/index.js';
import type { Containerd } from './containerd.js';
import type { CriTestClient } from './cri-client.js';
import { bridgeNetns } from './netns-bridge.js';
import { findLosses, type LiveSandbox } from './nothing-lost.js';
import { waitFor } from './wait.js';

/** Kubernetes node name ipamd runs as. */
export const NODE_NAME = 'node-1';
/** CNI network name (conflist `name`), also ipamd's ENI_IPAM_NETWORK_NAME default. */
export const NETWORK_NAME = 'aws-cni';
/** ipamd's introspection port inside the node namespace (with `ipamdInNodeNetns`; a fresh namespace, nothing else binds it). */
const NODE_INTROSPECTION_PORT = 61679;

export type { IpamdAllocation, IpamdStatus, RunningPod } from './containerd-node-types.js';
import type { IpamdAllocation, IpamdStatus, RunningPod } from './containerd-node-types.js';

/** Options of {@link createContainerdNode}. */
export interface ContainerdNodeOptions {
  /** EC2 instance type (default m5.large: 3 ENIs × 10 IPv4). */
  instanceType?: string;
  /** Added to ipamd's environment for every start. */
  ipamdEnv?: NodeJS.ProcessEnv;
  /** Plugins chained after eni-ipam in the conflist. */
  chainedPlugins?: object[];
  /** Extra executables for the CNI bin dir: name → file content (written mode 0755). */
  extraBins?: Record<string, string>;
  /** Start ipamd at once (default true). */
  startIpamd?: boolean;
  /** Run ipamd inside the node network namespace, beside the pods' host veths (default false: the test's own). */
  ipamdInNodeNetns?: boolean;
  /** The VPC and subnets (custom networking, discovery): passed to buildNode as they are. */
  vpc?: Pick<NodeOptions, 'vpcCidrs' | 'extraSubnets' | 'subnetTags' | 'subnetCidr'>;
  /** The node's labels and annotations and the ENIConfigs in the stand-in (buildNode's `kube` without `nodeName`). */
  kube?: Omit<NonNullable<NodeOptions['kube']>, 'nodeName'>;
}

/** A running node; see the module docstring. */
export interface ContainerdNode {
  sim: SimCloud;
  kube: KubeApiStandIn;
  instanceId: string;
  /** The subnets made from `vpc.extraSubnets`, in the same order. */
  extraSubnets: Subnet[];
  /** Temp dir holding every file of this node. */
  dir: string;
  /** ipamd's gRPC socket, checkpoint file, log file, and containerd's CRI socket. */
  socket: string;
  checkpoint: string;
  ipamdLog: string;
  cniLog: string;
  criSocket: string;
  kubeconfig: string;
  nodeNetns: Netns;
  cri: CriTestClient;
  containerd: Containerd;
  /** The ipamd child, while one runs. */
  ipamd?: IpamdProcess;
  /** Base environment of ipamd (before per-start overrides). */
  env: NodeJS.ProcessEnv;
  /** Pods run through {@link runPod}, by sandbox id (removed by removePod). */
  pods: Map<string, RunningPod>;
  /** Whether runPod publishes the pod in the stand-in (default true; false lets a test make the API lie). */
  publishPods: boolean;
  /** Starts ipamd with `env` + `extra`; resolves once it logs "ipamd serving". */
  startIpamd(extra?: NodeJS.ProcessEnv): Promise<IpamdProcess>;
  /** SIGTERM (graceful: the checkpoint is flushed). No-op when none runs. */
  stopIpamd(): Promise<void>;
  /** SIGKILL, as a crash would (the checkpoint is whatever was last written). */
  killIpamd(): Promise<void>;
  /** stopIpamd() then startIpamd(extra). */
  restartIpamd(extra?: NodeJS.ProcessEnv): Promise<IpamdProcess>;
  /** `GET /v1/status` of the running ipamd. @throws when none runs. */
  status(): Promise<IpamdStatus>;
  /** `GET /v1/allocations` of the running ipamd. */
  allocations(): Promise<IpamdAllocation[]>;
  /**
   * RunPodSandbox through the CRI (containerd execs the plugin → ipamd assigns), then
   * publishes the pod in the stand-in with its IP, as kubelet would.
   * @throws the CRI error (gRPC ServiceError) when RunPodSandbox fails.
   */
  runPod(name: string, namespace?: string): Promise<RunningPod>;
  /** StopPodSandbox (CNI DEL with the netns) and deletes the pod from the stand-in. */
  stopPod(id: string): Promise<void>;
  /** StopPodSandbox + RemovePodSandbox (second DEL, empty netns), pod deleted from the stand-in. */
  removePod(id: string): Promise<void>;
  /** READY non-host-network sandboxes with an IP, straight from containerd. */
  liveSandboxes(): Promise<LiveSandbox[]>;
  /** The plugin's network configuration (conflist entry + name/cniVersion), for running it by hand with execPlugin. */
  pluginConf: Record<string, unknown>;
  /** Marks "something changed now" (for the GC grace wait of assertNothingLost). */
  touch(): void;
  /** Waits for a GC pass that started after the grace of the last change; returns the status then. */
  waitForGcPass(timeoutMs?: number): Promise<IpamdStatus>;
  /** The "nothing lost" check (see nothing-lost.ts); throws an AssertionError listing every violation. */
  assertNothingLost(): Promise<void>;
  /** Removes everything (ipamd, sandboxes, containerd, netns, sim, stand-in, temp dir). Idempotent. */
  close(): Promise<void>;
}

/** Writes `text` to `file` as temp-file-in-the-same-dir + rename (what containerd's conf watcher reloads on). */
async function writeViaRename(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp-${process.pid}`);
  await writeFile(tmp, text);
  await rename(tmp, file);
}

/**
 * Builds and starts the node.
 * @throws Error (after removing what was created) if containerd, the sim, the stand-in
 *   or ipamd does not start.
 */
export async function createContainerdNode(o: ContainerdNodeOptions = {}): Promise<ContainerdNode> {
  let built: KitNode | undefined;
  const closeAll = async (): Promise<void> => {
    await built?.close();
  };
  try {
    const k = (built = await buildNode({
      instanceType: o.instanceType ?? 'm5.large',
      dirPrefix: 'eni-ipam-rs-',
      kube: { ...o.kube, nodeName: NODE_NAME },
      netns: 'eni-rs',
      ...o.vpc,
    }));
    const { dir, sim, kube: kubeOrNone, kubeconfig: kubeconfigOrNone, nodeNetns: netnsOrNone, cleanups } = k;
    const kube = kubeOrNone!,
      kubeconfig = kubeconfigOrNone!,
      nodeNetns = netnsOrNone!;
    const inst = { instanceId: k.instanceId };

    const socket = path.join(dir, 'ipamd.sock');
    const cniLog = path.join(dir, 'cni.log');
    const binDir = path.join(dir, 'cni', 'bin');
    const confDir = path.join(dir, 'cni', 'conf');
    await mkdir(binDir, { recursive: true });
    await mkdir(confDir, { recursive: true });
    await copyFile(PLUGIN_PATH, path.join(binDir, 'eni-ipam'));
    await chmod(path.join(binDir, 'eni-ipam'), 0o755);
    await copyFile('/usr/lib/cni/loopback', path.join(binDir, 'loopback'));
    await chmod(path.join(binDir, 'loopback'), 0o755);
    for (const [name, text] of Object.entries(o.extraBins ?? {}))
      await writeFile(path.join(binDir, name), text, { mode: 0o755 });
    const conflist = {
      cniVersion: '1.0.0',
      name: NETWORK_NAME,
      plugins: [{ type: 'eni-ipam', ipamdSocket: socket, logFile: cniLog }, ...(o.chainedPlugins ?? [])],
    };
    await writeViaRename(path.join(confDir, '10-eni-ipam.conflist'), JSON.stringify(conflist));

    let introspection: string | undefined;
    if (o.ipamdInNodeNetns) {
      const port = (url: string): number => Number(new URL(url).port);
      const bridge = await bridgeNetns({
        netnsPath: nodeNetns.path,
        dir,
        inward: [port(sim.ec2Endpoint), port(sim.imdsEndpoint), port(kube.url)],
        outward: [NODE_INTROSPECTION_PORT],
      });
      cleanups.push(() => bridge.close());
      introspection = `http://127.0.0.1:${bridge.outward.get(NODE_INTROSPECTION_PORT)}`;
    }
    const { containerd, cri } = await withContainerd(k, {
      baseDir: path.join(dir, 'containerd'),
      nodeNetnsPath: nodeNetns.path,
      cniBinDir: binDir,
      cniConfDir: confDir,
    });
    const getJson = async <T>(p: string): Promise<T> => {
      assert.ok(n.ipamd, 'ipamd is not running');
      const r = await fetch(`${introspection ?? `http://127.0.0.1:${n.ipamd.introspectionPort}`}${p}`);
      if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status}`);
      return (await r.json()) as T;
    };

    let lastChangeAt = Date.now();
    const n: ContainerdNode = {
      sim,
      kube,
      instanceId: inst.instanceId,
      extraSubnets: k.extraSubnets,
      dir,
      socket,
      checkpoint: path.join(dir, 'ipam.json'),
      ipamdLog: path.join(dir, 'ipamd.log'),
      cniLog,
      criSocket: containerd.socket,
      kubeconfig,
      nodeNetns,
      cri,
      containerd,
      pods: new Map(),
      publishPods: true,
      pluginConf: { cniVersion: conflist.cniVersion, name: conflist.name, ...conflist.plugins[0] },
      env: {
        AWS_EC2_ENDPOINT: sim.ec2Endpoint,
        AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
        ENI_IPAM_SOCKET: socket,
        ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json'),
        CRI_RUNTIME_ENDPOINT: `unix://${containerd.socket}`,
        MY_NODE_NAME: NODE_NAME,
        KUBECONFIG: kubeconfig,
        ENI_IPAM_GC_INTERVAL: '1s',
        ENI_IPAM_GC_GRACE: '2s',
        ENI_IPAM_POOL_INTERVAL: '200ms',
        AWS_VPC_K8S_CNI_LOGLEVEL: 'debug',
        // ipamd runs in the test's own namespace or the node's: it must not touch the host's links, rules or /etc/cni.
        ENI_IPAM_HOST_NETWORK: 'false',
        ENI_IPAM_INSTALL_CNI: 'false',
        // The pods' veths and routes live in the node netns: ipamd's kernel source reads them there.
        ENI_IPAM_CNI_EXEC_NETNS: nodeNetns.path,
        ...(introspection ? { INTROSPECTION_BIND_ADDRESS: `127.0.0.1:${NODE_INTROSPECTION_PORT}` } : {}),
        ...o.ipamdEnv,
      },
      async startIpamd(extra = {}) {
        assert.equal(n.ipamd, undefined, 'ipamd already runs');
        const env = { ...n.env, ...extra };
        for (const [k, v] of Object.entries(extra)) if (v === undefined) delete env[k];
        n.ipamd = await spawnIpamd({
          env,
          logFile: n.ipamdLog,
          ...(introspection ? { prefix: ['nsenter', `--net=${nodeNetns.path}`] } : {}),
        });
        n.touch();
        return n.ipamd;
      },
      async stopIpamd() {
        const p = n.ipamd;
        n.ipamd = undefined;
        if (p) await p.stop(10_000);
      },
      async killIpamd() {
        const p = n.ipamd;
        n.ipamd = undefined;
        if (p) await p.kill9();
      },
      async restartIpamd(extra) {
        await n.stopIpamd();
        return n.startIpamd(extra);
      },
      status: () => getJson<IpamdStatus>('/v1/status'),
      allocations: () => getJson<IpamdAllocation[]>('/v1/allocations'),
      async runPod(name, namespace = 'default') {
        const uid = randomUUID();
        n.touch();
        const id = await cri.runPodSandbox({ name, namespace, uid });
        const ip = (await cri.podSandboxStatus(id)).status?.network?.ip ?? '';
        assert.ok(ip, `sandbox of ${name} has no IP`);
        const pod = { id, ip, name, namespace, uid };
        n.pods.set(id, pod);
        if (n.publishPods) kube.upsertPod({ namespace, name, uid, nodeName: NODE_NAME, podIP: ip, containerID: id });
        n.touch();
        return pod;
      },
      async stopPod(id) {
        n.touch();
        const p = n.pods.get(id);
        if (p) kube.deletePod(p.namespace, p.name);
        await cri.stopPodSandbox(id);
        n.touch();
      },
      async removePod(id) {
        await n.stopPod(id);
        await cri.removePodSandbox(id);
        n.pods.delete(id);
        n.touch();
      },
      liveSandboxes: () => cri.liveSandboxes(),
      touch() {
        lastChangeAt = Date.now();
      },
      async waitForGcPass(timeoutMs = 20_000) {
        const graceMs = parseDurationMs(n.env['ENI_IPAM_GC_GRACE'] ?? '60s');
        const notBefore = Math.max(Date.now(), lastChangeAt + graceMs + 50);
        const passesBefore = (await n.status()).evidence.passes;
        return waitFor(
          'a GC pass after the grace of the last change',
          async () => {
            const s = await n.status();
            return s.evidence.passes > passesBefore &&
              (s.evidence.lastPassAt ?? 0) >= notBefore &&
              s.evidence.lastPass?.canRelease
              ? s
              : undefined;
          },
          timeoutMs,
          100,
        );
      },
      async assertNothingLost() {
        await n.waitForGcPass();
        // With ENI_IPAM_FAST_RESTART the `ec2-confirm` freeze lasts until EC2's jittered confirm (≤ 10 s by
        // default): wait for the freeze to lift, with a deadline that still catches one that never does.
        const s = await waitFor(
          'releases unfrozen after the GC pass',
          async () => {
            const st = await n.status();
            return st.releasesFrozen ? undefined : st;
          },
          30_000,
          100,
        ).catch(async () => n.status());
        assert.equal(s.releasesFrozen, false, `releases still frozen: ${s.freezeReasons.join('; ')}`);
        const live = await n.liveSandboxes();
        const ipInNetns = new Map<string, string | undefined>();
        for (const sb of live) {
          const ns = await cri.netnsPath(sb.id);
          const out = ns ? await ipIn(ns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']).catch(() => '') : '';
          ipInNetns.set(sb.id, /inet (\d+\.\d+\.\d+\.\d+)\/32/.exec(out)?.[1]);
        }
        const allocations = await n.allocations();
        const ipAtStart = new Map([...n.pods.values()].map((p) => [p.id, p.ip]));
        const losses = findLosses({
          live,
          ipAtStart,
          ipInNetns,
          sim: sim.state,
          calls: sim.calls,
          instanceId: inst.instanceId,
          allocations,
        });
        assert.deepEqual(
          losses,
          [],
          `nothing-lost check failed (${live.length} live sandboxes):\n${losses.join('\n')}`,
        );
        const after = await n.status();
        assert.equal(after.counts.assigned, live.length, 'ipamd assigned == live sandboxes after one GC pass');
      },
      async close() {
        await n.stopIpamd().catch(() => undefined);
        await closeAll();
      },
    };
    if (o.startIpamd !== false) await n.startIpamd();
    return n;
  } catch (e) {
    await closeAll().catch(() => undefined);
    throw e;
  }
}

/** ipamd's duration syntax (number = s, or ms/s/m/h suffix) → ms. */
function parseDurationMs(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) return 60_000;
  const mult = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  return Number(m[1]) * mult;
}
