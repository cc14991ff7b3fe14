/**
 * The demo's node on the simulated VPC's data plane (kit/vpc/dataplane.ts), as the real
 * cluster's nodes are (kit/cluster/cluster-node.ts): the VPC namespace, the instance's ENI
 * links in the node namespace (`eth0` with the primary ENI's MAC and the node IP, the default
 * route through the subnet's VPC router; `eth1`, … as ipamd attaches ENIs), the node sysctls
 * the chart's init container sets (ipamd/node-init-steps.ts), and a VPC peer (kit/vpc/peer.ts)
 * answering with the source address it saw. Runs inside the node namespace: the simulated
 * cloud is in this process, and `/proc/sys/net` is the node's.
 */
import type { SimCloud } from '../sim/index.js';
import { setNodeSysctls } from '../ipamd/node-init-steps.js';
import { cleanupStack } from '../kit/cleanup-stack.js';
import type { Netns } from '../kit/netns.js';
import { startVpcDataPlane, type VpcDataPlane } from '../kit/vpc/dataplane.js';
import { firstHost } from '../kit/vpc/desired.js';
import { addressEth0 } from '../kit/vpc/node-eth0.js';
import { startVpcPeer, type VpcPeer } from '../kit/vpc/peer.js';

/** The demo node's VPC side, running. */
export interface DemoVpc {
  dataPlane: VpcDataPlane;
  peer: VpcPeer;
  /** The subnet's VPC router (the node's default gateway). */
  gateway: string;
  /** Stops the peer and the data plane and removes the VPC namespace (every ENI link with it). Idempotent. */
  close(): Promise<void>;
}

/**
 * Creates the VPC namespace `vpcName`, plugs instance `instanceId` of `sim` into `node` (this
 * process's network namespace), addresses `eth0`, sets the node sysctls and starts the VPC peer
 * on TCP `peerPort`.
 * @throws Error naming the step that failed, after undoing the steps before it.
 */
export async function plugDemoNode(o: {
  sim: SimCloud;
  instanceId: string;
  node: Netns;
  vpcName: string;
  peerPort: number;
}): Promise<DemoVpc> {
  const inst = o.sim.state.instances.get(o.instanceId);
  if (!inst) throw new Error(`no instance ${o.instanceId} in the simulated cloud`);
  const gateway = firstHost(o.sim.state.subnets.get(inst.subnetId)!.cidr);
  const undo = cleanupStack();
  const step = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      await undo.close().catch(() => undefined);
      throw new Error(`${what}: ${(e as Error).message}`);
    }
  };
  const dataPlane = await step(`VPC namespace ${o.vpcName}`, () => startVpcDataPlane({ sim: o.sim, name: o.vpcName }));
  undo.push(() => dataPlane.stop());
  await step('ENI links', () => dataPlane.addInstance(o.instanceId, o.node));
  undo.push(() => dataPlane.removeInstance(o.instanceId));
  await step('eth0', () => addressEth0(o.node, inst.privateIpAddress, gateway, undefined));
  // What the chart's privileged init container does on a node: forwarding on, loose rp_filter.
  await step('node sysctls', () => setNodeSysctls('eth0'));
  const peer = await step('VPC peer', () =>
    startVpcPeer({ state: o.sim.state, vpc: dataPlane.netns, port: o.peerPort }),
  );
  undo.push(() => peer.stop());
  return { dataPlane, peer, gateway, close: undo.close };
}
