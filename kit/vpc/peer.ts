/**
 * A host elsewhere in the simulated VPC: an address in the VPC's primary CIDR, outside every
 * subnet, on the VPC namespace's `lo` (the data plane routes it to no ENI: it is the VPC's
 * own). Traffic to it from a node crosses the VPC data plane (./dataplane.ts), so it arrives
 * only through the ENI that holds its source address (EC2's source/destination check).
 * The NodePort step's VPC client (kit/cluster/vpc-side.ts) and the demo's VPC peer use it.
 */
import ipaddr from 'ipaddr.js';
import { vpcCidrBlocks, type SimState } from '../../sim/index.js';
import { startEchoServers } from '../echo-servers.js';
import { run, type Netns } from '../netns.js';

/**
 * The VPC host's address: the VPC's primary CIDR's last address minus 9 (10.0.255.246 in
 * 10.0.0.0/16; a VPC block is /16../28, so its last octet is at least 15 and minus 9 stays in it).
 * @throws Error when that address falls in a subnet of `state`.
 */
export function vpcPeerAddress(state: Pick<SimState, 'vpcCidr' | 'secondaryVpcCidrs' | 'subnets'>): string {
  const bytes = ipaddr.IPv4.broadcastAddressFromCIDR(vpcCidrBlocks(state)[0]!).toByteArray();
  bytes[3] = bytes[3]! - 9;
  const peer = ipaddr.fromByteArray(bytes);
  for (const s of state.subnets.values())
    if (peer.match(ipaddr.parseCIDR(s.cidr))) throw new Error(`VPC host ${peer.toString()} is inside subnet ${s.cidr}`);
  return peer.toString();
}

/** A VPC peer serving; `stop()` kills its server and removes its address (idempotent, never throws). */
export interface VpcPeer {
  /** Its address ({@link vpcPeerAddress}). */
  address: string;
  /** Its TCP port. */
  port: number;
  stop(): Promise<void>;
}

/**
 * Adds {@link vpcPeerAddress} to `lo` of the VPC namespace `vpc` and serves TCP `port` there,
 * answering each connection with the source address it saw (kit/echo-servers.ts).
 * @throws Error (after undoing what it did) when the address is inside a subnet, `ip` fails,
 *   or the server does not listen within `timeoutMs` (default 10 000).
 */
export async function startVpcPeer(o: {
  state: Pick<SimState, 'vpcCidr' | 'secondaryVpcCidrs' | 'subnets'>;
  vpc: Netns;
  port: number;
  timeoutMs?: number;
}): Promise<VpcPeer> {
  const address = vpcPeerAddress(o.state);
  await run('ip', ['-n', o.vpc.name, 'addr', 'add', `${address}/32`, 'dev', 'lo']);
  const unaddress = () => run('ip', ['-n', o.vpc.name, 'addr', 'del', `${address}/32`, 'dev', 'lo']).catch(() => '');
  let kill: () => void;
  try {
    kill = await startEchoServers(o.vpc, [address], o.port, o.timeoutMs);
  } catch (e) {
    await unaddress();
    throw e;
  }
  let stopped = false;
  return {
    address,
    port: o.port,
    async stop() {
      if (stopped) return;
      stopped = true;
      kill();
      await unaddress();
    },
  };
}
