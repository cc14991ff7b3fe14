/**
 * A node for the DaemonSet end-to-end test (docs/design.md#12-running-on-a-cluster item 5), where ipamd runs as the
 * pod `helm template` renders, in a container of the node's containerd:
 *
 * - a "node" network namespace with the ENI links the simulated EC2 attaches
 *   (eni-link-plug.ts), the instance's primary private IP on `eth0` and the default
 *   route through it; the simulated
 *   cloud (EC2 + IMDS, in the test process) answers inside it at the same loopback URLs,
 *   and ipamd's introspection (127.0.0.1:61679 inside) is bridged out (netns-bridge.ts);
 * - a node mount namespace (node-mountns.ts) without Node.js, where per-test dirs stand
 *   for `/etc/cni/net.d`, `/opt/cni/bin`, `/run/eni-ipam`, `/run/xtables.lock`,
 *   `/var/log/aws-routed-eni`, `/run/aws-node` and `/run/containerd` (containerd's own dir, so its socket
 *   is `/run/containerd/containerd.sock` on the node); `/run/netns` is the host's;
 * - containerd 1.6 running in both namespaces, CNI dirs `/etc/cni/net.d` + `/opt/cni/bin`
 *   (`loopback` copied in), with the image archive under test imported.
 *
 * Needs root, containerd, runc, iproute2, util-linux, overlayfs, gcc (pause image).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmod, copyFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { createNamedNetns, type Netns } from '../../kit/netns.js';
import type { SimCloud } from '../../sim/index.js';
import type { KubeApiStandIn } from '../../sim/kube/index.js';
import { buildNode, withContainerd, type KitNode } from '../../kit/node.js';
import type { Containerd } from '../../kit/containerd.js';
import type { IpamdAllocation, IpamdStatus } from '../../kit/containerd-node.js';
import type { CriTestClient } from '../../kit/cri-client.js';
import { plugEniLinks } from '../../kit/eni-link-plug.js';
import { bridgeNetns } from '../../kit/netns-bridge.js';
import { imageRefOf } from '../../kit/image-archive.js';
import { createNodeMountNs, type NodeMountNs } from '../../kit/node-mountns.js';

const run = promisify(execFile);

/** ipamd's default introspection port (INTROSPECTION_BIND_ADDRESS 127.0.0.1:61679). */
export const INTROSPECTION_PORT = 61679;

/** The node paths backed by per-test files (the DaemonSet's hostPaths must fall under these, or /run/netns). */
export const NODE_BINDS = [
  { nodePath: '/etc/cni/net.d' },
  { nodePath: '/opt/cni/bin' },
  { nodePath: '/run/eni-ipam' },
  { nodePath: '/run/xtables.lock', kind: 'file' as const },
  { nodePath: '/var/log/aws-routed-eni' },
  { nodePath: '/run/containerd' },
  { nodePath: '/run/aws-node' },
];

/** The node; see the module docstring. */
export interface DsNode {
  sim: SimCloud;
  /** Kubernetes API stand-in; the node `nodeName` is registered. */
  kube: KubeApiStandIn;
  nodeName: string;
  instanceId: string;
  /** The instance's primary private IPv4, on the node's eth0. */
  nodeIp: string;
  dir: string;
  nodeNetns: Netns;
  mountNs: NodeMountNs;
  containerd: Containerd;
  cri: CriTestClient;
  /** Image reference of the imported archive (from its index.json). */
  imageRef: string;
  /** Test-side path of node path `p` (a per-test file). @throws Error if no bind covers it. */
  host(p: string): string;
  /**
   * Environment ipamd needs to reach the simulated cloud from the node namespace: EC2,
   * IMDS, and KUBECONFIG naming a kubeconfig for the stand-in written into the node's
   * `/run/eni-ipam` (the stand-in is plain HTTP, so in-cluster config cannot be used).
   */
  cloudEnv: Record<string, string>;
  /** `GET /v1/status` / `/v1/allocations` of ipamd through the bridge. */
  status(): Promise<IpamdStatus>;
  allocations(): Promise<IpamdAllocation[]>;
  /** `GET /v1/stage-trace` of ipamd: per stage (e.g. `cni.add.veth-up`), count and ms quantiles. */
  stageTrace(): Promise<Record<string, { count: number; p50: number }>>;
  /** Metrics text of ipamd (METRICS_BIND_ADDRESS :61678, bridged). */
  metrics(): Promise<string>;
  /** An echo server on 0.0.0.0:`port` in the node netns (what pods reach over TCP). */
  startEchoServer(port: number): Promise<void>;
  /** Removes everything (sandboxes, containerd, mounts, bridge, netns, sim, temp dir). Idempotent. */
  close(): Promise<void>;
}

let seq = 0;

/**
 * Builds the node and imports `imageArchive`.
 * @param o.instanceType default m5.xlarge (4 ENIs × 14 pod IPs).
 * @throws Error (after removing what was created) when a part does not start.
 */
