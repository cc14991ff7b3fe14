/**
 * The /28 prefix half of the datastore's address store (prefix delegation,
 * ENABLE_PREFIX_DELEGATION): adding prefixes to an ENI, and releasing them in the same
 * steps as secondary IPs (reserve → sent → removed once EC2 confirmed, or cancelled).
 * {@link Datastore} builds on it. Pure and synchronous; `now` in ms since epoch.
 */
import { AddressStore } from './address-store.js';
import { ADDRESSES_PER_PREFIX, dropPrefix, freePrefixesOf, markReleasing, newPrefixes } from './prefixes.js';

/** {@link AddressStore} with /28 prefixes; base class of the datastore (not used on its own). */
export abstract class PrefixStore extends AddressStore {
  /**
   * Adds /28 prefixes to a known ENI; each yields 16 assignable addresses. Prefixes
   * already on that ENI are ignored; an address that a pending (restored) allocation
   * claims becomes assigned to it at once. All prefixes are checked before any is added.
   * @throws Error if the ENI is unknown, a prefix is not an aligned IPv4 /28, or one of
   *         its addresses is already known (on another ENI, or as a secondary IP).
   */
  addPrefixes(eniId: string, prefixes: readonly string[]): void {
    const rec = this.mustEni(eniId);
    for (const [p, ips] of newPrefixes(rec, prefixes, this.ipIndex)) {
      rec.prefixes.set(p, ips);
      for (const ip of ips) this.insertIp(rec, ip, p);
    }
    this.addressesMayBeAvailable();
  }

  /** /28 prefixes on an ENI (any state), sorted. Throws if the ENI is unknown. */
  eniPrefixes(eniId: string): string[] {
    return [...this.mustEni(eniId).prefixes.keys()].sort();
  }

  /** The /28 prefix an address belongs to, or undefined (a secondary IP, or unknown). */
  prefixOf(ip: string): string | undefined {
    return this.ipIndex.get(ip)?.prefix;
  }

  /**
   * Picks up to `count` free prefixes of an ENI (none of their 16 addresses assigned,
   * cooling, unverified or releasing), newest first, and marks all their addresses
   * `releasing`, so no ADD can take one while the EC2 unassign is in flight.
   * @returns the reserved prefixes (possibly fewer than asked).
   */
  reservePrefixesForRelease(eniId: string, count: number, now: number): string[] {
    const rec = this.mustEni(eniId);
    const picked = freePrefixesOf(rec, this.stateAt(now)).reverse().slice(0, Math.max(0, count));
    for (const p of picked) markReleasing(rec, p, 'reserved');
    return picked;
  }

  /**
   * The last step before a releaser calls EC2 with reserved prefixes: marks them `sent`
   * and returns them — except a prefix one of whose addresses an adoption took meanwhile
   * (`Datastore.restoreAllocation` cancels a reservation not yet sent): its reservation
   * is returned to the pool and it must not be sent.
   */
  markPrefixReleaseSent(prefixes: readonly string[]): string[] {
    const out: string[] = [];
    for (const p of prefixes) {
      const rec = this.recordOfPrefix(p);
      if (!rec) continue;
      const ips = rec.prefixes.get(p) ?? [];
      const intact = ips.length === ADDRESSES_PER_PREFIX && ips.every((ip) => this.stillReserved(rec.ips.get(ip)));
      markReleasing(rec, p, intact ? 'sent' : false);
      if (intact) out.push(p);
    }
    return out;
  }

  /** Returns reserved prefixes to the pool (the EC2 unassign failed or was cancelled). */
  cancelPrefixRelease(prefixes: readonly string[]): void {
    for (const p of prefixes) {
      const rec = this.recordOfPrefix(p);
      if (rec) markReleasing(rec, p, false);
    }
    this.addressesMayBeAvailable();
  }

  /**
   * Forgets prefixes after EC2 confirmed they were unassigned. A prefix is removed only
   * if none of its addresses is assigned, cooling or unverified; otherwise it is kept and reported.
   * @returns the prefixes that were not removed because an address is in use.
   */
  removePrefixes(prefixes: readonly string[], now: number): string[] {
    const state = this.stateAt(now);
    return prefixes.filter((p) => {
      const rec = this.recordOfPrefix(p);
      if (rec === undefined) return false;
      const ips = rec.prefixes.get(p) ?? [];
      if (!dropPrefix(rec, p, this.ipIndex, state)) return true;
      for (const ip of ips) this.changes.ip(ip);
      return false;
    });
  }
}
