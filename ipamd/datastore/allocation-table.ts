/**
 * The allocation table: which attachment (allocation key) holds which address — assign
 * and unassign for CNI ADD/DEL/GC, their rollbacks when the checkpoint write fails, and
 * the restore of allocations after a restart. The holder is also written on the address
 * record (address-table.ts), so both sides always agree. Pure and synchronous; `now` in
 * ms since epoch.
 */
import type { AvailabilitySignal } from './availability.js';
import type { AddressTable } from './address-table.js';
import type { Cooldown } from './cooldown.js';
import type { ChangeLog } from './changes.js';
import type { PendingAllocations } from './pending.js';
import type { ReleasedContainers } from './released-containers.js';
import type { AssignResult, RestoreResult } from './roles.js';
import type { Allocation, AllocationKey, PodRef } from './types.js';
import { pickAvailable } from './address-scan.js';
import { keyString } from './records.js';

/** What an {@link AllocationTable} works with (wired by datastore.ts). */
export interface AllocationTableParts {
  addresses: AddressTable;
  pending: PendingAllocations;
  /** The remembered unassigned containers (an unassign remembers one, an assign forgets it). */
  unassigned: ReleasedContainers;
  changes: ChangeLog;
  signal: AvailabilitySignal;
  /** Counts each reuse by what ended its cooldown (timer or evidence). */
  cooldown: Pick<Cooldown, 'noteReuse'>;
}

/** Allocations by key; the one owner of that map. */
export class AllocationTable {
  private readonly byKey = new Map<string, Allocation>();

  constructor(private readonly p: AllocationTableParts) {}

  /**
   * Assigns an address to `key`. Idempotent: a key that already holds an address gets
   * it back (`existing`), or `pending` if that address is on no known ENI. Takes an
   * available address of the lowest device number ENI: secondary IPs and addresses of
   * prefixes already in use before those of a wholly free /28 prefix (so free prefixes
   * stay free and can be released), then least recently released first. Never from an
   * ENI closed to new pods (custom networking's primary ENI).
   */
  assign(key: AllocationKey, pod: PodRef | undefined, now: number): AssignResult {
    const ks = keyString(key);
    const held = this.byKey.get(ks);
    if (held) {
      const eni = this.p.pending.has(held.ipv4) ? undefined : this.p.addresses.getEni(held.eniId);
      if (eni) return { kind: 'existing', allocation: { ...held }, eni };
      return { kind: 'pending', allocation: { ...held } };
    }
    const state = this.p.addresses.reuseStateAt(now);
    for (const rec of this.p.addresses.enisByDevice()) {
      if (this.p.addresses.closedToNewPods(rec.info)) continue; // custom networking: the primary ENI serves no new pod
      const best = pickAvailable(rec, state);
      if (!best) continue;
      this.p.cooldown.noteReuse(best, now);
      best.holder = ks;
      best.releasedAt = undefined;
      this.p.changes.key(ks, key);
      this.p.changes.ip(best.ip);
      const allocation: Allocation = {
        ...key,
        ipv4: best.ip,
        eniId: rec.info.eniId,
        allocatedAt: now,
        ...(pod ? { pod } : {}),
      };
      this.byKey.set(ks, allocation);
      this.p.unassigned.forget(key.containerID);
      return { kind: 'assigned', allocation: { ...allocation }, eni: rec.info };
    }
    return { kind: 'empty' };
  }

  /**
   * Unassigns the address held by `key`: it goes into cooldown. A key that holds nothing
   * is a no-op (DEL of an unknown container). Never touches another key's address. Either
   * way the container is remembered as unassigned (released-containers.ts).
   * @returns the unassigned allocation, or undefined.
   */
  unassign(key: AllocationKey, now: number): Allocation | undefined {
    const ks = keyString(key);
    this.p.unassigned.remember(key.containerID, now);
    const a = this.byKey.get(ks);
    if (!a) return undefined;
    this.byKey.delete(ks);
    this.p.changes.key(ks, key);
    const r = this.p.addresses.record(a.ipv4);
    if (r && r.holder === ks) {
      r.holder = undefined;
      r.releasedAt = now;
      this.p.changes.ip(r.ip);
    } else {
      this.p.pending.delete(a.ipv4);
    }
    return a;
  }

