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
import path from 'node:path';
import { startIpamd as spawnIpamd, type IpamdProcess } from './ipamd-process.js';
import type { Netns } from './netns.js';
import { buildNode, withContainerd, type KitNode, type NodeOptions } from './node.js';
import type { SimCloud, Subnet } from '../sim/index.js';
import type { KubeApiStandIn } from '../sim/kube/index.js';
import type { Containerd } from './containerd.js';
import type { CriTestClient } from './cri-client.js';
import { assertNothingLostOn, waitForGcPassAfter } from './containerd-node-checks.js';
import { bridgeIntrospection, nodeIpamdEnv, writeCniDirs } from './containerd-node-setup.js';
import type { LiveSandbox } from './nothing-lost.js';

/** Kubernetes node name ipamd runs as. */
export const NODE_NAME = 'node-1';
/** CNI network name (conflist `name`), also ipamd's ENI_IPAM_NETWORK_NAME default. */
export const NETWORK_NAME = 'aws-cni';

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
  /** The VPC and subnets (custom networking, discovery, `ipv6`: a dual-stack VPC and subnet): passed to buildNode as they are. */
  vpc?: Pick<NodeOptions, 'vpcCidrs' | 'extraSubnets' | 'subnetTags' | 'subnetCidr' | 'ipv6'>;
  /** Added to the eni-ipam entry of the conflist (e.g. `{ ipFamily: 'ipv6' }`). */
  pluginConfig?: Record<string, unknown>;
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

/**
 * Starts ipamd on node `n` with `n.env` + `extra` (an `extra` key set to undefined
 * removes it), under `prefix` when given (nsenter into the node netns); resolves once it
 * serves. @throws AssertionError when one already runs.
 */
async function startNodeIpamd(n: ContainerdNode, extra: NodeJS.ProcessEnv, prefix?: string[]): Promise<IpamdProcess> {
  assert.equal(n.ipamd, undefined, 'ipamd already runs');
  const env = { ...n.env, ...extra };
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete env[k];
  n.ipamd = await spawnIpamd({
    env,
    logFile: n.ipamdLog,
    ...(prefix ? { prefix } : {}),
  });
  n.touch();
  return n.ipamd;
}

/**
 * RunPodSandbox for `namespace/name` through `cri`, then (with `n.publishPods`) the pod
 * with its IP in the stand-in `kube`, as kubelet would; each step marks a change.
 * @throws the CRI error when RunPodSandbox fails; AssertionError when the sandbox has no IP.
 */
async function runNodePod(
  n: ContainerdNode,
  c: { cri: CriTestClient; kube: KubeApiStandIn },
  name: string,
  namespace: string,
): Promise<RunningPod> {
  const uid = randomUUID();
  n.touch();
  const id = await c.cri.runPodSandbox({ name, namespace, uid });
  const ip = (await c.cri.podSandboxStatus(id)).status?.network?.ip ?? '';
  assert.ok(ip, `sandbox of ${name} has no IP`);
  const pod = { id, ip, name, namespace, uid };
  n.pods.set(id, pod);
  if (n.publishPods) c.kube.upsertPod({ namespace, name, uid, nodeName: NODE_NAME, podIP: ip, containerID: id });
  n.touch();
  return pod;
}

/** `GET <path>` of node `n`'s ipamd introspection (at `introspection`, else its own port), as JSON. @throws when none runs or on a non-2xx answer. */
async function getIpamdJson<T>(n: ContainerdNode, introspection: string | undefined, p: string): Promise<T> {
  assert.ok(n.ipamd, 'ipamd is not running');
  const r = await fetch(`${introspection ?? `http://127.0.0.1:${n.ipamd.introspectionPort}`}${p}`);
  if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status}`);
  return (await r.json()) as T;
}

/** Forgets node `n`'s ipamd, then ends it with `end` (stop or SIGKILL). No-op when none runs. */
async function endNodeIpamd(n: ContainerdNode, end: (p: IpamdProcess) => Promise<unknown>): Promise<void> {
  const p = n.ipamd;
  n.ipamd = undefined;
  if (p) await end(p);
}

/** Deletes pod `id` from the stand-in `kube` and StopPodSandbox through `cri` (CNI DEL with the netns); marks the change before and after. */
async function stopNodePod(
  n: ContainerdNode,
  c: { cri: CriTestClient; kube: KubeApiStandIn },
  id: string,
): Promise<void> {
  n.touch();
  const p = n.pods.get(id);
  if (p) c.kube.deletePod(p.namespace, p.name);
  await c.cri.stopPodSandbox(id);
  n.touch();
}

/** `n.stopPod(id)`, then RemovePodSandbox through `cri` (second DEL, empty netns); forgets the pod and marks the change. */
async function removeNodePod(n: ContainerdNode, cri: CriTestClient, id: string): Promise<void> {
  await n.stopPod(id);
  await cri.removePodSandbox(id);
  n.pods.delete(id);
  n.touch();
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
    const { binDir, confDir, pluginConf } = await writeCniDirs({
      dir,
      networkName: NETWORK_NAME,
      socket,
      cniLog,
      ...(o.chainedPlugins ? { chainedPlugins: o.chainedPlugins } : {}),
      ...(o.extraBins ? { extraBins: o.extraBins } : {}),
      ...(o.pluginConfig ? { pluginConfig: o.pluginConfig } : {}),
    });

    const introspection = o.ipamdInNodeNetns
      ? await bridgeIntrospection({ netnsPath: nodeNetns.path, dir, sim, kubeUrl: kube.url, cleanups })
      : undefined;
    const { containerd, cri } = await withContainerd(k, {
      baseDir: path.join(dir, 'containerd'),
      nodeNetnsPath: nodeNetns.path,
      cniBinDir: binDir,
      cniConfDir: confDir,
    });
    const getJson = <T>(p: string): Promise<T> => getIpamdJson<T>(n, introspection, p);

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
      pluginConf,
      env: nodeIpamdEnv({
        sim,
        socket,
        dir,
        criSocket: containerd.socket,
        nodeName: NODE_NAME,
        kubeconfig,
        nodeNetnsPath: nodeNetns.path,
        introspectionInNode: !!introspection,
        extra: o.ipamdEnv,
      }),
      startIpamd: (extra = {}) =>
        startNodeIpamd(n, extra, introspection ? ['nsenter', `--net=${nodeNetns.path}`] : undefined),
      stopIpamd: () => endNodeIpamd(n, (p) => p.stop(10_000)),
      killIpamd: () => endNodeIpamd(n, (p) => p.kill9()),
      async restartIpamd(extra) {
        await n.stopIpamd();
        return n.startIpamd(extra);
      },
      status: () => getJson<IpamdStatus>('/v1/status'),
      allocations: () => getJson<IpamdAllocation[]>('/v1/allocations'),
      runPod: (name, namespace = 'default') => runNodePod(n, { cri, kube }, name, namespace),
      stopPod: (id) => stopNodePod(n, { cri, kube }, id),
      removePod: (id) => removeNodePod(n, cri, id),
      liveSandboxes: () => cri.liveSandboxes(),
      touch() {
        lastChangeAt = Date.now();
      },
      waitForGcPass: (timeoutMs = 20_000) => waitForGcPassAfter(n, lastChangeAt, timeoutMs),
      assertNothingLost: () => assertNothingLostOn(n, { sim, instanceId: inst.instanceId, cri }),
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
