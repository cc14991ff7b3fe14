/**
 * A node where ipamd itself installs the CNI plugin (docs/design.md#11-the-cni-plugin-complete-and-fast, "ADD/DEL through real
 * containerd using the plugin as configured by the conflist ipamd installed"):
 *
 * - a "node" network namespace created here, holding a private containerd 1.6 (CRI)
 *   whose CNI conf dir and bin dir are temp dirs; the bin dir starts with only
 *   Debian's `loopback`, the conf dir empty;
 * - the real ipamd binary inside that namespace with `ENI_IPAM_INSTALL_CNI=true` and
 *   its conf/bin dirs pointed at containerd's, so whatever `installCni` writes is what
 *   containerd runs; `CRI_RUNTIME_ENDPOINT` is this containerd;
 * - the simulated cloud in the test process, reachable inside the namespace at the same
 *   URLs, and ipamd's introspection reachable here, through netns-bridge.ts.
 *
 * - with `hostNetwork` (the default), ipamd's host networking on too, in the node
 *   namespace: eni-link-plug.ts gives every ENI the simulated EC2 attaches a link with
 *   its MAC (`eth<device index>`, a veth into a "vpc" namespace), so ipamd sets up the
 *   per-ENI route tables, rules and SNAT there. Without those links ipamd refuses to
 *   start ("no interface has the primary ENI's MAC").
 *
 * Needs root, containerd, runc, gcc + libc6-dev, iptables, and a built tree.
 */
