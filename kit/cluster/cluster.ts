/**
 * A real Kubernetes cluster of one or more nodes on this machine, for the end-to-end tests and
 * `npm run cluster`: etcd, kube-apiserver, kube-controller-manager and kube-scheduler (the
 * control plane, on the first node, as on a kind control-plane node) plus, on every node,
 * containerd 2.x, kubelet and kube-proxy, all built from their Go modules (cluster/build.sh).
 * Each node stands for one EC2 instance of the simulated cloud (cluster-node.ts): its own
 * network and mount namespaces, its ENI links plugged by the simulated VPC's data plane
 * (kit/vpc/dataplane.ts), which routes every address to the ENI EC2 says holds it, so pods on
 * different nodes reach each other through the VPC as on EKS.
 *
 * - the apiserver advertises the first node's IP (the `kubernetes` Service works through the
 *   real kube-proxy) and answers here on 127.0.0.1:`apiPort` (netns-bridge.ts); the other
 *   nodes' kubelets reach it through the VPC;
 * - the simulated EC2 answers inside every node on its loopback URL, and IMDS on one loopback
 *   URL too, each node's relay leading to its own instance.
 *
 * Everything is on one cleanup stack: `close()` removes it all, also after a failed start.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildNode, type KitNode } from '../node.js';
import type { Netns } from '../netns.js';
import type { NodeMountNs } from '../node-mountns.js';
import { startVpcDataPlane, type VpcDataPlane } from '../vpc/dataplane.js';
import type { SimCloud } from '../../sim/index.js';
import { clusterBinaries, type ClusterBinaries } from './binaries.js';
import { makePki, type Pki } from './pki.js';
import type { NodeProcesses } from './node-processes.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { kubectlRunner, type Kubectl } from './kubectl.js';
import { familyPlan, SERVICE_CIDR_V4, type ClusterIpFamily, type FamilyPlan } from './ip-family.js';
import { API_PORT, startClusterNode, type ClusterContext, type ClusterNode } from './cluster-node.js';

export { API_PORT, CLUSTER_NODE_BINDS, type ClusterNode } from './cluster-node.js';
/** The IPv4 Service CIDR; its first address is the `kubernetes` Service. */
export const SERVICE_CIDR = SERVICE_CIDR_V4;
/** Node identities made beyond the first `nodes`, for nodes that join later ({@link TestCluster.addNode}). */
const SPARE_NODES = 3;

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  /** EC2 instance type of every node without one in `instanceTypes` (default m5.xlarge: 4 ENIs × 14 pod IPs). */
  instanceType?: string;
  /** Instance types by node, first node first (types may differ); missing ones are `instanceType`. */
  instanceTypes?: string[];
  /** Nodes to start (default 1); the first runs the control plane too. */
  nodes?: number;
  /** Kubernetes name of the first node (default `eni-ipam-node`); node k+1 is `<name>-<k+1>`. */
  nodeName?: string;
  /** Keep the cluster's dir on close (a post-mortem). */
  keepDir?: boolean;
  /** The cluster's IP family (kit/cluster/ip-family.ts; default ipv4); ipv6 and dual make the subnet dual-stack. */
  ipFamily?: ClusterIpFamily;
  /** The subnet every node launches in (default 10.0.0.0/24). */
  subnetCidr?: string;
  /**
   * Every node's kubelet maxPods (default: as the EKS AMI sets it for the instance type,
   * `eksMaxPods` in cluster-node.ts, which is no more pods than the ENIs can address). A larger value is
   * a node whose launch template set max-pods without the ENI arithmetic: the scheduler then
   * sends it more pods than it has addresses for, and their ADDs fail.
   */
  maxPods?: number;
}

