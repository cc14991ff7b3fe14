/**
 * Whole-index scans of the datastore's address records (cooling, unverified, counts, the
 * address an ADD takes):
 * pure functions over the `IpRecord`s the address table keeps (address-table.ts), so the table itself stays
 * about changing records. Times are ms since epoch; no I/O.
 */
import { isPrefixFree, type StateFn } from './prefixes.js';
import type { EniRecord, IpRecord } from './records.js';
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

/**
 * The address of `rec` an ADD takes (Datastore.assign), or undefined when none is
 * available: addresses not in a wholly free /28 prefix ({@link isPrefixFree}) before those
 * in one, so free prefixes stay free and can be released; then least recently released
 * first (never released before any released); ties to the first in `rec.ips`' order. One
 * pass: a prefix's 16 states are read only for a prefix with an available address, once,
 * and the pass stops at an address nothing can beat (not in a free prefix, never released).
 */
export function pickAvailable(rec: EniRecord, state: StateFn): IpRecord | undefined {
  const free = rec.prefixes.size > 0 ? new Map<string, boolean>() : undefined;
  const rankOf = (r: IpRecord): number => {
    if (r.prefix === undefined || !free) return 0;
    let f = free.get(r.prefix);
    if (f === undefined) free.set(r.prefix, (f = isPrefixFree(rec, r.prefix, state)));
    return f ? 1 : 0;
  };
  let best: IpRecord | undefined;
  let bestRank = 0;
  for (const r of rec.ips.values()) {
    if (state(r) !== 'available') continue;
    const rank = rankOf(r);
    if (!best || rank < bestRank || (rank === bestRank && (r.releasedAt ?? -1) < (best.releasedAt ?? -1))) {
      best = r;
      bestRank = rank;
      if (rank === 0 && r.releasedAt === undefined) break;
    }
  }
  return best;
}
