/**
 * Whole-index scans of the datastore's address records (cooling, unverified, counts):
 * pure functions over the `IpRecord`s {@link AddressStore} keeps, so the store itself stays
 * about changing records. Times are ms since epoch; no I/O.
 */
import type { StateFn } from './prefixes.js';
import type { IpRecord } from './records.js';
import type { DatastoreCounts } from './types.js';

/** The addresses cooling per `state`, with their release time (ms; for the checkpoint). */
export function coolingOf(ips: Iterable<IpRecord>, state: StateFn): Array<{ ip: string; releasedAt: number }> {
  const out: Array<{ ip: string; releasedAt: number }> = [];
  for (const r of ips) if (state(r) === 'cooling') out.push({ ip: r.ip, releasedAt: r.releasedAt! });
  return out;
}

/** Marks every unheld record unverified (start-up without a usable checkpoint). @returns how many. */
export function markUnheldUnverified(ips: Iterable<IpRecord>): number {
  let n = 0;
  for (const r of ips) {
    if (r.holder === undefined) {
      r.unverified = true;
      n++;
    }
  }
  return n;
}

/** Clears `unverified` on every record except those `keep(ip)` holds back. @returns how many were cleared. */
export function clearUnverified(ips: Iterable<IpRecord>, keep?: (ip: string) => boolean): number {
  let n = 0;
  for (const r of ips) {
    if (r.unverified && !keep?.(r.ip)) {
      r.unverified = false;
      n++;
    }
  }
  return n;
}

/**
 * Counts by state over all records; `outOfPool(r)` true leaves an available address out
 * entirely (custom networking's primary ENI). `enis` is passed through as the ENI count.
 */
export function countAddresses(
  ips: Iterable<IpRecord>,
  state: StateFn,
  enis: number,
  outOfPool: (r: IpRecord) => boolean,
): DatastoreCounts {
  const c: DatastoreCounts = { total: 0, assigned: 0, cooling: 0, releasing: 0, unverified: 0, available: 0, enis };
  for (const r of ips) {
    const st = state(r);
    if (st === 'available' && outOfPool(r)) continue;
    c.total++;
    c[st]++;
  }
  return c;
}

/** The addresses marked unverified (dotted quads, in iteration order). */
export function unverifiedOf(ips: Iterable<IpRecord>): string[] {
  const out: string[] = [];
  for (const r of ips) if (r.unverified) out.push(r.ip);
  return out;
}

/** When the earliest of the cooling `entries` ends (ms: `releasedAt + cooldownMs`), or undefined when there is none. */
export function earliestCooldownEnd(
  entries: ReadonlyArray<{ releasedAt: number }>,
  cooldownMs: number,
): number | undefined {
  let min: number | undefined;
  for (const e of entries) if (min === undefined || e.releasedAt + cooldownMs < min) min = e.releasedAt + cooldownMs;
  return min;
}