/** A running cluster. The fields without a node in their name are the first node's. */
export interface TestCluster {
  bins: ClusterBinaries;
  /** The first node's kit node: the simulated cloud, the cluster's dir and cleanup stack. */
  node: KitNode;
  sim: SimCloud;
  /** Every node, the first (control-plane) node first; {@link addNode} appends, a closed node stays listed. */
  nodes: ClusterNode[];
  nodeName: string;
  /** The first node's primary private IPv4 (its primary ENI's). */
  nodeIp: string;
  /** The first node's primary ENI's IPv6 (ipv6 and dual clusters). */
  nodeIpv6?: string;
  /** The family, the first node's Kubernetes addresses and the Service ranges. */
  family: FamilyPlan;
  dir: string;
  nodeNetns: Netns;
  /** The VPC data plane every node's ENI links end in. */
  dataPlane: VpcDataPlane;
  /** The "VPC" namespace holding the other end of every ENI link (the data plane's). */
  vpcNetns: Netns;
  mountNs: NodeMountNs;
  pki: Pki;
  /** The admin kubeconfig (system:masters), server https://127.0.0.1:`apiPort`. */
  kubeconfig: string;
  apiPort: number;
  /** kubectl (and helm) with the admin kubeconfig. */
  kubectl: Kubectl;
  control: ControlPlane;
  nodeProcs: NodeProcesses;
  /** The test-side path of node path `p` on the first node. @throws Error when no bind covers it. */
  host(p: string): string;
  /** Env that points ipamd's EC2 and IMDS at the simulated cloud (same URLs inside every node). */
  cloudEnv: Record<string, string>;
  /**
   * Imports an OCI archive into every node's containerd, and into every node that joins later
   * (as a node image or a registry would have it). @throws Error with ctr's stderr.
   */
  importImage(archive: string): Promise<void>;
  /**
   * Launches one more instance (`instanceType`, default the cluster's) in the cluster's subnet
   * and joins it as a node, registered but NotReady until a CNI writes its conflist.
   * @throws Error when no node identity is left or the node does not start.
   */
  addNode(o?: { instanceType?: string }): Promise<ClusterNode>;
  /** Removes everything. Idempotent. @throws Error listing what could not be removed. */
  close(): Promise<void>;
}

/**
 * Starts the cluster and waits until every node is registered (NotReady until a CNI writes
 * its conflist).
 * @throws Error naming the part that failed (with the tail of its log), after removing
 *   everything already started; Error naming `nodes` or `maxPods` when it is not a whole
 *   number of at least 1 (before anything starts).
 */
