/**
 * One node of the test cluster, standing for one EC2 instance of the simulated cloud: its own
 * network namespace (`eth0` with the instance's primary address, the ENI links the VPC data
 * plane plugs), its own mount namespace (the node paths the chart's hostPaths name), the
 * simulated EC2 and the instance's own IMDS on the loopback URLs the DaemonSet names, and its
 * containerd, kubelet and kube-proxy. Everything it starts is on its own cleanup stack:
 * `close()` removes the node (as a terminated instance's host goes) and nothing else.
 */
import { copyFile, chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { instanceTypeInfo, type SimCloud } from '../../sim/index.js';
import { cleanupStack } from '../cleanup-stack.js';
import { createNamedNetns, type Netns } from '../netns.js';
import { bridgeNetns } from '../netns-bridge.js';
import { createNodeMountNs, type NodeMountNs } from '../node-mountns.js';
import { firstHost } from '../vpc/desired.js';
import type { VpcDataPlane } from '../vpc/dataplane.js';
import { addressEth0 } from '../vpc/node-eth0.js';
import type { ClusterBinaries } from './binaries.js';
import { familyPlan, type ClusterIpFamily, type FamilyPlan } from './ip-family.js';
import type { Kubectl } from './kubectl.js';
import { cgroupRootOf, removeCgroupRoot, startNodeProcesses, type NodeProcesses } from './node-processes.js';
import type { Pki } from './pki.js';
import { killMountNsProcesses } from './teardown.js';

/** The apiserver's port inside the control-plane node's namespace. */
export const API_PORT = 6443;

/** The node paths backed by each node's own dirs. */
export const CLUSTER_NODE_BINDS = [
  { nodePath: '/etc/cni/net.d' },
  { nodePath: '/opt/cni/bin' },
  { nodePath: '/run/eni-ipam' },
  { nodePath: '/run/xtables.lock', kind: 'file' as const },
  { nodePath: '/var/log/aws-routed-eni' },
  { nodePath: '/var/log/pods' },
  { nodePath: '/var/log/containers' },
  { nodePath: '/run/containerd' },
  { nodePath: '/run/aws-node' },
  { nodePath: '/var/lib/kubelet' },
];

/** A running node of the cluster. */
export interface ClusterNode {
  /** 0 for the control-plane node, then 1, 2, … in the order the nodes joined. */
  index: number;
  /** Kubernetes node name. */
  name: string;
  instanceId: string;
  instanceType: string;
  /** The instance's primary private IPv4 (its primary ENI's). */
  ip: string;
  /** The primary ENI's IPv6 (ipv6 and dual clusters). */
  ipv6?: string;
  /** The node's Kubernetes addresses and the cluster's Service ranges. */
  family: FamilyPlan;
  /** This node's own dir (configs, logs, bind backings). */
  dir: string;
  netns: Netns;
  mountNs: NodeMountNs;
  procs: NodeProcesses;
  /** The test-side path of node path `p`. @throws Error when no bind covers it. */
  host(p: string): string;
  /** Removes the node: its processes, pods, namespaces and dirs (the instance stays in the cloud). Idempotent. */
  /** True once {@link close} was called (the node left the cluster; it stays in `TestCluster.nodes`). */
  readonly closed: boolean;
  close(): Promise<void>;
}

/** What every node of one cluster shares. */
export interface ClusterContext {
  bins: ClusterBinaries;
  sim: SimCloud;
  dataPlane: VpcDataPlane;
  pki: Pki;
  kubectl: Kubectl;
  family: ClusterIpFamily;
  /** The cluster's dir (each node has `<dir>/nodes/<name>`). */
  dir: string;
  /** Every node's kubelet maxPods; default {@link eksMaxPods} of the node's instance type. */
  maxPods?: number;
}

/** What makes one node: its instance, name and index, and (for the control-plane node) what runs before its kubelet. */
export interface NodeSpec {
  index: number;
  name: string;
  instanceId: string;
  /** A named network namespace made for it already (the control-plane node's); default: one made here. */
  netns?: Netns;
  /** Ports inside the node served on 127.0.0.1 of the test (the apiserver's). */
  outward?: number[];
  /** OCI archives the cluster's nodes have (imported before the kubelet starts). */
  images?: string[];
  /** Runs once the node's namespaces and cloud access are in place, before containerd and kubelet. */
  beforeProcesses?(n: { netns: Netns; dir: string; outward: Map<number, number> }): Promise<void>;
}

let netnsSeq = 1000;

/**
 * The kubelet's maxPods as the EKS AMI sets it for an instance type (amazon-vpc-cni-k8s's
 * eni-max-pods.txt): ENIs × (IPv4 addresses per ENI − 1) + 2, × 16 per slot with prefix
 * delegation (IPv6 clusters use it), capped at 110 (EKS's cap up to 30 vCPUs; these types
 * are small). The + 2 is for the two host-network pods of an EKS node, aws-node and
 * kube-proxy; kube-proxy is a process here, not a pod, so one fewer. Without it the
 * scheduler sends a small node more pods than its ENIs can address.
 */
export function eksMaxPods(instanceType: string, prefixDelegation: boolean): number {
  const t = instanceTypeInfo(instanceType);
  if (!t) return 110;
  return Math.min(110, t.maxEnis * (t.ipv4PerEni - 1) * (prefixDelegation ? 16 : 1) + 2 - 1);
}

/**
 * Starts node `spec` of the cluster `ctx`. @returns the node once its kubelet has registered it.
 * @throws Error naming the part that failed (what started is removed first).
 */
export async function startClusterNode(ctx: ClusterContext, spec: NodeSpec): Promise<ClusterNode> {
  const cleanups = cleanupStack();
  try {
    const inst = ctx.sim.state.instances.get(spec.instanceId);
    if (!inst) throw new Error(`no instance ${spec.instanceId} in the simulated cloud`);
    const ipv6 = ctx.family === 'ipv4' ? undefined : ctx.sim.state.enis.get(inst.primaryEniId)?.ipv6Addresses[0];
    const family = familyPlan(ctx.family, inst.privateIpAddress, ipv6);
    const dir = path.join(ctx.dir, 'nodes', spec.name);
    await mkdir(dir, { recursive: true });
    let netns = spec.netns;
    if (!netns) {
      const own = await createNamedNetns(`eni-k8s-${process.pid}-${netnsSeq++}`);
      cleanups.push(() => own.remove());
      netns = own;
    }
    await ctx.dataPlane.addInstance(spec.instanceId, netns);
    cleanups.push(() => ctx.dataPlane.removeInstance(spec.instanceId));
    const gw = firstHost(ctx.sim.state.subnets.get(inst.subnetId)!.cidr);
    await addressEth0(netns, inst.privateIpAddress, gw, ipv6);
    const port = (url: string): number => Number(new URL(url).port);
    const bridge = await bridgeNetns({
      netnsPath: netns.path,
      dir,
      inward: [
        port(ctx.sim.ec2Endpoint),
        { inner: port(ctx.sim.imdsEndpoint), outer: port(await ctx.sim.imdsEndpointOwn(spec.instanceId)) },
      ],
      outward: spec.outward ?? [],
    });
    cleanups.push(() => bridge.close());
    const mountNs = await createNodeMountNs({ root: dir, binds: CLUSTER_NODE_BINDS, hostname: spec.name });
    const cgroupRoot = cgroupRootOf(spec.index);
    cleanups.push(async () => {
      await killMountNsProcesses(mountNs);
      await mountNs.close();
      await removeCgroupRoot(cgroupRoot); // the containers' cgroups empty only once their processes are gone
    });
    const host = (p: string): string => {
      const h = mountNs.hostPathOf(p);
      if (!h) throw new Error(`node path ${p} is not backed by node ${spec.name}`);
      return h;
    };
    await copyFile('/usr/lib/cni/loopback', host('/opt/cni/bin/loopback'));
    await chmod(host('/opt/cni/bin/loopback'), 0o755);
    await spec.beforeProcesses?.({ netns, dir, outward: bridge.outward });
    const procs = await startNodeProcesses({
      bins: ctx.bins,
      dir,
      netns: netns.path,
      mountNs,
      pki: ctx.pki,
      nodeIp: inst.privateIpAddress,
      family,
      nodeName: spec.name,
      cgroupRoot,
      images: spec.images ?? [],
      maxPods: ctx.maxPods ?? eksMaxPods(inst.instanceType, ctx.family !== 'ipv4'),
      kubectl: ctx.kubectl,
      host,
    });
    cleanups.push(() => procs.stop());
    let closed = false;
    return {
      index: spec.index,
      name: spec.name,
      instanceId: spec.instanceId,
      instanceType: inst.instanceType,
      ip: inst.privateIpAddress,
      ...(ipv6 ? { ipv6 } : {}),
      family,
      dir,
      netns,
      mountNs,
      procs,
      host,
      get closed() {
        return closed;
      },
      close: () => {
        closed = true;
        return cleanups.close();
      },
    };
  } catch (e) {
    await cleanups.close().catch(() => undefined);
    throw e;
  }
}
