/**
 * Releases: addresses leaving the node for EC2 (UnassignPrivateIpAddresses of secondary
 * IPs or whole /28 prefixes, an ENI freed), in phases kept on the address records
 * (`releasing`, records.ts): reserve (no ADD can take them) → mark sent, right before
 * the EC2 call (from then on only EC2's answer settles them) → complete (EC2 confirmed
 * them gone) or cancel (back to the pool). An adoption may cancel a reservation not yet
 * sent (allocation-table.ts `restoreAllocation`). Pure and synchronous; `now` in ms.
 */
import type { AvailabilitySignal } from './availability.js';
import type { AddressTable } from './address-table.js';
import type { AllocationTable } from './allocation-table.js';
import type { PendingAllocations } from './pending.js';
import type { PrefixTable } from './prefix-table.js';
import type { IpRecord } from './records.js';
import type { ReleasePhases } from './roles.js';
import type { Allocation } from './types.js';
import { ADDRESSES_PER_PREFIX, freePrefixesOf, markReleasing } from './prefixes.js';

/** What the release phases work with (wired by datastore.ts). */
export interface ReleaseParts {
  addresses: AddressTable;
  prefixes: PrefixTable;
  allocations: AllocationTable;
  pending: PendingAllocations;
  signal: AvailabilitySignal;
}

/** The release phases of secondary IPs and /28 prefixes; see the module docstring. */
export class Releases implements ReleasePhases {
  constructor(private readonly p: ReleaseParts) {}

  /**
   * Picks up to `count` available secondary IPs of an ENI (never an address of a /28
   * prefix: prefixes are released whole, see {@link reservePrefixesForRelease}), most
   * recently released first, and marks them `reserved`.
   * @returns the reserved IPs (possibly fewer than asked). @throws Error for an unknown ENI.
   */
  reserveForRelease(eniId: string, count: number, now: number): string[] {
    return this.reserve(eniId, count, now, (r) => r.prefix === undefined);
  }

  /** Reserves every available address of an ENI, prefix addresses included (for an ENI about to be freed). */
  reserveAllForRelease(eniId: string, now: number): string[] {
    return this.reserve(eniId, Number.MAX_SAFE_INTEGER, now, () => true);
  }

  private reserve(eniId: string, count: number, now: number, which: (r: IpRecord) => boolean): string[] {
    const rec = this.p.addresses.mustEni(eniId);
    const state = this.p.addresses.stateAt(now);
    const free = [...rec.ips.values()].filter((r) => which(r) && state(r) === 'available');
    free.sort((a, b) => (b.releasedAt ?? -1) - (a.releasedAt ?? -1));
    const picked = free.slice(0, Math.max(0, count));
    for (const r of picked) r.releasing = 'reserved';
    return picked.map((r) => r.ip);
  }

  /**
   * Picks up to `count` free prefixes of an ENI (none of their 16 addresses assigned,
   * cooling, unverified or releasing), newest first, and marks all their addresses
   * `reserved`. @returns the reserved prefixes (possibly fewer than asked).
   * @throws Error for an unknown ENI.
   */
  reservePrefixesForRelease(eniId: string, count: number, now: number): string[] {
    const rec = this.p.addresses.mustEni(eniId);
    const picked = freePrefixesOf(rec, this.p.addresses.stateAt(now)).reverse().slice(0, Math.max(0, count));
    for (const p of picked) markReleasing(rec, p, 'reserved');
    return picked;
  }

  /**
   * The last step before a releaser calls EC2 with reserved addresses: marks them `sent`
   * and returns them — except those whose reservation an adoption cancelled meanwhile,
   * which must not be sent. Call it synchronously right before the EC2 call.
   */
  markReleaseSent(ips: readonly string[]): string[] {
    return ips.filter((ip) => {
      const r = this.p.addresses.record(ip);
      if (!stillReserved(r)) return false;
      r.releasing = 'sent';
      return true;
    });
  }

  /**
   * {@link markReleaseSent} for prefixes: a prefix one of whose addresses an adoption took
   * meanwhile has its reservation returned to the pool and is left out.
   */
  markPrefixReleaseSent(prefixes: readonly string[]): string[] {
    const out: string[] = [];
    for (const p of prefixes) {
      const rec = this.p.prefixes.recordOfPrefix(p);
      if (!rec) continue;
      const ips = rec.prefixes.get(p) ?? [];
      const intact = ips.length === ADDRESSES_PER_PREFIX && ips.every((ip) => stillReserved(rec.ips.get(ip)));
      markReleasing(rec, p, intact ? 'sent' : false);
      if (intact) out.push(p);
    }
    return out;
  }

  /**
   * Returns reserved IPs to the pool: the EC2 release failed for sure, was cancelled, or a
   * describe shows them still on the ENI. An IP adopted while its unassign was in flight
   * keeps its holder and so becomes plainly assigned (EC2 kept it).
   */
  cancelRelease(ips: readonly string[]): void {
    for (const ip of ips) {
      const r = this.p.addresses.record(ip);
      if (r) r.releasing = false;
    }
    this.p.signal.notify();
  }

  /** Returns reserved prefixes to the pool (the EC2 unassign failed or was cancelled). */
  cancelPrefixRelease(prefixes: readonly string[]): void {
    for (const p of prefixes) {
      const rec = this.p.prefixes.recordOfPrefix(p);
      if (rec) markReleasing(rec, p, false);
    }
    this.p.signal.notify();
  }

  /**
   * EC2 confirmed these addresses are gone (an unassign it answered, or a describe that
   * settled one of unknown outcome): they leave the datastore whatever their state.
   * An allocation holding one (adopted while the unassign was in flight) is kept, never
   * dropped, but becomes pending: never handed out, a repeated ADD is refused, and it is
   * assigned again if EC2 ever puts the address back on one of our ENIs.
   * @returns those allocations (copies), for the caller to report as conflicts.
   */
  completeRelease(ips: readonly string[]): Allocation[] {
    const lost: Allocation[] = [];
    for (const ip of ips) {
      const r = this.p.addresses.record(ip);
      if (!r) continue;
      const held = r.holder === undefined ? undefined : this.p.allocations.held(r.holder);
      if (held) {
        this.p.pending.set(ip, held);
        lost.push({ ...held });
      }
      this.p.addresses.drop(r);
    }
    return lost;
  }

  /** {@link completeRelease} for whole /28 prefixes EC2 confirmed gone. @returns the allocations made pending. */
  completePrefixRelease(prefixes: readonly string[]): Allocation[] {
    return prefixes.flatMap((p) => {
      const rec = this.p.prefixes.recordOfPrefix(p);
      return rec ? this.completeRelease([...(rec.prefixes.get(p) ?? [])]) : [];
    });
  }
}

/** True for a known address that is reserved or sent for release and held by nobody. */
function stillReserved(r: IpRecord | undefined): r is IpRecord {
  return r !== undefined && r.releasing !== false && r.holder === undefined;
}