  /**
   * Undoes an assignment whose checkpoint write failed: the address goes straight back
   * to available (no cooldown, it was never used). @returns true if something was undone.
   */
  rollbackAssign(allocation: Allocation): boolean {
    const ks = keyString(allocation);
    const a = this.byKey.get(ks);
    if (!a || a.ipv4 !== allocation.ipv4) return false;
    this.byKey.delete(ks);
    this.p.changes.key(ks, a);
    const r = this.p.addresses.record(a.ipv4);
    if (r && r.holder === ks) r.holder = undefined;
    this.p.changes.ip(a.ipv4);
    this.p.signal.notify();
    return true;
  }

  /**
   * Puts back an allocation whose unassign could not be made durable (the DEL fails and
   * the runtime retries). Refuses (false) if the address was taken meanwhile.
   */
  rollbackUnassign(allocation: Allocation): boolean {
    const r = this.restoreAllocation(allocation);
    return r === 'restored' || r === 'releasing';
  }

  /**
   * Re-creates an allocation from a restore source (checkpoint, runtime, a DEL rolled back).
   * - `restored`: the IP is on a known ENI and held by nobody → assigned. If it was
   *   reserved for a release not sent to EC2 yet, the reservation is cancelled (the
   *   releaser's `markReleaseSent` / `markPrefixReleaseSent` leaves it out):
   *   a live pod's IP is never unassigned;
   * - `releasing`: the IP's unassign was already sent to EC2 (it cannot be called back).
   *   The allocation is recorded at once (the IP stays unavailable to anyone else) and
   *   EC2's answer decides: the unassign failed or EC2 still shows the IP →
   *   `cancelRelease` and it is plainly assigned; EC2 took it → `completeRelease` turns
   *   the allocation `pending` and reports it (release-phases.ts). The caller should log
   *   this loudly: ipamd released an address a pod is using;
   * - `pending`: the IP is on no known ENI yet (IMDS/EC2 lag): the allocation is kept
   *   and the IP becomes assigned the moment `addIps` adds it;
   * - `duplicate-key`: the key already holds an address (left as is);
   * - `ip-taken`: another key holds that IP (left as is; the caller logs the conflict).
   */
  restoreAllocation(a: Allocation): RestoreResult {
    const ks = keyString(a);
    if (this.byKey.has(ks)) return 'duplicate-key';
    const r = this.p.addresses.record(a.ipv4);
    if (!r) {
      if (this.p.pending.has(a.ipv4)) return 'ip-taken';
      const copy = { ...a };
      this.p.pending.set(a.ipv4, copy);
      this.byKey.set(ks, copy);
      this.p.changes.key(ks, a);
      return 'pending';
    }
    if (r.holder !== undefined) return 'ip-taken';
    r.holder = ks;
    r.unverified = false;
    r.releasedAt = undefined;
    this.byKey.set(ks, { ...a, eniId: r.eniId });
    this.p.changes.key(ks, a);
    this.p.changes.ip(r.ip);
    this.p.unassigned.forget(a.containerID);
    if (r.releasing === 'sent') return 'releasing';
    r.releasing = false;
    return 'restored';
  }

  /** The allocation held under key string `ks` (the live object, not a copy), or undefined. */
  held(ks: string): Allocation | undefined {
    return this.byKey.get(ks);
  }

  /** The allocation of `key` (a copy), or undefined. */
  lookup(key: AllocationKey): Allocation | undefined {
    const a = this.byKey.get(keyString(key));
    return a ? { ...a } : undefined;
  }

  /** The allocation holding `ip` (a copy; a pending one included), or undefined. */
  holderOf(ip: string): Allocation | undefined {
    const r = this.p.addresses.record(ip);
    const pending = this.p.pending.get(ip);
    const ks = r?.holder ?? (pending ? keyString(pending) : undefined);
    const a = ks === undefined ? undefined : this.byKey.get(ks);
    return a ? { ...a } : undefined;
  }

  /** All allocations (copies), including pending ones. */
  allocations(): Allocation[] {
    return [...this.byKey.values()].map((a) => ({ ...a }));
  }
}
