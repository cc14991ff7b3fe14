/**
 * Why the pool cannot grow, naming the limit that binds (docs/design.md#10-the-warm-pool-at-depth item 2): MAX_ENI, the
 * instance type's ENI limit (DescribeInstanceTypes `MaximumNetworkInterfaces`), or its
 * IPv4 addresses per ENI (`Ipv4AddressesPerInterface`, one of them the ENI's primary
 * IP). A full subnet is reported from the EC2 error instead (see {@link subnetFullReason}).
 * Pure: counts in, one line of operator text out.
 */
import { addressesPerSlot, capacityPerEni } from './counts.js';
import type { PoolEniView, PoolTargets } from './types.js';

/** The ENI limits of this node and where they come from. */
export interface EniLimits {
  instanceType: string;
  /** The instance type's ENI limit (MaximumNetworkInterfaces). */
  instanceMaxEnis: number;
  /** MAX_ENI when set (the effective limit is min(MAX_ENI, instance limit)). */
  maxEniSetting?: number;
  /** IPv4 addresses per ENI of the instance type (Ipv4AddressesPerInterface), the primary included. */
  ipv4PerEni: number;
}

/** Attached ENIs the datastore does not serve from, which still use up the ENI limit. */
export interface EnisOutsidePool {
  /** Untagged or `no_manage=true`: never ours to use. */
  unmanaged: number;
  /** Ours, attached, not usable yet (attaching, IMDS lag, host networking not ready). */
  pending: number;
  /** Ours, detached or detaching, not deleted yet. */
  orphans: number;
  /** Being created right now (device index reserved). */
  creating: number;
}

/**
 * The reason a grow cannot place what is needed, naming the binding limit, e.g.
 * `MAX_ENI=2 reached (instance type m5.large allows 3 ENIs) and every ENI holds its 9
 * secondary IPs (Ipv4AddressesPerInterface 10, one of them the ENI's primary IP)`, or
 * `instance type t3.medium is at its ENI limit (3 ENIs) and every ENI holds its 5 secondary IPs (...)`.
 * @param views the datastore's ENIs; @param t targets (`maxEni` = min(MAX_ENI, instance limit));
 * @param limits where the limits come from; @param outside attached ENIs not in `views`.
 */
export function growBlockedReason(
  views: PoolEniView[],
  t: PoolTargets,
  limits: EniLimits,
  outside: EnisOutsidePool,
): string {
  if (views.length === 0) return 'no ENI is known yet (instance discovery has not completed)';
  const prefixMode = (t.unit ?? 'ip') === 'prefix';
  const perEni = `Ipv4AddressesPerInterface ${limits.ipv4PerEni}, one of them the ENI's primary IP`;
  if (limits.ipv4PerEni <= 1)
    return `instance type ${limits.instanceType} leaves no address per ENI for pods (${perEni})`;
  const capSlots = Math.floor(capacityPerEni(views) / addressesPerSlot(t));
  const what = prefixMode ? '/28 prefixes' : 'secondary IPs';
  const attached = views.length + outside.unmanaged + outside.pending + outside.orphans + outside.creating;
  const maxEniBinds = limits.maxEniSetting !== undefined && limits.maxEniSetting < limits.instanceMaxEnis;
  const eniLimit = maxEniBinds
    ? `MAX_ENI=${limits.maxEniSetting} reached (instance type ${limits.instanceType} allows ${limits.instanceMaxEnis} ENIs)`
    : `instance type ${limits.instanceType} is at its ENI limit (${limits.instanceMaxEnis} ENIs${limits.maxEniSetting !== undefined ? `; MAX_ENI=${limits.maxEniSetting}` : ''})`;
  const notServing = [
    outside.unmanaged ? `${outside.unmanaged} not managed by eni-ipam` : '',
    outside.pending ? `${outside.pending} attached but not usable yet` : '',
    outside.orphans ? `${outside.orphans} being deleted` : '',
    outside.creating ? `${outside.creating} being created` : '',
  ].filter(Boolean);
  const of = notServing.length ? ` (of the ${attached} attached: ${notServing.join(', ')})` : '';
  if (attached < t.maxEni) return `the pool cannot grow now: ${attached} of ${t.maxEni} ENIs attached${of}`;
  const closed = views.some((v) => v.closed)
    ? '; the primary ENI serves no new pod (custom networking, AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true)'
    : '';
  return `${eniLimit}${of} and every ENI holds its ${capSlots} ${what} (${perEni})${closed}`;
}

/** The reason for an EC2 answer that the subnet has no free addresses (or /28 blocks). */
export function subnetFullReason(subnetId: string, code: string, pauseMs: number): string {
  return `the subnet has no free addresses (EC2 ${code} for ${subnetId}); grow paused for ${Math.round(pauseMs / 1000)} s`;
}
