/**
 * What wiring (wiring.ts, netlink-wiring.ts), CHECK, DEL and GC know about one pod
 * attachment: the veth pair(s), the addresses by family, the ENI's route table. Types and
 * the derived names only, so the line builders of each family can import them without a
 * cycle.
 */
import type { IpFamilyMode } from '../proto/ipam.js';
import { EGRESS_IFNAME } from './families.js';
import { egressHostVethName, hostVethMac, legacyHostVethName, podVethMac } from './veth-name.js';

/** The second veth pair of an IPv6 pod, for IPv4 egress (pod end `v4if0`). */
export interface EgressVeth {
  /** Pod-side name (`v4if0`). */
  ifName: string;
  hostVeth: string;
  hostMac: string;
  podMac: string;
}

/** Everything needed to wire (or unwire) one attachment. */
export interface WiringPlan {
  /** Pod netns path (`/var/run/netns/<name>` or `/proc/<pid>/ns/net`). */
  netns: string;
  /** Interface name inside the pod (CNI_IFNAME). */
  ifName: string;
  hostVeth: string;
  hostMac: string;
  podMac: string;
  /** Pod IPv4, dotted quad; '' for an IPv6-only pod (`ipv6` mode). */
  ipv4: string;
  /** MTU in bytes of both ends (of both pairs). */
  mtu: number;
  /** Route table of the ENI holding the IPv4 (254 = main). Used for the pod's ip rules. */
  routeTableId: number;
  /** The family whose routes and neighbours the pod gets on CNI_IFNAME; absent = `ipv4`. */
  family?: IpFamilyMode;
  /** Pod IPv6 (`ipv6`, `dual`), no prefix length: a /128 on CNI_IFNAME. */
  ipv6?: string;
  /** `ipv6` mode: the second pair for IPv4 egress; absent when the pod gets none. */
  egress?: EgressVeth;
  /** `ipv6` mode: the IPv4 egress address, a /32 on `egress.ifName`. */
  egressV4?: string;
}

/** The part of a plan known before ipamd answers (everything but the addresses and the table). */
export type VethPlan = Omit<WiringPlan, 'ipv4' | 'routeTableId' | 'ipv6' | 'egressV4'>;

/** True when `f` (absent = `ipv4`) puts an IPv4 on CNI_IFNAME. */
export const hasV4 = (f: IpFamilyMode | undefined): boolean => f !== 'ipv6';
/** True when `f` puts an IPv6 on CNI_IFNAME. */
export const hasV6 = (f: IpFamilyMode | undefined): boolean => f === 'ipv6' || f === 'dual';

/**
 * The egress pair of the attachment `(containerId, ifName)`: the host end named as
 * veth-name.ts `egressHostVethName` says, the MACs derived like the first pair's.
 */
export function egressVeth(containerId: string, ifName: string): EgressVeth {
  const key = `${ifName}/${EGRESS_IFNAME}`;
  return {
    ifName: EGRESS_IFNAME,
    hostVeth: egressHostVethName(containerId, ifName, EGRESS_IFNAME),
    hostMac: hostVethMac(containerId, key),
    podMac: podVethMac(containerId, key),
  };
}

/**
 * Every name the egress host veth of `(containerId, ifName)` may have, the current one
 * first, then the one eni-ipam gave it before (`<prefix>` + sha256 of the key: veth-name.ts
 * `legacyHostVethName`).
 * @throws Error if the prefix is invalid.
 */
export function egressVethNames(vethPrefix: string, containerId: string, ifName: string): string[] {
  return [
    egressHostVethName(containerId, ifName, EGRESS_IFNAME),
    legacyHostVethName(vethPrefix, containerId, `${ifName}/${EGRESS_IFNAME}`),
  ];
}
