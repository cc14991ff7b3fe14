/**
 * The /28 prefix table (prefix delegation, ENABLE_PREFIX_DELEGATION): which prefixes each
 * ENI holds, kept on the ENI records of the address table (prefix → its 16 addresses),
 * and the operations on them — adding, looking up, forgetting those EC2 no longer holds.
 * Releasing them is release-phases.ts. Pure and synchronous; `now` in ms since epoch.
 */
import type { AvailabilitySignal } from './availability.js';
import type { AddressTable } from './address-table.js';
import type { ChangeLog } from './changes.js';
import type { EniRecord } from './records.js';
import { dropPrefix, newPrefixes } from './prefixes.js';

/** The /28 prefixes of the node's ENIs; see the module docstring. */
export class PrefixTable {
  constructor(
    private readonly addresses: AddressTable,
    private readonly changes: ChangeLog,
    private readonly signal: AvailabilitySignal,
  ) {}

  /**
   * Adds /28 prefixes to a known ENI; each yields 16 assignable addresses. Prefixes
   * already on that ENI are ignored; an address that a pending (restored) allocation
   * claims becomes assigned to it at once. All prefixes are checked before any is added.
   * @throws Error if the ENI is unknown, a prefix is not an aligned IPv4 /28, or one of
   *         its addresses is already known (on another ENI, or as a secondary IP).
   */
  addPrefixes(eniId: string, prefixes: readonly string[]): void {
    const rec = this.addresses.mustEni(eniId);
    for (const [p, ips] of newPrefixes(rec, prefixes, this.addresses.index())) {
      rec.prefixes.set(p, ips);
      for (const ip of ips) this.addresses.insert(rec, ip, p);
    }
    this.signal.notify();
  }

  /** /28 prefixes on an ENI (any state), sorted. @throws Error if the ENI is unknown. */
  eniPrefixes(eniId: string): string[] {
    return [...this.addresses.mustEni(eniId).prefixes.keys()].sort();
  }

  /** The /28 prefix an address belongs to, or undefined (a secondary IP, or unknown). */
  prefixOf(ip: string): string | undefined {
    return this.addresses.record(ip)?.prefix;
  }

  /** The ENI record holding `prefix` (live), or undefined. */
  recordOfPrefix(prefix: string): EniRecord | undefined {
    for (const rec of this.addresses.eniRecords()) if (rec.prefixes.has(prefix)) return rec;
    return undefined;
  }

  /**
   * Forgets prefixes after EC2 confirmed they were unassigned. A prefix is removed only
   * if none of its addresses is assigned, cooling or unverified; otherwise it is kept and reported.
   * @returns the prefixes that were not removed because an address is in use.
   */
  removePrefixes(prefixes: readonly string[], now: number): string[] {
    const state = this.addresses.stateAt(now);
    return prefixes.filter((p) => {
      const rec = this.recordOfPrefix(p);
      if (rec === undefined) return false;
      const ips = rec.prefixes.get(p) ?? [];
      if (!dropPrefix(rec, p, this.addresses.index(), state)) return true;
      for (const ip of ips) this.changes.ip(ip);
      return false;
    });
  }
}
