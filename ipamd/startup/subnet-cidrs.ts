/**
 * The IPv4 CIDR of each attached ENI's subnet, for its route table (docs/design.md#7-host-networking):
 * an ENI in another subnet than the node's (custom networking, subnet discovery) has its
 * own VPC router (first host address of that subnet) and prefix length. IMDS gives it per
 * MAC (`network/interfaces/macs/<mac>/subnet-ipv4-cidr-block`); EC2 says which subnet each
 * ENI is in. Joined by subnet id, so the ENI's subnet is EC2's word and the CIDR IMDS's.
 * Pure: I/O (reading IMDS again for a MAC it did not list yet) is the caller's.
 */
import ipaddr from 'ipaddr.js';
import type { Ec2Eni } from '../cloud/ec2-port.js';
import type { ImdsEni } from '../cloud/imds.js';

/**
 * Subnet id → IPv4 CIDR of every subnet IMDS describes an ENI in (`subnet-xyz` →
 * `100.64.0.0/19`). IMDS entries without a valid IPv4 CIDR are skipped (and so show up
 * as missing in {@link missingSubnetCidrs}).
 */
export function subnetCidrsFromImds(imdsEnis: readonly ImdsEni[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of imdsEnis) if (e.subnetId && isIpv4Cidr(e.subnetCidr)) out.set(e.subnetId, e.subnetCidr);
  return out;
}

/** The ENIs of `enis` whose subnet has no CIDR in `cidrs` (keyed by subnet id). */
export function missingSubnetCidrs(enis: readonly Ec2Eni[], cidrs: ReadonlyMap<string, string>): Ec2Eni[] {
  return enis.filter((e) => !cidrs.has(e.subnetId));
}

/**
 * Every VPC IPv4 CIDR block the ENIs' IMDS entries list (`vpc-ipv4-cidr-blocks`: the
 * primary block and every secondary block associated with the VPC), deduplicated, in
 * first-seen order. The ENIs of one instance are in one VPC, so the lists agree; the
 * union only guards against one entry being read mid-change. Falls back to the node
 * subnet's CIDR when IMDS lists none (never empty: SNAT must not cover the node's own subnet).
 */
export function vpcCidrsFromImds(imdsEnis: readonly ImdsEni[], primary: ImdsEni): string[] {
  const all = [primary, ...imdsEnis].flatMap((e) => e.vpcCidrs).filter(isIpv4Cidr);
  return all.length ? [...new Set(all)] : [primary.subnetCidr];
}

/** True for an IPv4 CIDR such as `10.0.0.0/16`. */
export function isIpv4Cidr(s: string): boolean {
  try {
    return ipaddr.parseCIDR(s)[0].kind() === 'ipv4';
  } catch {
    return false;
  }
}
