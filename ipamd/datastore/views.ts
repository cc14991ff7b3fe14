/**
 * Per-ENI counts for the pure pool decisions (`PoolEniView`, docs/design.md#pool-math),
 * computed from the datastore's records. Pure; no I/O.
 */
import { ADDRESSES_PER_SLOT, type AllocationUnit, type PoolEniView } from '../pool/types.js';
import { freePrefixesOf, isPrefixReleasing, type StateFn } from './prefixes.js';
import type { EniRecord } from './records.js';

/**
 * The pool view of one ENI.
 *
 * - `total`: addresses on the ENI, those being released left out (already on their way out);
 * - `cooling`: cooling and unverified addresses (neither available nor freeable);
 * - `capacity`: EniInfo.capacity slots × addresses per slot of `unit` (16 for `'prefix'`);
 * - `roomSlots`: EC2 slots still free = capacity slots − secondary IPs − prefixes
 *   (releasing ones included: EC2 still holds them until the unassign returns);
 * - `freeSlots`, `prefixes` (when `unit` is `'prefix'` or the ENI holds prefixes): whole
 *   free /28 prefixes, and prefixes not being released.
 *
 * `closed` (the primary ENI under custom networking: it serves no new pod): available
 * addresses are left out of `total`, and `roomSlots`/`freeSlots` are 0, so grow never
 * assigns to it and shrink never plans to release from it (held addresses still count).
 */
export function poolViewOf(rec: EniRecord, unit: AllocationUnit, state: StateFn, closed = false): PoolEniView {
  const info = rec.info;
  const v: PoolEniView = {
    eniId: info.eniId,
    deviceNumber: info.deviceNumber,
    isPrimary: info.isPrimary,
    ...(closed ? { closed: true } : {}),
    createdAtMs: info.createdAtMs,
    capacity: info.capacity * ADDRESSES_PER_SLOT[unit],
    total: 0,
    assigned: 0,
    cooling: 0,
  };
  let secondary = 0;
  for (const r of rec.ips.values()) {
    if (r.prefix === undefined) secondary++;
    const st = state(r);
    if (st === 'releasing' || (closed && st === 'available')) continue;
    v.total++;
    if (st === 'assigned') v.assigned++;
    else if (st === 'cooling' || st === 'unverified') v.cooling++; // not available, not freeable
  }
  v.roomSlots = closed ? 0 : Math.max(info.capacity - secondary - rec.prefixes.size, 0);
  if (unit === 'prefix' || rec.prefixes.size > 0) {
    v.freeSlots = closed ? 0 : freePrefixesOf(rec, state).length;
    v.prefixes = [...rec.prefixes.keys()].filter((p) => !isPrefixReleasing(rec, p)).length;
  }
  return v;
}
