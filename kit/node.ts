/**
 * The one node builder of the test kit: the parts every simulated test node shares,
 * chosen by options, each registered on one cleanup stack so `close()` removes them in
 * reverse order even when a later part fails to start.
 *
 * - always: a temp dir and an EC2 instance in the simulated cloud (EC2 + IMDS on
 *   loopback), a fresh {@link SimCloud} with one subnet unless `sim` shares one; for
 *   custom networking and subnet discovery, `vpcCidrs` (secondary VPC blocks),
 *   `extraSubnets` (tagged, any zone) and `subnetTags`;
 * - `kube`: the Kubernetes API stand-in (sim/kube) with a kubeconfig in the dir and the
 *   node registered (with labels/annotations), and ENIConfigs;
 * - `cri`: the CRI runtime stand-in (sim/cri), for nodes without containerd;
 * - `netns`: a named "node" network namespace (the real host stays untouched).
 *
 * Layers add the rest: kit/node-harness.ts (ipamd as a child process),
 * lifecycle-node.ts and cni-node.ts on top of it, the containerd nodes
 * (containerd-node.ts, containerd-cni-node.ts, containerd-ds-node.ts) with
 * {@link withContainerd}, and the property/bench node (kit/sim-node.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SimCloud, vpcCidrBlocks, type SimCloudOptions, type Subnet } from '../sim/index.js';
import type { CriStandIn, CriStandInOptions } from '../sim/cri/index.js';
import type { EniConfigSpec, KubeApiStandIn } from '../sim/kube/index.js';
import type { Containerd, ContainerdOptions } from './containerd.js';
import { cleanupStack, type CleanupStack } from './cleanup-stack.js';
import type { CriTestClient } from './cri-client.js';
import type { Netns } from './netns.js';

/** Options of {@link buildNode}. */
export interface NodeOptions {
  /** A simulated cloud to share (not stopped by close); default: a new one, stopped by close. */
  sim?: SimCloud;
  /** Options of the new cloud (e.g. `{ seed: 11 }` for stable ids); ignored with `sim`. */
  simOptions?: SimCloudOptions;
  /** Subnet to launch in (with a shared `sim`); default: a new subnet of `subnetCidr`. */
  subnetId?: string;
  /** CIDR of the new subnet (default 10.0.0.0/24). */
  subnetCidr?: string;
  /** Tags of the node's new subnet (e.g. `{ 'kubernetes.io/role/cni': '0' }`); ignored with `subnetId`. */
  subnetTags?: Record<string, string>;
  /** Secondary VPC CIDR blocks to associate first (e.g. `['100.64.0.0/16']`); blocks the VPC already has are skipped. */
  vpcCidrs?: string[];
  /** More subnets, in any zone of the region and tagged, made before the instance; returned in order as `extraSubnets`. */
  extraSubnets?: Array<{ cidr: string; availabilityZone?: string; tags?: Record<string, string> }>;
  /**
   * Dual-stack VPC and subnet: the VPC gets an IPv6 /56 (if it has none), the new subnet a
   * /64 with `AssignIpv6AddressOnCreation`, so the instance's primary ENI has an IPv6
   * address ({@link KitNode.nodeIpv6}); ignored with `subnetId`. Default false.
   */
  ipv6?: boolean;
  /** EC2 instance type (default m5.large: 3 ENIs x 10 IPv4). */
  instanceType?: string;
  /** Prefix of the temp dir's name (default `eni-ipam-node-`). */
  dirPrefix?: string;
  /** Keep the temp dir on close (a post-mortem). Default false. */
  keepDir?: boolean;
  /**
   * Start the Kubernetes API stand-in, write `<dir>/kubeconfig` and register node `nodeName`
   * (default node-1) with extra `labels` / `annotations` (e.g. the ENIConfig selector), and
   * the ENIConfigs `eniConfigs` (name → spec: `subnet`, `subnets`, `securityGroups`).
   */
  kube?: {
    nodeName?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    eniConfigs?: Record<string, EniConfigSpec>;
  };
  /** Start the CRI stand-in (sim/cri) with these options (socket default: `<dir>/cri.sock`). */
  cri?: CriStandInOptions;
  /** Create a named node network namespace called `<netns>-<pid>-<n>`. */
  netns?: string;
}

/** The parts {@link buildNode} made; see the module docstring. */
export interface KitNode {
  sim: SimCloud;
  subnetId: string;
  /** The subnets made from `extraSubnets`, in the same order. */
  extraSubnets: Subnet[];
  instanceId: string;
  /** The instance's primary private IPv4. */
  nodeIp: string;
  /** The primary ENI's IPv6 address (with `ipv6`). */
  nodeIpv6?: string;
  /** Temp dir holding every file of this node. */
  dir: string;
  kube?: KubeApiStandIn;
  /** Kubernetes node name (with `kube`). */
  nodeName?: string;
  /** `<dir>/kubeconfig` for the stand-in (with `kube`). */
  kubeconfig?: string;
  cri?: CriStandIn;
  nodeNetns?: Netns;
  /** The cleanup stack: layers push their parts on it. */
  cleanups: CleanupStack;
  /** Runs the cleanup stack once (later calls share the first run). @throws Error listing what could not be removed. */
  close(): Promise<void>;
}

let seq = 0;

