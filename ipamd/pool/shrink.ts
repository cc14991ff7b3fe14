/**
 * Shrink decision: which available secondary IPs or free /28 prefixes to unassign and which ENIs to delete
 * (docs/design.md#pool-math). Pure; the pool controller applies hysteresis
 * ({@link SurplusTracker}) and the release freeze before executing it.
 */
import { addressesPerSlot, availableOn, byDevice, isEmptyOfPods, poolCounts, removableWholeEnis } from './counts.js';
import type { PoolEniView, PoolTargets, ShrinkPlan } from './types.js';

/**
 * Plans one shrink step.
 *
 * warm-ip mode: walks ENIs from the highest device number down with a budget of
 * `over` addresses. An ENI that may be deleted (not primary, no assigned or cooling
 * address, at least `minEniAgeMs` old) and whose addresses all fit in the budget is
 * deleted whole (its IPs go with it: one detach/delete instead of an unassign first);
 * otherwise up to the budget of its available IPs are unassigned. (An old, pod-free ENI
 * holding no IP at all is deleted even when the budget is spent.) Since at most
 * `over` addresses leave, WARM_IP_TARGET and MINIMUM_IP_TARGET still hold afterwards.
 *
 * `'prefix'` unit (warm-ip and warm-prefix modes): the same walk, but only whole free
 * /28 prefixes are unassigned (`freeSlots`: none of the 16 addresses assigned, cooling,
 * unverified or releasing), ⌊budget / 16⌋ at most; `over` is already a multiple of 16.
 *
 * warm-eni mode: never unassigns single IPs or prefixes; deletes whole empty ENIs (same
 * protections) while the remaining available ≥ warmEniTarget × capacity.
 *
 * @param enis per-ENI counts; @param t targets; @param now ms since epoch;
 * @param minEniAgeMs ENIs younger than this are kept (ms, default 60 000).
 * @returns the plan; unassign counts are slots (secondary IPs in `'ip'` unit, /28
 * prefixes in `'prefix'` unit).
 */
export function planShrink(enis: PoolEniView[], t: PoolTargets, now: number, minEniAgeMs = 60_000): ShrinkPlan {
  const plan: ShrinkPlan = { unassign: [], deleteEnis: [] };
  const oldEnough = (v: PoolEniView) => now - v.createdAtMs >= minEniAgeMs;
  const counts = poolCounts(enis, t);
  if (counts.mode === 'warm-eni') {
    for (const v of removableWholeEnis(enis, t, oldEnough)) plan.deleteEnis.push(v.eniId);
    return plan;
  }
  let budget = counts.over;
  const aps = addressesPerSlot(t);
  for (const v of byDevice(enis, 'desc')) {
    if (isEmptyOfPods(v) && oldEnough(v) && v.total <= budget) {
      plan.deleteEnis.push(v.eniId);
      budget -= v.total;
      continue;
    }
    const freeSlots = aps === 1 ? availableOn(v) : (v.freeSlots ?? 0);
    const n = Math.min(freeSlots, Math.floor(budget / aps));
    if (n <= 0) continue;
    plan.unassign.push({ eniId: v.eniId, count: n });
    budget -= n * aps;
  }
  return plan;
}
