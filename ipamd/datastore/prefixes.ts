/**
 * /28 IPv4 prefix helpers for prefix delegation (AWS EC2 User Guide, "Assign prefixes
 * to network interfaces": an IPv4 prefix is a /28, 16 addresses, all usable by pods).
 * Pure; IP math with ipaddr.js.
 */
import ipaddr from 'ipaddr.js';
import type { EniRecord, IpRecord } from './records.js';
import type { IpState } from './types.js';

/** Addresses in one /28 IPv4 prefix. */
export const ADDRESSES_PER_PREFIX = 16;

/**
 * The 16 addresses of an aligned IPv4 /28 prefix, lowest first.
 * @param prefix e.g. `10.0.0.32/28`.
 * @throws Error if it is not an IPv4 CIDR, not a /28, or not aligned on 16 addresses.
 */
export function expandPrefix(prefix: string): string[] {
  let addr: ipaddr.IPv4;
  let len: number;
  try {
    const parsed = ipaddr.IPv4.parseCIDR(prefix);
    addr = parsed[0];
    len = parsed[1];
  } catch {
    throw new Error(`not an IPv4 CIDR: ${JSON.stringify(prefix)}`);
  }
  if (len !== 28) throw new Error(`prefix ${prefix} is not a /28`);
  const b = addr.toByteArray();
  if ((b[3]! & 0x0f) !== 0) throw new Error(`prefix ${prefix} is not aligned on 16 addresses`);
  const out: string[] = [];
  for (let i = 0; i < ADDRESSES_PER_PREFIX; i++) out.push(`${b[0]}.${b[1]}.${b[2]}.${b[3]! + i}`);
  return out;
}

/** State function of the datastore, bound to its cooldown. */
export type StateFn = (r: IpRecord) => IpState;

/**
 * True when the prefix still has all its 16 addresses and every one is `available`
 * (none assigned, cooling, unverified or releasing).
 */
export function isPrefixFree(rec: EniRecord, prefix: string, state: StateFn): boolean {
  const ips = rec.prefixes.get(prefix);
  if (!ips || ips.length !== ADDRESSES_PER_PREFIX) return false;
  return ips.every((ip) => {
    const r = rec.ips.get(ip);
    return r !== undefined && state(r) === 'available';
  });
}

/** The free prefixes of an ENI (see {@link isPrefixFree}), in insertion order. */
export function freePrefixesOf(rec: EniRecord, state: StateFn): string[] {
  return [...rec.prefixes.keys()].filter((p) => isPrefixFree(rec, p, state));
}

/** True when at least one address of the prefix is `releasing` (an unassign is in flight). */
export function isPrefixReleasing(rec: EniRecord, prefix: string): boolean {
  return (rec.prefixes.get(prefix) ?? []).some((ip) => !!rec.ips.get(ip)?.releasing);
}

/**
 * Validates prefixes to add to `rec`: skips those already on it, expands the others.
 * @returns prefix → its 16 addresses, for the new ones only.
 * @throws Error if a prefix is not an aligned IPv4 /28 or one of its addresses is
 *         already known (`index`: every address the datastore holds).
 */
export function newPrefixes(
  rec: EniRecord,
  prefixes: readonly string[],
  index: ReadonlyMap<string, IpRecord>,
): Map<string, string[]> {
  const add = new Map<string, string[]>();
  for (const p of prefixes) {
    if (rec.prefixes.has(p) || add.has(p)) continue;
    const ips = expandPrefix(p);
    for (const ip of ips) {
      const known = index.get(ip);
      if (known)
        throw new Error(
          `address ${ip} of prefix ${p} is already on ${known.eniId}${known.prefix ? ` in ${known.prefix}` : ' as a secondary IP'}`,
        );
    }
    add.set(p, ips);
  }
  return add;
}

/** Sets (to a phase) or clears (`false`) `releasing` on every address of a prefix of `rec`. */
export function markReleasing(rec: EniRecord, prefix: string, releasing: IpRecord['releasing']): void {
  for (const ip of rec.prefixes.get(prefix) ?? []) {
    const r = rec.ips.get(ip);
    if (r) r.releasing = releasing;
  }
}

/**
 * Removes a prefix and its 16 addresses from `rec` and `index`, unless an address is
 * assigned, cooling or unverified. @returns true if removed (or not on `rec`).
 */
export function dropPrefix(rec: EniRecord, prefix: string, index: Map<string, IpRecord>, state: StateFn): boolean {
  const ips = rec.prefixes.get(prefix);
  if (!ips) return true;
  const inUse = ips.some((ip) => {
    const r = rec.ips.get(ip);
    const st = r ? state(r) : 'available';
    return st !== 'releasing' && st !== 'available';
  });
  if (inUse) return false;
  for (const ip of ips) {
    rec.ips.delete(ip);
    index.delete(ip);
  }
  rec.prefixes.delete(prefix);
  return true;
}
