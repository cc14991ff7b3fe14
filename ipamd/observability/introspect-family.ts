/**
 * The IP families in ipamd's own introspection (`/v1/allocations`, the `counts` of
 * `/v1/status`; docs/design.md#ip-families), pure: the IPv4 datastore and the IPv6
 * allocations (datastore/ipv6-allocations.ts) are two stores, one allocation key across
 * both in `dual` mode, so an attachment is listed once with every address it holds.
 */
import type { Allocation, AllocationKey } from '../datastore/types.js';
import { v6KeyOf, type V6State } from '../datastore/ipv6-allocations.js';

/**
 * One attachment as `/v1/allocations` lists it: the IPv4 allocation's fields (`ipv4`,
 * `eniId`) when it holds an IPv4 from the ENIs, `ipv6` when it holds a /128, and in
 * `ipv6` mode its `egressV4` (169.254.172.0/22, the pod's `v4if0`). `allocatedAt` is ms
 * since the epoch (the IPv4 one in `dual` mode).
 */
export interface ListedAllocation extends AllocationKey {
  ipv4?: string;
  eniId?: string;
  ipv6?: string;
  egressV4?: string;
  allocatedAt: number;
  pod?: Allocation['pod'];
}

/**
 * Every attachment, IPv4 allocations first in datastore order (each with its /128 in
 * `dual` mode), then the IPv6 allocations no IPv4 allocation shares a key with (`ipv6`
 * mode). `v6` undefined (`ipv4` mode): the IPv4 allocations as they are.
 */
export function familyAllocations(
  v4: readonly Allocation[],
  v6: ReadonlyArray<V6State['allocations'][number]> | undefined,
): ListedAllocation[] {
  if (!v6?.length) return [...v4];
  const byKey = new Map(v6.map((a) => [v6KeyOf(a), a]));
  const out: ListedAllocation[] = v4.map((a) => {
    const six = byKey.get(v6KeyOf(a));
    if (!six) return a;
    byKey.delete(v6KeyOf(a));
    return { ...a, ipv6: six.ipv6 };
  });
  for (const a of byKey.values())
    out.push({
      networkName: a.networkName,
      containerID: a.containerID,
      ifName: a.ifName,
      ipv6: a.ipv6,
      ...(a.egressV4 ? { egressV4: a.egressV4 } : {}),
      allocatedAt: a.allocatedAt,
      ...(a.pod ? { pod: a.pod } : {}),
    });
  return out;
}

/** The IPv6 counts of `/v1/status` (`counts.ipv6`): the node's /80 and its /128s by state. */
export interface Ipv6Counts {
  /** The primary ENI's /80 the /128s come from. */
  prefix: string;
  /** /128s held by pods. */
  assigned: number;
  /** /128s in IP_COOLDOWN_PERIOD (egress IPv4s cooling are not counted). */
  cooling: number;
  /** Addresses never handed out (implausible in the checkpoint, or wired with no owner). */
  quarantined: number;
}

/** {@link Ipv6Counts} of an IPv6 state (`Ipv6Allocations.state(now)`). */
export function ipv6Counts(s: Pick<V6State, 'prefix' | 'allocations' | 'cooling' | 'quarantined'>): Ipv6Counts {
  return {
    prefix: s.prefix,
    assigned: s.allocations.length,
    cooling: s.cooling.filter((c) => c.address.includes(':')).length,
    quarantined: s.quarantined.filter((q) => q.address.includes(':')).length,
  };
}

/**
 * How many attachments hold an address of any family (`counts.pods`): the IPv4
 * allocations plus the IPv6 ones whose key no IPv4 allocation has.
 */
export function podCount(v4: readonly AllocationKey[], v6: readonly AllocationKey[] | undefined): number {
  if (!v6?.length) return v4.length;
  const keys = new Set(v4.map(v6KeyOf));
  return v4.length + v6.filter((a) => !keys.has(v6KeyOf(a))).length;
}
