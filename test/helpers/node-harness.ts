/**
 * A simulated node for integration tests: the simulated cloud in-process on loopback
 * (one subnet, one instance), a temp dir for ipamd's socket and checkpoint, and the
 * real ipamd binary as a child process pointed at it. `close()` removes everything.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SimCloud } from '../../sim/index.js';
import { startIpamd, type IpamdProcess } from '../kit/ipamd-process.js';

/** A running simulated node. */
export interface NodeHarness {
  sim: SimCloud;
  instanceId: string;
  nodeIp: string;
  subnetId: string;
  dir: string;
  socket: string;
  checkpoint: string;
  ipamd?: IpamdProcess;
  /** Environment ipamd was (or will be) started with. */
  env: NodeJS.ProcessEnv;
  /** (Re)starts ipamd with the harness env plus `extra`. */
  startIpamd(extra?: NodeJS.ProcessEnv): Promise<IpamdProcess>;
  close(): Promise<void>;
}

/** Creates the node. `ipamdEnv` is added to the defaults (fast pool interval, short waits). */
export async function createNode(p: { instanceType?: string; subnetCidr?: string; ipamdEnv?: NodeJS.ProcessEnv } = {}): Promise<NodeHarness> {
  const sim = new SimCloud();
  await sim.start();
  const subnet = sim.addSubnet({ cidr: p.subnetCidr ?? '10.0.0.0/24' });
  const inst = sim.launchInstance({ instanceType: p.instanceType ?? 'm5.large', subnetId: subnet.subnetId });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-test-'));
  const h: NodeHarness = {
    sim, instanceId: inst.instanceId, nodeIp: inst.privateIpAddress, subnetId: subnet.subnetId, dir,
    socket: path.join(dir, 'ipamd.sock'), checkpoint: path.join(dir, 'ipam.json'),
    env: {},
    async startIpamd(extra = {}) {
      h.ipamd = await startIpamd({ env: { ...h.env, ...extra }, logFile: path.join(dir, 'ipamd.log') });
      return h.ipamd;
    },
    async close() {
      if (h.ipamd) await h.ipamd.stop(5000).catch(() => undefined);
      await sim.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
  h.env = {
    AWS_EC2_ENDPOINT: sim.ec2Endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
    ENI_IPAM_SOCKET: h.socket, ENI_IPAM_CHECKPOINT_PATH: h.checkpoint, ENI_IPAM_POOL_INTERVAL: '200ms',
    AWS_VPC_K8S_CNI_LOGLEVEL: 'debug', ENI_IPAM_INSTALL_CNI: 'true',
    ENI_IPAM_CNI_CONF_DIR: path.join(dir, 'cni', 'net.d'), ENI_IPAM_CNI_BIN_DIR: path.join(dir, 'cni', 'bin'), ...p.ipamdEnv,
  };
  return h;
}