export async function startCluster(o: ClusterOptions = {}): Promise<TestCluster> {
  const count = o.nodes ?? 1;
  if (!Number.isInteger(count) || count < 1) throw new Error(`nodes: ${count} is not a whole number of at least 1`);
  if (o.maxPods !== undefined && (!Number.isInteger(o.maxPods) || o.maxPods < 1))
    throw new Error(`maxPods: ${o.maxPods} is not a whole number of at least 1`);
  const bins = await clusterBinaries();
  const base = o.nodeName ?? 'eni-ipam-node';
  const nameOf = (i: number): string => (i === 0 ? base : `${base}-${i + 1}`);
  const typeOf = (i: number): string => o.instanceTypes?.[i] ?? o.instanceType ?? 'm5.xlarge';
  const ipFamily = o.ipFamily ?? 'ipv4';
  const node = await buildNode({
    instanceType: typeOf(0),
    dirPrefix: 'eni-ipam-cluster-',
    netns: 'eni-k8s',
    ...(o.subnetCidr ? { subnetCidr: o.subnetCidr } : {}),
    ...(o.keepDir ? { keepDir: true } : {}),
    ...(ipFamily !== 'ipv4' ? { ipv6: true } : {}),
  });
  const { cleanups, sim, dir } = node;
  try {
    const family = familyPlan(ipFamily, node.nodeIp, node.nodeIpv6);
    const dataPlane = await startVpcDataPlane({ sim, name: `eni-k8sv-${process.pid}` });
    cleanups.push(() => dataPlane.stop());
    const names = Array.from({ length: count + SPARE_NODES }, (_, i) => nameOf(i));
    const pki = await makePki({
      dir,
      nodeNames: names,
      server: `https://${node.nodeIp}:${API_PORT}`,
      servers: { admin: 'https://127.0.0.1:0' },
      sanIps: [node.nodeIp, ...family.nodeIps, ...family.serviceIps],
      serviceIp: family.serviceIps[0]!,
    });
    const ctx: ClusterContext = {
      bins,
      sim,
      dataPlane,
      pki,
      kubectl: undefined as unknown as Kubectl,
      family: ipFamily,
      dir,
      ...(o.maxPods !== undefined ? { maxPods: o.maxPods } : {}),
    };
    const { first, control, apiPort } = await startFirstNode(ctx, node, names[0]!, family);
    cleanups.push(() => first.close());
    const nodes: ClusterNode[] = [first];
    const images = new Set<string>();
    const join = async (index: number, instanceType: string): Promise<ClusterNode> => {
      if (index >= names.length)
        throw new Error(`no node identity left: the cluster was made for ${names.length} nodes`);
      const inst = sim.launchInstance({ instanceType, subnetId: node.subnetId });
      const n = await startClusterNode(ctx, {
        index,
        name: names[index]!,
        instanceId: inst.instanceId,
        images: [...images],
      });
      cleanups.push(() => n.close());
      nodes.push(n);
      return n;
    };
    // The other nodes start side by side: each waits on its own containerd and kubelet.
    await Promise.all(Array.from({ length: count - 1 }, (_, k) => join(k + 1, typeOf(k + 1))));
    nodes.sort((a, b) => a.index - b.index);
    await writeFile(path.join(dir, 'admin.kubeconfig.path'), pki.kubeconfigs['admin']!);
    return {
      bins,
      node,
      sim,
      nodes,
      nodeName: first.name,
      nodeIp: first.ip,
      ...(first.ipv6 ? { nodeIpv6: first.ipv6 } : {}),
      family: first.family,
      dir,
      nodeNetns: first.netns,
      dataPlane,
      vpcNetns: dataPlane.netns,
      mountNs: first.mountNs,
      pki,
      kubeconfig: pki.kubeconfigs['admin']!,
      apiPort,
      kubectl: ctx.kubectl,
      control,
      nodeProcs: first.procs,
      host: first.host,
      cloudEnv: { AWS_EC2_ENDPOINT: sim.ec2Endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint },
      addNode: (x = {}) => join(nodes.length, x.instanceType ?? typeOf(nodes.length)),
      async importImage(archive) {
        images.add(archive);
        await Promise.all(nodes.map((n) => n.procs.importImage(archive)));
      },
      close: node.close,
    };
  } catch (e) {
    await node.close().catch(() => undefined);
    throw e;
  }
}

/**
 * Starts the first node with the control plane on it: the apiserver's port is bridged out,
 * the admin kubeconfig pointed at it and `ctx.kubectl` set before the kubelet starts.
 */
async function startFirstNode(
  ctx: ClusterContext,
  node: KitNode,
  name: string,
  family: FamilyPlan,
): Promise<{ first: ClusterNode; control: ControlPlane; apiPort: number }> {
  const { bins, pki, dir } = ctx;
  let control: ControlPlane | undefined;
  let apiPort = 0;
  const first = await startClusterNode(ctx, {
    index: 0,
    name,
    instanceId: node.instanceId,
    netns: node.nodeNetns!,
    outward: [API_PORT],
    beforeProcesses: async (n) => {
      apiPort = n.outward.get(API_PORT)!;
      // The admin kubeconfig reaches the apiserver through the bridge on this port.
      await rewriteServer(pki.kubeconfigs['admin']!, `https://127.0.0.1:${apiPort}`);
      ctx.kubectl = kubectlRunner(bins, pki.kubeconfigs['admin']!);
      control = await startControlPlane({ bins, dir, netns: n.netns.path, pki, family, kubectl: ctx.kubectl });
      node.cleanups.push(() => control!.stop());
    },
  });
  return { first, control: control!, apiPort };
}

/** Points kubeconfig `file` at `server` (the bridge's port is known only once the node's namespace is up). */
async function rewriteServer(file: string, server: string): Promise<void> {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(file, 'utf8');
  await writeFile(file, text.replace(/server: "[^"]*"/, `server: ${JSON.stringify(server)}`), { mode: 0o600 });
}
