/**
 * A real single-node Kubernetes cluster on this machine, for the end-to-end tests and
 * `npm run cluster`: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
 * (the control plane, as on a kind control-plane node) plus containerd 2.x, kubelet and
 * kube-proxy, all built from their Go modules (cluster/build.sh), all inside one "node"
 * network namespace whose EC2 and IMDS are the simulated cloud:
 *
 * - the node namespace has `eth0` with the instance's primary private IP and the ENI links
 *   the simulated EC2 attaches (eni-link-plug.ts); the apiserver advertises that IP, so the
 *   `kubernetes` Service (10.96.0.1) works through the real kube-proxy;
 * - the simulated EC2 and IMDS (in this process) answer inside it on their loopback URLs,
 *   and the apiserver answers here on 127.0.0.1:`apiPort` (netns-bridge.ts);
 * - containerd, kubelet and kube-proxy run in a node mount namespace (node-mountns.ts) where
 *   `/etc/cni/net.d`, `/opt/cni/bin`, `/run/containerd`, `/var/lib/kubelet`, … are the
 *   cluster's own dirs and Node.js is absent, so the chart's hostPaths are used verbatim.
 *
 * Everything is on one cleanup stack: `close()` removes it all, also after a failed start.
 */
import { copyFile, chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildNode, type KitNode } from '../node.js';
import { createNamedNetns, run, type Netns } from '../netns.js';
import { bridgeNetns } from '../netns-bridge.js';
import { plugEniLinks } from '../eni-link-plug.js';
import { createNodeMountNs, type NodeMountNs } from '../node-mountns.js';
import type { SimCloud } from '../../sim/index.js';
import { clusterBinaries, type ClusterBinaries } from './binaries.js';
import { makePki, type Pki } from './pki.js';
import { removeCgroupRoot, startNodeProcesses, type NodeProcesses } from './node-processes.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { kubectlRunner, type Kubectl } from './kubectl.js';
import { killMountNsProcesses } from './teardown.js';

/** The apiserver's port inside the node namespace. */
export const API_PORT = 6443;
/** The Service CIDR; its first address is the `kubernetes` Service. */
export const SERVICE_CIDR = '10.96.0.0/16';

/** The node paths backed by the cluster's own dirs. */
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

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  /** EC2 instance type of the node (default m5.xlarge: 4 ENIs × 14 pod IPs). */
  instanceType?: string;
  /** Kubernetes node name (default `eni-ipam-node`). */
  nodeName?: string;
  /** Keep the cluster's dir on close (a post-mortem). */
  keepDir?: boolean;
}

/** A running cluster. */
export interface TestCluster {
  bins: ClusterBinaries;
  node: KitNode;
  sim: SimCloud;
  nodeName: string;
  nodeIp: string;
  dir: string;
  nodeNetns: Netns;
  /** The "VPC" namespace holding the other end (`vpc<device>`) of every ENI link. */
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
  /** The test-side path of node path `p`. @throws Error when no bind covers it. */
  host(p: string): string;
  /** Env that points ipamd's EC2 and IMDS at the simulated cloud (same URLs inside the node). */
  cloudEnv: Record<string, string>;
  /** Removes everything. Idempotent. @throws Error listing what could not be removed. */
  close(): Promise<void>;
}

/**
 * Starts the cluster and waits until the node is registered (NotReady until a CNI writes
 * its conflist).
 * @throws Error naming the part that failed (with the tail of its log), after removing
 *   everything already started.
 */
export async function startCluster(o: ClusterOptions = {}): Promise<TestCluster> {
  const bins = await clusterBinaries();
  const nodeName = o.nodeName ?? 'eni-ipam-node';
  const node = await buildNode({
    instanceType: o.instanceType ?? 'm5.xlarge',
    dirPrefix: 'eni-ipam-cluster-',
    netns: 'eni-k8s',
    ...(o.keepDir ? { keepDir: true } : {}),
  });
  const { cleanups, sim, dir } = node;
  try {
    const nodeNetns = node.nodeNetns!;
    const nodeIp = node.nodeIp;
    const vpc = await createNamedNetns(`eni-k8sv-${process.pid}`);
    cleanups.push(() => vpc.remove());
    const links = await plugEniLinks({ sim, instanceId: node.instanceId, node: nodeNetns, vpc });
    cleanups.push(() => links.stop());
    const ip = (...a: string[]): Promise<string> => run('ip', ['-n', nodeNetns.name, ...a]);
    await ip('addr', 'add', `${nodeIp}/32`, 'dev', 'eth0');
    await ip('link', 'set', 'eth0', 'up');
    await ip('route', 'add', 'default', 'dev', 'eth0');
    const port = (url: string): number => Number(new URL(url).port);
    const bridge = await bridgeNetns({
      netnsPath: nodeNetns.path,
      dir,
      inward: [port(sim.ec2Endpoint), port(sim.imdsEndpoint)],
      outward: [API_PORT],
    });
    cleanups.push(() => bridge.close());
    const apiPort = bridge.outward.get(API_PORT)!;

    const mountNs = await createNodeMountNs({ root: dir, binds: CLUSTER_NODE_BINDS });
    cleanups.push(async () => {
      await killMountNsProcesses(mountNs);
      await mountNs.close();
      await removeCgroupRoot(); // the containers' cgroups empty only once their processes are gone
    });
    const host = (p: string): string => {
      const h = mountNs.hostPathOf(p);
      if (!h) throw new Error(`node path ${p} is not backed by the cluster`);
      return h;
    };
    await copyFile('/usr/lib/cni/loopback', host('/opt/cni/bin/loopback'));
    await chmod(host('/opt/cni/bin/loopback'), 0o755);

    const pki = await makePki({
      dir,
      nodeName,
      server: `https://${nodeIp}:${API_PORT}`,
      servers: { admin: `https://127.0.0.1:${apiPort}` },
      sanIps: [nodeIp],
      serviceIp: '10.96.0.1',
    });
    const kubectl = kubectlRunner(bins, pki.kubeconfigs['admin']!);
    const control = await startControlPlane({ bins, dir, netns: nodeNetns.path, pki, nodeIp, kubectl });
    cleanups.push(() => control.stop());
    await mkdir(path.join(dir, 'node'), { recursive: true });
    const nodeProcs = await startNodeProcesses({
      bins,
      dir,
      netns: nodeNetns.path,
      mountNs,
      pki,
      nodeIp,
      nodeName,
      kubectl,
      host,
    });
    cleanups.push(() => nodeProcs.stop());
    await writeFile(path.join(dir, 'admin.kubeconfig.path'), pki.kubeconfigs['admin']!);
    return {
      bins,
      node,
      sim,
      nodeName,
      nodeIp,
      dir,
      nodeNetns,
      vpcNetns: vpc,
      mountNs,
      pki,
      kubeconfig: pki.kubeconfigs['admin']!,
      apiPort,
      kubectl,
      control,
      nodeProcs,
      host,
      cloudEnv: { AWS_EC2_ENDPOINT: sim.ec2Endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint },
      close: node.close,
    };
  } catch (e) {
    await node.close().catch(() => undefined);
    throw e;
  }
}
