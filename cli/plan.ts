/**
 * What the pool controller would do next and why, computed with ipamd's own pure pool
 * decisions (ipamd/pool/: poolCounts, planGrow, planShrink, growBlockedReason) on the
 * counts and targets ipamd serves in `/v1/status`. Does nothing; pure.
 *
 * It is the decision of one step: the controller also waits for a surplus to last the
 * shrink delay (hysteresis) and never releases while releases are frozen; both are said.
 */
import { growBlockedReason } from '../ipamd/pool/grow-limits.js';
import {
  planGrow,
  planShrink,
  poolCounts,
  type GrowPlan,
  type PoolCounts,
  type ShrinkPlan,
} from '../ipamd/pool/index.js';
import type { IpamdStatus } from './ipamd-api.js';
import { targetsLine } from './views.js';

/** The plan, with the reasons in operator terms. */
export interface PoolPlan {
  counts: PoolCounts;
  targets: string;
  /** Which target binds now, e.g. `WARM_IP_TARGET=4: 4 − 1 available = 3 short`. */
  binding: string;
  /** The limit that caps growth (ENIs and addresses per ENI). */
  limit: string;
  grow: GrowPlan;
  shrink: ShrinkPlan;
  /** What will happen, one sentence each, in order. */
  actions: string[];
}

/** The target whose term decides `short`/`over` now, in the env var's name. */
export function bindingTarget(st: IpamdStatus, c: PoolCounts): string {
  const t = st.targets;
  if (c.mode === 'warm-ip') {
    const warm = t.warmIpTarget ?? 0,
      min = t.minimumIpTarget ?? 0;
    const byWarm = warm - c.available,
      byMin = min - c.total;
    if (c.short > 0) {
      return byWarm >= byMin
        ? `WARM_IP_TARGET=${warm}: ${c.available} available, ${c.short} short`
        : `MINIMUM_IP_TARGET=${min}: ${c.total} in the pool, ${c.short} short`;
    }
    if (c.over > 0)
      return `${c.available - warm <= c.total - min ? `WARM_IP_TARGET=${warm}` : `MINIMUM_IP_TARGET=${min}`}: ${c.over} over`;
    return `WARM_IP_TARGET=${warm} / MINIMUM_IP_TARGET=${min}: met (${c.available} available of ${c.total})`;
  }
  if (c.mode === 'warm-prefix')
    return `WARM_PREFIX_TARGET=${t.warmPrefixTarget}: ${c.freePrefixes ?? 0} free /28 prefixes${c.short ? `, ${c.short / 16} short` : c.over ? `, ${c.over / 16} over` : ', met'}`;
  const per = st.enis.reduce((m, v) => Math.max(m, v.capacity), 0);
  return `WARM_ENI_TARGET=${t.warmEniTarget}: keep ${t.warmEniTarget} × ${per} = ${t.warmEniTarget * per} available, ${c.available} available${c.short ? `, ${c.short} short` : c.over ? `, ${c.over} on removable ENIs` : ', met'}`;
}

/** Computes the plan for `st` at `now` (ms). @param minEniAgeMs ENIs younger are kept (ipamd's default 60 000). */
export function planFromStatus(st: IpamdStatus, now: number, minEniAgeMs = 60_000): PoolPlan {
  const views = st.enis;
  const t = st.targets;
  const counts = poolCounts(views, t);
  const grow = planGrow(views, t, st.waitingAdds);
  const shrink = planShrink(views, t, now, minEniAgeMs);
  const what = (t.unit ?? 'ip') === 'prefix' ? '/28 prefixes' : 'secondary IPs';
  const per = views.reduce((m, v) => Math.max(m, v.capacity), 0) / ((t.unit ?? 'ip') === 'prefix' ? 16 : 1);
  const l = st.limits;
  const limit = l
    ? `${views.length} of ${t.maxEni} ENIs (instance type ${l.instanceType} allows ${l.instanceMaxEnis}${l.maxEniSetting !== undefined ? `, MAX_ENI=${l.maxEniSetting}` : ''}), ${per} ${what} per ENI (Ipv4AddressesPerInterface ${l.ipv4PerEni}, one the ENI's primary IP)`
    : `${views.length} of ${t.maxEni} ENIs, ${per} ${what} per ENI`;
  const actions: string[] = [];
  for (const a of grow.assign)
    actions.push(
      `assign ${a.count} ${what} to ${a.eniId} (one ${what === 'secondary IPs' ? 'AssignPrivateIpAddresses' : 'AssignPrivateIpAddresses --ipv4-prefix-count'} call)`,
    );
  for (const n of grow.createEnis) actions.push(`create and attach an ENI with ${n} ${what}`);
  if (grow.unmet > 0) {
    const why = l
      ? growBlockedReason(views, t, l, { unmanaged: 0, pending: 0, orphans: 0, creating: 0 })
      : grow.blockedReason;
    actions.push(`cannot place ${grow.unmet} more addresses: ${why}`);
  }
  if (st.waitingAdds > 0) actions.push(`${st.waitingAdds} ADDs are waiting for an address and count as extra demand`);
  const releasing = shrink.unassign.length + shrink.deleteEnis.length > 0;
  if (releasing && st.releasesFrozen)
    actions.push(
      `would release surplus, but releases are frozen (${st.freezeReasons.join('; ')}): nothing is released`,
    );
  else if (releasing) {
    for (const u of shrink.unassign)
      actions.push(
        `once the surplus has lasted the shrink delay: unassign ${u.count} available ${what} from ${u.eniId}`,
      );
    for (const e of shrink.deleteEnis)
      actions.push(`once the surplus has lasted the shrink delay: detach and delete ${e} (no pod on it)`);
  }
  if (actions.length === 0) actions.push('nothing: the pool meets its targets');
  return { counts, targets: targetsLine(st), binding: bindingTarget(st, counts), limit, grow, shrink, actions };
}