import { randomUUID } from 'node:crypto';
import { copyFile, chmod, mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { startIpamd, type IpamdProcess } from '../../kit/ipamd-process.js';
import { createNamedNetns, run, type Netns } from '../../kit/netns.js';
import type { SimCloud } from '../../sim/index.js';
import { buildNode, withContainerd, type KitNode } from '../../kit/node.js';
import type { Containerd } from '../../kit/containerd.js';
import type { IpamdAllocation, IpamdStatus } from '../../kit/containerd-node.js';
import type { CriTestClient } from '../../kit/cri-client.js';
import { plugEniLinks, type EniLinkPlug } from '../../kit/eni-link-plug.js';
import { bridgeNetns, type NetnsBridge } from '../../kit/netns-bridge.js';
import { waitFor } from '../../kit/wait.js';

/** ipamd's introspection port inside the node namespace (a fresh namespace: nothing else binds it). */
const INTROSPECTION_PORT = 61679;

/** The node; see the module docstring. */
export interface InstalledCniNode {
  sim: SimCloud;
  instanceId: string;
  dir: string;
  /** containerd's CNI conf dir = ipamd's ENI_IPAM_CNI_CONF_DIR. */
  confDir: string;
  /** containerd's CNI bin dir = ipamd's ENI_IPAM_CNI_BIN_DIR. */
  binDir: string;
  /** ipamd's gRPC socket and checkpoint. */
  socket: string;
  checkpoint: string;
  ipamdLog: string;
  nodeNetns: Netns;
  /** The ENI links, when `hostNetwork` is on. */
  eniLinks?: EniLinkPlug;
  containerd: Containerd;
  cri: CriTestClient;
  ipamd?: IpamdProcess;
  /**
   * Starts ipamd in the node namespace; resolves once it serves and, on a first install,
   * containerd has loaded the conflist ipamd wrote (containerd reloads its conf dir
   * asynchronously after the rename; a sandbox run before that fails).
   */
  startIpamd(): Promise<IpamdProcess>;
  /** `GET /v1/status` of ipamd. */
  status(): Promise<IpamdStatus>;
  /** `GET /v1/allocations` of ipamd. */
  allocations(): Promise<IpamdAllocation[]>;
  /** Removes everything (ipamd, sandboxes, containerd, bridge, netns, sim, temp dir); idempotent. */
  close(): Promise<void>;
}

let seq = 0;

/** What the chart's init container sets in the node's namespace (ipamd/network/sysctl.ts): ip_forward=1, rp_filter=2 on all. */
async function setNodeSysctlsIn(netnsPath: string): Promise<void> {
  await run('nsenter', [
    `--net=${netnsPath}`,
    'sysctl',
    '-qw',
    'net.ipv4.ip_forward=1',
    'net.ipv4.conf.all.rp_filter=2',
  ]);
}

/**
 * Runs a sandbox that must fail (no network config yet) and returns the id of the
 * NOTREADY record containerd keeps of it.
 * @throws Error when it does not fail or leaves no record.
 */
async function failedProbeSandbox(cri: CriTestClient): Promise<string> {
  const name = `cni-probe-${randomUUID().slice(0, 8)}`;
  const ran = await cri.runPodSandbox({ name, namespace: 'kube-system', uid: randomUUID() }).then(
    () => true,
    () => false,
  );
  const rec = (await cri.listPodSandbox()).find((s) => s.metadata?.name === name);
  if (ran || !rec) throw new Error(`probe sandbox ${name} ${ran ? 'ran without a network config' : 'left no record'}`);
  return rec.id;
}

/**
 * Builds the node without starting ipamd (the test watches the install happen).
 * @param o.instanceType EC2 instance type (default m5.xlarge: 4 ENIs × 14 pod IPs).
 * @param o.ipamdEnv added to ipamd's environment.
 * @param o.hostNetwork ipamd's host networking with plugged ENI links (default true).
 * @param o.ipamdPrefix command words put before ipamd's `nsenter --net=<node>` (e.g. an `unshare -m` wrapper).
 * @param o.nodeSysctls set ip_forward=1 and rp_filter=2 (all) in the node namespace, as the chart's
 *        privileged init container does (default true; ipamd only checks them).
 * @throws Error (after removing what was created) when a part does not start.
 */
export async function createInstalledCniNode(
  o: {
    instanceType?: string;
    ipamdEnv?: NodeJS.ProcessEnv;
    hostNetwork?: boolean;
    ipamdPrefix?: string[];
    nodeSysctls?: boolean;
  } = {},
): Promise<InstalledCniNode> {
  let kit: KitNode | undefined;
  const close = async (): Promise<void> => {
    await kit?.close();
  };
  try {
    const k = (kit = await buildNode({
      instanceType: o.instanceType ?? 'm5.xlarge',
      dirPrefix: 'eni-ipam-ctd-',
      netns: 'eni-ctd',
    }));
    const { dir, sim, cleanups } = k;
    const nodeNetns = k.nodeNetns!;
    const inst = { instanceId: k.instanceId };

    const confDir = path.join(dir, 'cni', 'net.d');
    const binDir = path.join(dir, 'cni', 'bin');
    await mkdir(confDir, { recursive: true });
    await mkdir(binDir, { recursive: true });
    await copyFile('/usr/lib/cni/loopback', path.join(binDir, 'loopback'));
    await chmod(path.join(binDir, 'loopback'), 0o755);

    if (o.nodeSysctls ?? true) await setNodeSysctlsIn(nodeNetns.path);
    const hostNetwork = o.hostNetwork ?? true;
    let eniLinks: EniLinkPlug | undefined;
    if (hostNetwork) {
      const vpc = await createNamedNetns(`eni-vpc-${process.pid}-${seq++}`);
      cleanups.push(() => vpc.remove());
      eniLinks = await plugEniLinks({ sim, instanceId: inst.instanceId, node: nodeNetns, vpc });
      cleanups.push(() => eniLinks!.stop());
    }
    const port = (url: string): number => Number(new URL(url).port);
    const bridge: NetnsBridge = await bridgeNetns({
      netnsPath: nodeNetns.path,
      dir,
      inward: [port(sim.ec2Endpoint), port(sim.imdsEndpoint)],
      outward: [INTROSPECTION_PORT],
    });
    cleanups.push(() => bridge.close());
    // ipamd stops after containerd removed the sandboxes (their DELs reach it) and before the bridge closes.
    const built: { node?: InstalledCniNode } = {};
    cleanups.push(async () => {
      await built.node?.ipamd?.stop(10_000);
    });
    const { containerd, cri } = await withContainerd(k, {
      baseDir: path.join(dir, 'containerd'),
      nodeNetnsPath: nodeNetns.path,
      cniBinDir: binDir,
      cniConfDir: confDir,
    });

    const introspection = `http://127.0.0.1:${bridge.outward.get(INTROSPECTION_PORT)}`;
    const getJson = async <T>(p: string): Promise<T> => {
      const r = await fetch(`${introspection}${p}`);
      if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status}`);
      return (await r.json()) as T;
    };
    const node: InstalledCniNode = {
      sim,
      instanceId: inst.instanceId,
      dir,
      confDir,
      binDir,
      nodeNetns,
      containerd,
      cri,
      ...(eniLinks ? { eniLinks } : {}),
      socket: path.join(dir, 'ipamd.sock'),
      checkpoint: path.join(dir, 'ipam.json'),
      ipamdLog: path.join(dir, 'ipamd.log'),
      async startIpamd() {
        if (node.ipamd) throw new Error('ipamd already runs');
        // A sandbox that failed for want of a network can be stopped only once containerd
        // has a network config: that tells when the install has been loaded.
        const firstInstall = (await readdir(confDir)).every((f) => f.startsWith('.'));
        const probe = firstInstall ? await failedProbeSandbox(cri) : undefined;
        node.ipamd = await startIpamd({
          logFile: node.ipamdLog,
          prefix: [...(o.ipamdPrefix ?? []), 'nsenter', `--net=${nodeNetns.path}`],
          env: {
            AWS_EC2_ENDPOINT: sim.ec2Endpoint,
            AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
            ENI_IPAM_SOCKET: node.socket,
            ENI_IPAM_CHECKPOINT_PATH: node.checkpoint,
            CRI_RUNTIME_ENDPOINT: `unix://${containerd.socket}`,
            INTROSPECTION_BIND_ADDRESS: `127.0.0.1:${INTROSPECTION_PORT}`,
            ENI_IPAM_POOL_INTERVAL: '200ms',
            ENI_IPAM_INSTALL_CNI: 'true',
            ENI_IPAM_CNI_CONF_DIR: confDir,
            ENI_IPAM_CNI_BIN_DIR: binDir,
            ENI_IPAM_HOST_NETWORK: String(hostNetwork),
            AWS_VPC_K8S_PLUGIN_LOG_FILE: path.join(dir, 'plugin.log'),
            ...o.ipamdEnv,
          },
        });
        if (probe) {
          await waitFor(
            'containerd to load the installed conflist',
            () =>
              cri.stopPodSandbox(probe).then(
                () => true,
                () => false,
              ),
            10_000,
            100,
          );
          await cri.removePodSandbox(probe);
        }
        return node.ipamd;
      },
      status: () => getJson<IpamdStatus>('/v1/status'),
      allocations: () => getJson<IpamdAllocation[]>('/v1/allocations'),
      close,
    };
    built.node = node;
    return node;
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
}