export async function createDsNode(o: {
  imageArchive: string;
  instanceType?: string;
  nodeName?: string;
}): Promise<DsNode> {
  let kit: KitNode | undefined;
  const close = async (): Promise<void> => {
    await kit?.close();
  };
  try {
    const imageRef = await imageRefOf(o.imageArchive);
    const nodeName = o.nodeName ?? 'node-1';
    const k = (kit = await buildNode({
      instanceType: o.instanceType ?? 'm5.xlarge',
      dirPrefix: 'eni-ipam-ds-',
      kube: { nodeName },
      netns: 'eni-ds',
    }));
    const { dir, sim, cleanups } = k;
    const kube = k.kube!,
      nodeNetns = k.nodeNetns!;
    const inst = { instanceId: k.instanceId };
    const nodeIp = [...sim.state.enis.values()].find(
      (e) => e.attachment?.instanceId === inst.instanceId && e.attachment.deviceIndex === 0,
    )?.primaryIp;
    if (!nodeIp) throw new Error('the simulated instance has no primary ENI');

    const vpc = await createNamedNetns(`eni-dsv-${process.pid}-${seq++}`);
    cleanups.push(() => vpc.remove());
    const links = await plugEniLinks({ sim, instanceId: inst.instanceId, node: nodeNetns, vpc });
    cleanups.push(() => links.stop());
    await run('ip', ['-n', nodeNetns.name, 'addr', 'add', `${nodeIp}/32`, 'dev', 'eth0']);
    await run('ip', ['-n', nodeNetns.name, 'link', 'set', 'eth0', 'up']);
    // A node's default route leaves through its primary ENI (node-init reads the primary
    // interface from it); here it leads into the test's "vpc" namespace and no further.
    await run('ip', ['-n', nodeNetns.name, 'route', 'add', 'default', 'dev', 'eth0']);
    const port = (url: string): number => Number(new URL(url).port);
    const bridge = await bridgeNetns({
      netnsPath: nodeNetns.path,
      dir,
      inward: [port(sim.ec2Endpoint), port(sim.imdsEndpoint), port(kube.url)],
      outward: [INTROSPECTION_PORT, 61678],
    });
    cleanups.push(() => bridge.close());

    const mountNs = await createNodeMountNs({ root: dir, binds: NODE_BINDS });
    cleanups.push(() => mountNs.close());
    const host = (p: string): string => {
      const h = mountNs.hostPathOf(p);
      if (!h) throw new Error(`node path ${p} is not backed by the test node`);
      return h;
    };
    await kube.writeKubeconfig(host('/run/eni-ipam/kubeconfig'));
    await copyFile('/usr/lib/cni/loopback', host('/opt/cni/bin/loopback'));
    await chmod(host('/opt/cni/bin/loopback'), 0o755);
    // withContainerd also reports containerd's CRI identity on the node, as kubelet does.
    const { containerd, cri } = await withContainerd(k, {
      baseDir: host('/run/containerd'),
      nodeNetnsPath: nodeNetns.path,
      mountNs,
      cniBinDir: '/opt/cni/bin',
      cniConfDir: '/etc/cni/net.d',
    });
    await run('ctr', ['--address', containerd.socket, '-n', 'k8s.io', 'images', 'import', o.imageArchive], {
      maxBuffer: 1 << 24,
    }).catch((e: { stderr?: string; message: string }) => {
      throw new Error(`ctr images import ${o.imageArchive}: ${e.stderr ?? e.message}`);
    });

    const echo: ChildProcess[] = [];
    cleanups.push(async () => {
      for (const p of echo) p.kill('SIGKILL');
    });
    const introspection = `http://127.0.0.1:${bridge.outward.get(INTROSPECTION_PORT)}`;
    const getJson = async <T>(p: string): Promise<T> => {
      const r = await fetch(`${introspection}${p}`);
      if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status}`);
      return (await r.json()) as T;
    };
    return {
      sim,
      kube,
      nodeName,
      instanceId: inst.instanceId,
      nodeIp,
      dir,
      nodeNetns,
      mountNs,
      containerd,
      cri,
      imageRef,
      host,
      cloudEnv: {
        AWS_EC2_ENDPOINT: sim.ec2Endpoint,
        AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
        KUBECONFIG: '/var/run/eni-ipam/kubeconfig',
      },
      status: () => getJson<IpamdStatus>('/v1/status'),
      allocations: () => getJson<IpamdAllocation[]>('/v1/allocations'),
      stageTrace: () => getJson<Record<string, { count: number; p50: number }>>('/v1/stage-trace'),
      metrics: async () => (await fetch(`http://127.0.0.1:${bridge.outward.get(61678)}/metrics`)).text(),
      async startEchoServer(p) {
        const script = `require('net').createServer((s) => s.on('data', (d) => s.write(d))).listen(${p}, '0.0.0.0', () => console.log('listening'))`;
        const child = spawn('nsenter', [`--net=${nodeNetns.path}`, process.execPath, '-e', script], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        echo.push(child);
        await new Promise<void>((resolve, reject) => {
          child.stdout!.once('data', () => resolve());
          child.once('exit', (c) => reject(new Error(`echo server exited ${c}`)));
        });
      },
      close,
    };
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
}
