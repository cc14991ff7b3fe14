/** Pool views and targets for the table-driven pool-decision tests (pure, no I/O). */
import type { PoolEniView, PoolTargets } from '../../ipamd/pool/index.js';

/** "Now" of the tests (ms). */
export const NOW = 10_000_000;
/** An hour before {@link NOW} (ms): old enough for any ENI-age rule. */
export const OLD = NOW - 3_600_000;

/** ENI with device number `dev`, capacity 9 unless given, created an hour ago. */
export function eni(dev: number, o: Partial<PoolEniView> = {}): PoolEniView {
  return {
    eniId: `eni-${dev}`,
    deviceNumber: dev,
    isPrimary: dev === 0,
    createdAtMs: OLD,
    capacity: 9,
    total: 0,
    assigned: 0,
    cooling: 0,
    ...o,
  };
}
/** A full ENI (9 of 9 assigned) with device number `dev`. */
export const full = (dev: number) => eni(dev, { total: 9, assigned: 9 });
/** Pool targets: WARM_ENI_TARGET 1, MAX_ENI 3, overridden by `o`. */
export const T = (o: Partial<PoolTargets> = {}): PoolTargets => ({ warmEniTarget: 1, maxEni: 3, ...o });
