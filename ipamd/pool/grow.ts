/**
 * Grow decision: how many secondary IPs to assign to which ENI, and how many ENIs to
 * create (docs/design.md#pool-math). Pure; the pool controller executes the plan.
 */
import { addressesPerSlot, byDevice, capacityPerEni, poolCounts } from './counts.js';
import type { GrowPlan, PoolCounts, PoolEniView, PoolTargets } from './types.js';

/**
 * Plans one grow step.
 *
 * Need = {@link growNeed}: what the targets lack once `extraDemand` (ADDs waiting with no IP)
 * took available addresses, in addresses, rounded up to whole slots (`⌈need / 16⌉` /28 prefixes in `'prefix'` unit).
 * An ENI's room is `roomSlots` when the view has it, else ⌊(capacity − total) / slot⌋.
 * Existing ENIs with room are filled first, lowest device number first, one assign
 * batch per ENI; then new ENIs are planned while `attached < maxEni`. In warm-eni
 * mode every ENI touched is filled to capacity (AWS assigns a whole ENI's worth there),
 * so the plan may exceed the need. Whatever cannot be placed is `unmet`, with
 * `blockedReason` in operator terms, e.g.
 * `instance at MAX_ENI (3 ENIs) and every ENI holds its 9 secondary IPs`.
 *
 * @param enis per-ENI counts (addresses); @param t targets (`maxEni` is the effective limit);
 * @param extraDemand waiting ADDs (addresses, default 0).
 * @returns the plan; counts in `assign`/`createEnis` are slots (secondary IPs in `'ip'`
 * unit, /28 prefixes in `'prefix'` unit); `unmet` is in addresses.
 */
export function planGrow(enis: PoolEniView[], t: PoolTargets, extraDemand = 0): GrowPlan {
  const counts = poolCounts(enis, t);
  const need = growNeed(counts, t, extraDemand, capacityPerEni(enis));
  const plan: GrowPlan = { assign: [], createEnis: [], unmet: 0 };
  if (need <= 0) return plan;
  const aps = addressesPerSlot(t);
  const fillWhole = counts.mode === 'warm-eni';
  let needSlots = Math.ceil(need / aps);
  let placed = 0;

  for (const v of byDevice(enis, 'asc')) {
    if (needSlots <= 0) break;
    const room = Math.max(v.roomSlots ?? Math.floor(Math.max(v.capacity - v.total, 0) / aps), 0);
    if (room <= 0) continue;
    const n = fillWhole ? room : Math.min(room, needSlots);
    plan.assign.push({ eniId: v.eniId, count: n });
    needSlots -= n;
    placed += n * aps;
  }

  const capSlots = Math.floor(capacityPerEni(enis) / aps);
  let attached = enis.length;
  while (needSlots > 0 && capSlots > 0 && attached < t.maxEni) {
    const n = fillWhole ? capSlots : Math.min(capSlots, needSlots);
    plan.createEnis.push(n);
    attached++;
    needSlots -= n;
    placed += n * aps;
  }

  plan.unmet = Math.max(need - placed, 0);
  if (plan.unmet > 0) plan.blockedReason = blockedReason(enis, t, capSlots);
  return plan;
}

/**
 * Addresses to add so that the targets still hold once `waiting` ADDs have taken available
 * addresses (the waiters are served first, from what is available or about to be: an ENI
 * being created counts with what it asked for). Not `short + waiting`: that would grow
 * again for waiters the addresses already on their way serve (a second ENI for one ADD
 * while the first is being created), or count a waiter twice under MINIMUM_IP_TARGET.
 * - warm-ip: `max(WARM + waiting − available, MIN − total, 0)`;
 * - warm-eni: `max(WARM_ENI × capacityPerEni + waiting − available, 0)`;
 * - warm-prefix: whole free /28s the waiters leave, short of WARM_PREFIX_TARGET, × 16, plus
 *   the waiters no available address serves.
 * @param c counts of the views (poolCounts); @param capacity addresses per ENI. Pure; all in addresses.
 */
export function growNeed(c: PoolCounts, t: PoolTargets, waiting: number, capacity: number): number {
  const w = Math.max(waiting, 0);
  if (w === 0) return c.short;
  const unserved = Math.max(w - c.available, 0);
  if (c.mode === 'warm-ip')
    return Math.max((t.warmIpTarget ?? 0) + w - c.available, (t.minimumIpTarget ?? 0) - c.total, 0);
  if (c.mode === 'warm-eni') return Math.max(t.warmEniTarget * capacity + w - c.available, 0);
  const aps = addressesPerSlot(t);
  const free = c.freePrefixes ?? 0;
  const outsideFree = Math.max(c.available - free * aps, 0);
  const freeLeft = Math.max(free - Math.ceil(Math.max(w - outsideFree, 0) / aps), 0);
  return Math.max((t.warmPrefixTarget ?? 0) - freeLeft, 0) * aps + unserved;
}

/** Why a grow cannot place everything, in operator terms. */
function blockedReason(enis: PoolEniView[], t: PoolTargets, capSlots: number): string {
  if (enis.length === 0) return 'no ENI is known yet (instance discovery has not completed)';
  const what = (t.unit ?? 'ip') === 'prefix' ? '/28 prefixes' : 'secondary IPs';
  if (capSlots === 0) return `this instance type's ENIs hold no ${what}`;
  return `instance at MAX_ENI (${t.maxEni} ENIs) and every ENI holds its ${capSlots} ${what}`;
}
