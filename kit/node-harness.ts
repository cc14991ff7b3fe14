/**
 * A simulated node for integration tests: the kit's node (kit/node.ts: the simulated
 * cloud in-process on loopback, one subnet, one instance, a temp dir for ipamd's socket
 * and checkpoint, optionally the CRI stand-in) and the real ipamd binary as a child
 * process pointed at it. `close()` removes everything.
 */
import path from 'node:path';
import type { SimCloud } from '../sim/index.js';
import type { CriStandIn, CriStandInOptions } from '../sim/cri/index.js';
import { buildNode } from './node.js';
import { startIpamd, type IpamdProcess } from './ipamd-process.js';

/** A running simulated node. */
export interface NodeHarness {
  sim: SimCloud;
  instanceId: string;
  nodeIp: string;
  subnetId: string;
  dir: string;
  /** The CRI stand-in, when created with `cri`. */
  cri?: CriStandIn;
  socket: string;
  checkpoint: string;
  ipamd?: IpamdProcess;
  /** Environment ipamd was (or will be) started with. */
  env: NodeJS.ProcessEnv;
  /** (Re)starts ipamd with the harness env plus `extra`. */
  startIpamd(extra?: NodeJS.ProcessEnv): Promise<IpamdProcess>;
  close(): Promise<void>;
}

/**
 * Creates the node: {@link buildNode} (simulated cloud, instance, temp dir; `cri` adds the
 * CRI stand-in, closed by `close()`) plus ipamd's environment. `ipamdEnv` is added to the
 * defaults (fast pool interval, short waits).
 */
export async function createNode(
  p: {
    instanceType?: string;
    subnetCidr?: string;
    ipamdEnv?: NodeJS.ProcessEnv;
    cri?: CriStandInOptions;
    /** A simulated cloud to share (e.g. one with IPv6 blocks) and the subnet to launch in; the caller stops it. */
    sim?: SimCloud;
    subnetId?: string;
  } = {},
): Promise<NodeHarness> {
  const k = await buildNode({
    ...(p.sim ? { sim: p.sim } : {}),
    ...(p.subnetId ? { subnetId: p.subnetId } : {}),
    ...(p.instanceType ? { instanceType: p.instanceType } : {}),
    ...(p.subnetCidr ? { subnetCidr: p.subnetCidr } : {}),
    ...(p.cri ? { cri: p.cri } : {}),
    dirPrefix: 'eni-ipam-test-',
  });
  const dir = k.dir;
  const h: NodeHarness = {
    sim: k.sim,
    instanceId: k.instanceId,
    nodeIp: k.nodeIp,
    subnetId: k.subnetId,
    dir,
    ...(k.cri ? { cri: k.cri } : {}),
    socket: path.join(dir, 'ipamd.sock'),
    checkpoint: path.join(dir, 'ipam.json'),
    env: {},
    async startIpamd(extra = {}) {
      h.ipamd = await startIpamd({ env: { ...h.env, ...extra }, logFile: path.join(dir, 'ipamd.log') });
      return h.ipamd;
    },
    async close() {
      if (h.ipamd) await h.ipamd.stop(5000).catch(() => undefined);
      await k.close().catch(() => undefined);
    },
  };
  h.env = {
    AWS_EC2_ENDPOINT: k.sim.ec2Endpoint,
    AWS_EC2_METADATA_SERVICE_ENDPOINT: k.sim.imdsEndpoint,
    ENI_IPAM_SOCKET: h.socket,
    ENI_IPAM_CHECKPOINT_PATH: h.checkpoint,
    ENI_IPAM_POOL_INTERVAL: '200ms',
    AWS_VPC_K8S_CNI_LOGLEVEL: 'debug',
    ENI_IPAM_INSTALL_CNI: 'true',
    ENI_IPAM_CNI_CONF_DIR: path.join(dir, 'cni', 'net.d'),
    ENI_IPAM_CNI_BIN_DIR: path.join(dir, 'cni', 'bin'),
    ...(k.cri ? { CRI_RUNTIME_ENDPOINT: k.cri.endpoint } : {}),
    ...p.ipamdEnv,
  };
  return h;
}
