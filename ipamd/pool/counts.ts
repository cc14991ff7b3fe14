/**
 * Pool counts and the warm-pool formulas (docs/design.md#pool-math, AWS
 * amazon-vpc-cni-k8s docs/eni-and-ip-target.md and docs/prefix-and-ip-target.md
 * semantics, with the cooldown fix).
 */
import { ADDRESSES_PER_SLOT, type PoolCounts, type PoolEniView, type PoolTargets } from './types.js';

/** Addresses per slot for the targets' unit (1 for secondary IPs, 16 for /28 prefixes). */
export function addressesPerSlot(t: PoolTargets): number {
  return ADDRESSES_PER_SLOT[t.unit ?? 'ip'];
}

/** True when WARM_IP_TARGET or MINIMUM_IP_TARGET is set (even to 0): warm-ip mode. */
export function isWarmIpMode(t: PoolTargets): boolean {
  return t.warmIpTarget !== undefined || t.minimumIpTarget !== undefined;
}

/**
 * True in `'prefix'` unit with WARM_PREFIX_TARGET set and neither WARM_IP_TARGET nor
 * MINIMUM_IP_TARGET set (those override it, as in amazon-vpc-cni-k8s): warm-prefix mode.
 */
export function isWarmPrefixMode(t: PoolTargets): boolean {
  return (t.unit ?? 'ip') === 'prefix' && !isWarmIpMode(t) && t.warmPrefixTarget !== undefined;
}

/** Free /28 prefixes over all ENIs (sum of `freeSlots`; 0 for views without it). */
export function freePrefixCount(enis: PoolEniView[]): number {
  return enis.reduce((s, v) => s + (v.freeSlots ?? 0), 0);
}

/** Available addresses on one ENI: total − assigned − cooling, never negative. */
export function availableOn(v: PoolEniView): number {
  return Math.max(v.total - v.assigned - v.cooling, 0);
}

/** Secondary-IP capacity of one ENI of this instance (the largest seen; 0 when no ENI is known). */
export function capacityPerEni(enis: PoolEniView[]): number {
  return enis.reduce((m, v) => Math.max(m, v.capacity), 0);
}

/** True if the ENI could be deleted now: not primary, no assigned or cooling address. */
export function isEmptyOfPods(v: PoolEniView): boolean {
  return !v.isPrimary && v.assigned === 0 && v.cooling === 0;
}

/** ENIs ordered by device number, `asc` or `desc` (a copy). */
export function byDevice(enis: PoolEniView[], dir: 'asc' | 'desc'): PoolEniView[] {
  const s = [...enis].sort((a, b) => a.deviceNumber - b.deviceNumber);
  return dir === 'asc' ? s : s.reverse();
}

/**
 * Warm-eni mode: the whole ENIs (highest device number first) that could go while
 * `available ≥ warmEniTarget × capacity` still holds. Only ENIs passing `eligible`
 * (e.g. old enough) are candidates; all ENIs count toward what remains available.
 */
export function removableWholeEnis(
  enis: PoolEniView[],
  t: PoolTargets,
  eligible: (v: PoolEniView) => boolean = () => true,
): PoolEniView[] {
  const keep = t.warmEniTarget * capacityPerEni(enis);
  let available = enis.reduce((s, v) => s + availableOn(v), 0);
  const out: PoolEniView[] = [];
  for (const v of byDevice(enis, 'desc')) {
    if (!isEmptyOfPods(v) || !eligible(v)) continue;
    if (available - availableOn(v) < keep) continue;
    available -= availableOn(v);
    out.push(v);
  }
  return out;
}

/**
 * Pool totals and how far they are from the targets (all in addresses).
 *
 * - `available = total − assigned − cooling`: cooling IPs are not available.
 * - warm-ip mode (WARM_IP_TARGET or MINIMUM_IP_TARGET set; the unset one counts as 0):
 *   `short = max(WARM − available, MIN − total, 0)`,
 *   `over = max(min(available − WARM, total − MIN), 0)`; in `'prefix'` unit `over` is
 *   rounded down to whole free /28 prefixes (16 × min(⌊over / 16⌋, free prefixes)), and
 *   `short` is rounded up to prefixes by {@link planGrow}.
 * - warm-prefix mode (`'prefix'` unit, WARM_PREFIX_TARGET set): a prefix is free when none
 *   of its 16 addresses is in use; `short = 16 × max(WARM_PREFIX_TARGET − free, 0)`,
 *   `over = 16 × max(free − WARM_PREFIX_TARGET, 0)`.
 * - warm-eni mode: `short = max(warmEniTarget × capacityPerEni − available, 0)`; `over`
 *   is the addresses on whole removable ENIs (an ENI holding no IP counts as 1, so an
 *   empty surplus ENI still registers as surplus).
 *
 * @param enis per-ENI counts (addresses); @param t the targets. Pure; never throws.
 */
export function poolCounts(enis: PoolEniView[], t: PoolTargets): PoolCounts {
  let total = 0,
    assigned = 0,
    cooling = 0,
    available = 0;
  for (const v of enis) {
    total += v.total;
    assigned += v.assigned;
    cooling += v.cooling;
    available += availableOn(v);
  }
  const aps = addressesPerSlot(t);
  const base = { total, assigned, cooling, available, ...(aps > 1 ? { freePrefixes: freePrefixCount(enis) } : {}) };
  if (isWarmIpMode(t)) {
    const warm = t.warmIpTarget ?? 0;
    const min = t.minimumIpTarget ?? 0;
    const short = Math.max(warm - available, min - total, 0);
    const rawOver = Math.max(Math.min(available - warm, total - min), 0);
    const over = aps === 1 ? rawOver : Math.min(Math.floor(rawOver / aps), base.freePrefixes ?? 0) * aps;
    return { ...base, short, over, mode: 'warm-ip' };
  }
  if (isWarmPrefixMode(t)) {
    const free = base.freePrefixes ?? 0;
    const want = t.warmPrefixTarget ?? 0;
    return {
      ...base,
      short: Math.max(want - free, 0) * aps,
      over: Math.max(free - want, 0) * aps,
      mode: 'warm-prefix',
    };
  }
  const short = Math.max(t.warmEniTarget * capacityPerEni(enis) - available, 0);
  const over = removableWholeEnis(enis, t).reduce((s, v) => s + Math.max(v.total, 1), 0);
  return { ...base, short, over, mode: 'warm-eni' };
}
