/**
 * Grow decision: how many secondary IPs to assign to which ENI, and how many ENIs to
 * create (docs/design.md#pool-math). Pure; the pool controller executes the plan.
 */
import { addressesPerSlot, byDevice, capacityPerEni, poolCounts } from './counts.js';
import type { GrowPlan, PoolEniView, PoolTargets } from './types.js';

/**
 * Plans one grow step.
 *
 * Need = `short` (see {@link poolCounts}) + `extraDemand` (ADDs waiting with no IP), in
 * addresses, rounded up to whole slots (`⌈need / 16⌉` /28 prefixes in `'prefix'` unit).
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
  const need = counts.short + Math.max(extraDemand, 0);
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

/** Why a grow cannot place everything, in operator terms. */
function blockedReason(enis: PoolEniView[], t: PoolTargets, capSlots: number): string {
  if (enis.length === 0) return 'no ENI is known yet (instance discovery has not completed)';
  const what = (t.unit ?? 'ip') === 'prefix' ? '/28 prefixes' : 'secondary IPs';
  if (capSlots === 0) return `this instance type's ENIs hold no ${what}`;
  return `instance at MAX_ENI (${t.maxEni} ENIs) and every ENI holds its ${capSlots} ${what}`;
}