/**
 * Builds the parts chosen by `o`.
 * @throws Error (after removing what was created) when a part does not start.
 */
export async function buildNode(o: NodeOptions = {}): Promise<KitNode> {
  const cleanups = cleanupStack();
  try {
    const dir = await mkdtemp(path.join(os.tmpdir(), o.dirPrefix ?? 'eni-ipam-node-'));
    // Retried on ENOTEMPTY/EBUSY: a file a stopping child wrote last can land between the walk and the rmdir.
    if (!o.keepDir) cleanups.push(() => rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }));
    let sim = o.sim;
    if (!sim) {
      const own = new SimCloud(o.simOptions);
      await own.start();
      cleanups.push(() => own.stop());
      sim = own;
    }
    for (const c of o.vpcCidrs ?? []) if (!vpcCidrBlocks(sim.state).includes(c)) sim.addVpcCidr(c);
    if (o.ipv6 && !o.subnetId && !sim.state.vpcIpv6Cidrs?.length) sim.addVpcIpv6Cidr();
    const subnetId =
      o.subnetId ??
      sim.addSubnet({
        cidr: o.subnetCidr ?? '10.0.0.0/24',
        tags: o.subnetTags ?? {},
        ...(o.ipv6 ? { ipv6Cidr: true, assignIpv6AddressOnCreation: true } : {}),
      }).subnetId;
    const extraSubnets = (o.extraSubnets ?? []).map((x) => sim.addSubnet(x));
    const inst = sim.launchInstance({ instanceType: o.instanceType ?? 'm5.large', subnetId });
    const n: KitNode = {
      sim,
      subnetId,
      extraSubnets,
      instanceId: inst.instanceId,
      nodeIp: inst.privateIpAddress,
      ...(o.ipv6 && !o.subnetId ? { nodeIpv6: sim.state.enis.get(inst.primaryEniId)?.ipv6Addresses[0] } : {}),
      dir,
      cleanups,
      close: cleanups.close,
    };
    // The optional parts are imported when asked for: a cloud-only node (the sim fixture) loads no gRPC.
    if (o.kube) {
      const { KubeApiStandIn } = await import('../sim/kube/index.js');
      const kube = new KubeApiStandIn();
      await kube.start();
      cleanups.push(() => kube.stop());
      n.kube = kube;
      n.nodeName = o.kube.nodeName ?? 'node-1';
      n.kubeconfig = path.join(dir, 'kubeconfig');
      await kube.writeKubeconfig(n.kubeconfig);
      kube.upsertNode(n.nodeName);
      if (o.kube.labels || o.kube.annotations)
        kube.setNodeMetadata(n.nodeName, {
          ...(o.kube.labels ? { labels: o.kube.labels } : {}),
          ...(o.kube.annotations ? { annotations: o.kube.annotations } : {}),
        });
      for (const [name, spec] of Object.entries(o.kube.eniConfigs ?? {})) kube.upsertEniConfig(name, spec);
    }
    if (o.cri) {
      const { startCriStandIn } = await import('../sim/cri/index.js');
      const cri = await startCriStandIn({ socketPath: path.join(dir, 'cri.sock'), ...o.cri });
      cleanups.push(() => cri.close());
      n.cri = cri;
    }
    if (o.netns) {
      const { createNamedNetns } = await import('./netns.js');
      const ns = await createNamedNetns(`${o.netns}-${process.pid}-${seq++}`);
      cleanups.push(() => ns.remove());
      n.nodeNetns = ns;
    }
    return n;
  } catch (e) {
    await cleanups.close().catch(() => undefined);
    throw e;
  }
}

/** A private containerd on the node and a CRI client to it. */
export interface ContainerdLayer {
  containerd: Containerd;
  cri: CriTestClient;
}

/**
 * Starts a private containerd (kit/containerd.ts) for `n` and a CRI client
 * (RPC timeout 60 s), both on `n`'s cleanup stack. When the node has a Kubernetes
 * stand-in, the node reports containerd's CRI identity (`<runtime_name>://<version>`, the version
 * in the kubelet's normal form: kubeletRuntimeVersion)
 * as kubelet would: ipamd compares it with CRI Version, and a mismatch rightly freezes releases.
 * @throws Error when containerd does not start (the caller's close() removes the rest).
 */
export async function withContainerd(n: KitNode, o: ContainerdOptions): Promise<ContainerdLayer> {
  const [{ startContainerd }, { CriTestClient }, { kubeletRuntimeVersion }] = await Promise.all([
    import('./containerd.js'),
    import('./cri-client.js'),
    import('../ipamd/restore/plausibility.js'),
  ]);
  const containerd = await startContainerd(o);
  n.cleanups.push(() => containerd.stop());
  const cri = new CriTestClient(containerd.socket, 60_000);
  n.cleanups.push(async () => cri.close());
  if (n.kube && n.nodeName) {
    const version = await cri.version();
    n.kube.upsertNode(n.nodeName, `${version.runtime_name}://${kubeletRuntimeVersion(version.runtime_version)}`);
  }
  return { containerd, cri };
}

/** Fetches JSON from `base` + `p`. @throws Error naming the path and HTTP status when not 2xx. */
export async function getJson<T>(base: string, p: string): Promise<T> {
  const r = await fetch(`${base}${p}`);
  if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status}`);
  return (await r.json()) as T;
}
