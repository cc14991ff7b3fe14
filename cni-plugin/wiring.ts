/**
 * Netns plumbing of one pod attachment (DESIGN §1 step 4) with iproute2, two processes
 * per ADD: one `ip -batch -` in the node's netns, one `nsenter --net=<netns> ip -batch -`
 * in the pod's.
 *
 * Node side: veth pair created with the peer directly in the pod netns (by path), fixed
 * MACs and MTU, host end up, host route `<ip>/32 dev <hostVeth> scope link`.
 * Pod side: `lo` up, peer up, `<ip>/32`, `169.254.1.1 dev <if> scope link`,
 * `default via 169.254.1.1`, permanent neighbour 169.254.1.1 → host veth MAC.
 */
import { stat } from 'node:fs/promises';
import { CniCode, CniError } from './errors.js';
import { IpBatchError, ipBatch } from './ip-batch.js';
import { POD_GATEWAY } from './result.js';

/** Everything needed to wire (or unwire) one attachment. */
export interface WiringPlan {
  /** Pod netns path (`/var/run/netns/<name>` or `/proc/<pid>/ns/net`). */
  netns: string;
  /** Interface name inside the pod (CNI_IFNAME). */
  ifName: string;
  hostVeth: string;
  hostMac: string;
  podMac: string;
  /** Pod IPv4, dotted quad. */
  ipv4: string;
  /** MTU in bytes of both ends. */
  mtu: number;
  /** Route table of the ENI holding the IP (254 = main). Used by {@link policyRoutingLines}. */
  routeTableId: number;
}

/**
 * Seam for the ip rules of DESIGN §1 step 4 (prio 512 `to <ip> lookup main`, prio 1536
 * `from <ip> lookup <eni table>` for secondary ENIs): extra node-side `ip` batch lines.
 * Empty for now (a later issue adds them).
 */
export function policyRoutingLines(_plan: WiringPlan): string[] {
  return [];
}

/** The node-side `ip -batch` lines for `plan`. */
export function hostLines(p: WiringPlan): string[] {
  return [
    `link add name ${p.hostVeth} address ${p.hostMac} mtu ${p.mtu} type veth peer name ${p.ifName} address ${p.podMac} mtu ${p.mtu} netns ${p.netns}`,
    `link set dev ${p.hostVeth} up`,
    `route replace ${p.ipv4}/32 dev ${p.hostVeth} scope link`,
    ...policyRoutingLines(p),
  ];
}

/** The pod-side `ip -batch` lines for `plan`. */
export function podLines(p: WiringPlan): string[] {
  return [
    'link set dev lo up',
    `link set dev ${p.ifName} up`,
    `addr replace ${p.ipv4}/32 dev ${p.ifName}`,
    `route replace ${POD_GATEWAY} dev ${p.ifName} scope link`,
    `route replace default via ${POD_GATEWAY} dev ${p.ifName}`,
    `neigh replace ${POD_GATEWAY} lladdr ${p.hostMac} dev ${p.ifName} nud permanent`,
  ];
}

/**
 * Deletes the host veth `name` in the current netns (which removes its peer and the
 * host route with it).
 * @returns true if it existed, false if there was no such device.
 * @throws IpBatchError for any other failure.
 */
export async function deleteHostVeth(name: string): Promise<boolean> {
  try {
    await ipBatch([`link del dev ${name}`]);
    return true;
  } catch (e) {
    if (e instanceof IpBatchError && /Cannot find device|does not exist/i.test(e.stderr)) return false;
    throw e;
  }
}

/**
 * Wires the attachment. Idempotent: when the host veth already exists (a repeated ADD)
 * it is deleted and everything re-created. On failure, whatever was created is removed.
 * @throws CniError code 5 (I/O failure): the netns path does not exist (message names
 *   it), or an `ip` command failed (details carry iproute2's message).
 */
export async function wirePod(p: WiringPlan): Promise<void> {
  try {
    await stat(p.netns);
  } catch (e) {
    throw new CniError(CniCode.IoFailure, `netns ${p.netns} does not exist`, (e as Error).message);
  }
  try {
    try {
      await ipBatch(hostLines(p));
    } catch (e) {
      if (!(e instanceof IpBatchError && /File exists/.test(e.stderr))) throw e;
      // A repeated ADD: start again from scratch.
      await deleteHostVeth(p.hostVeth);
      await ipBatch(hostLines(p));
    }
    await ipBatch(podLines(p), p.netns);
  } catch (e) {
    await deleteHostVeth(p.hostVeth).catch(() => undefined);
    throw new CniError(CniCode.IoFailure, `failed to wire ${p.ifName} in netns ${p.netns}`, (e as Error).message);
  }
}
