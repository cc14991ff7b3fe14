/**
 * Types of the pure pool decisions (docs/design.md#pool-math). No I/O: callers pass
 * per-ENI counts and the current time in; the functions return plans to execute.
 *
 * Units: every count is in IPv4 **addresses** unless a field says "slots". A slot is
 * what one EC2 assign call hands out per unit: one secondary IP in `'ip'` mode, one
 * /28 prefix (16 addresses) in `'prefix'` mode (prefix delegation, ENABLE_PREFIX_DELEGATION).
 */

/** What one EC2 assignment unit is: a secondary IP, or a /28 IPv4 prefix. */
export type AllocationUnit = 'ip' | 'prefix';

/** Addresses per slot for each {@link AllocationUnit}: 1 for a secondary IP, 16 for a /28 prefix. */
export const ADDRESSES_PER_SLOT: Readonly<Record<AllocationUnit, number>> = { ip: 1, prefix: 16 };

/** One attached ENI as the pool decisions see it (the datastore's `poolViews()` produces these). */
export interface PoolEniView {
  eniId: string;
  /** Attachment device index; 0 is the instance's primary ENI. */
  deviceNumber: number;
  /** The instance's primary ENI: never deleted. */
  isPrimary: boolean;
  /** Serves no new pod (custom networking's primary ENI): no room, its free addresses are not counted. */
  closed?: boolean;
  /** When the ENI was created (ms since epoch). */
  createdAtMs: number;
  /**
   * Addresses this ENI may hold for pods: `'ip'` mode: Ipv4AddressesPerInterface − 1 (the
   * ENI's primary IP is not for pods); `'prefix'` mode: (Ipv4AddressesPerInterface − 1) × 16
   * (every slot a /28 prefix).
   */
  capacity: number;
  /** Addresses currently on the ENI (secondary IPs plus the 16 of each /28 prefix). */
  total: number;
  /** Held by pods. */
  assigned: number;
  /** Released, still in IP_COOLDOWN_PERIOD: neither available nor assigned. */
  cooling: number;
  /**
   * Prefix mode only: /28 prefixes on this ENI none of whose 16 addresses is assigned,
   * cooling, unverified or releasing (the only ones that may be unassigned). Ignored in `'ip'` mode.
   */
  freeSlots?: number;
  /** /28 prefixes on the ENI (any state, releasing ones excluded); informational. */
  prefixes?: number;
  /**
   * EC2 slots still free on this ENI (one slot holds a secondary IP or a /28 prefix) =
   * (Ipv4AddressesPerInterface − 1) − secondary IPs − prefixes on it. When absent, grow
   * uses ⌊(capacity − total) / addresses per slot⌋.
   */
  roomSlots?: number;
}

/**
 * The warm-pool targets (AWS env vars WARM_ENI_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET,
 * WARM_PREFIX_TARGET). Mode precedence (amazon-vpc-cni-k8s docs/prefix-and-ip-target.md):
 * WARM_IP_TARGET/MINIMUM_IP_TARGET set → warm-ip (counted in IPs, rounded up to prefixes
 * in `'prefix'` unit); else, in `'prefix'` unit with WARM_PREFIX_TARGET set → warm-prefix;
 * else warm-eni (whole ENIs' worth of IPs, or of prefixes).
 */
export interface PoolTargets {
  warmEniTarget: number;
  /** Set (even to 0) together with or instead of `minimumIpTarget`: warm-ip mode. */
  warmIpTarget?: number;
  minimumIpTarget?: number;
  /** Effective ENI limit: min(MAX_ENI, instance type limit). */
  maxEni: number;
  /** Assignment unit; default `'ip'`; `'prefix'` with ENABLE_PREFIX_DELEGATION=true. */
  unit?: AllocationUnit;
  /** WARM_PREFIX_TARGET: free /28 prefixes to keep (`'prefix'` unit only; ignored in warm-ip mode). */
  warmPrefixTarget?: number;
}

/** Pool totals and the distance to the targets, in addresses. */
export interface PoolCounts {
  total: number;
  assigned: number;
  cooling: number;
  /** total − assigned − cooling (cooling IPs are not available). */
  available: number;
  /** Addresses missing to meet the targets. */
  short: number;
  /**
   * Addresses that could be released while the targets still hold (warm-eni: only whole
   * removable ENIs; `'prefix'` unit: only whole free /28 prefixes, so a multiple of 16).
   */
  over: number;
  mode: 'warm-ip' | 'warm-prefix' | 'warm-eni';
  /** `'prefix'` unit only: /28 prefixes none of whose addresses is in use (sum of `freeSlots`). */
  freePrefixes?: number;
}

/** What to add: one assign batch per existing ENI, then new ENIs. */
export interface GrowPlan {
  /** `count` is in slots (secondary IPs in `'ip'` mode) to assign to the existing ENI in one call. */
  assign: Array<{ eniId: string; count: number }>;
  /** One entry per ENI to create and attach: the slots (secondary IPs) to request on it. */
  createEnis: number[];
  /** Addresses wanted that this plan cannot place (0 when the plan meets the need). */
  unmet: number;
  /** Why `unmet > 0`, in operator terms. */
  blockedReason?: string;
}

/** What to release: available slots per ENI (highest device number first), then whole ENIs. */
export interface ShrinkPlan {
  /** `count` is in slots (secondary IPs in `'ip'` mode); only available ones. */
  unassign: Array<{ eniId: string; count: number }>;
  /** ENIs to detach and delete (their remaining available IPs go with them). */
  deleteEnis: string[];
}
