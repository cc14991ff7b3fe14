/**
 * The datastore: which addresses the node holds (secondary IPs, and the 16 addresses of
 * each /28 prefix with prefix delegation), on which ENI, and which attachment holds each.
 * Pure and synchronous — no I/O, no timers; time is passed in as `now` (ms since epoch).
 * ipamd's single process is its only writer (docs/design.md#8-lessons-the-field-paid-for). A /28 prefix is unassigned
 * only whole, and only when none of its 16 addresses is assigned, cooling, unverified
 * or releasing ({@link Datastore.reservePrefixesForRelease}).
 *
 * Address states:
 * - available: on an ENI, held by nobody, not cooling, not being released;
 * - assigned:  held by exactly one allocation key;
 * - cooling:   released less than `cooldownMs` ago (IP_COOLDOWN_PERIOD) — neither
 *              available nor assigned, so a just-freed IP is not reused at once;
 * - releasing: reserved by the pool controller for an EC2 unassign (or an ENI detach),
 *              so an ADD can never be handed an address that is being released. A
 *              release is first `reserved`, then `sent` right before the EC2 call
 *              (`markReleaseSent`); see {@link Datastore.restoreAllocation} for what an
 *              adoption does to each phase, and {@link Datastore.completeRelease};
 * - unverified: found on an ENI at start with no checkpoint to say who holds it; a live
 *              pod may be using it, so it is neither handed out nor released until a
 *              clean read of the runtime says (docs/design.md#4-restore-after-restart). A *quarantined* address (an
 *              ADD found the node routing it to another pod: {@link Datastore.quarantine})
 *              is in this state too, until {@link Datastore.liftQuarantine}.
 */
import { PrefixStore } from './prefix-store.js';
import { ReleasedContainers } from './released-containers.js';
import { journalCooldownOf } from './changes.js';
import { pickAvailable } from './address-scan.js';
import { keyString } from './records.js';
import type { Allocation, AllocationKey, PodRef } from './types.js';
import type {
  AssignResult,
  Assignments,
  ChangeJournal,
  DatastoreDelta,
  DatastoreViews,
  EniInventory,
  PoolCounts,
  Quarantine,
  ReleasePhases,
  RestoreResult,
  RestoreTarget,
  UnassignedEntry,
} from './roles.js';

export { keyString } from './records.js';

export type { AssignResult, DatastoreDelta, RestoreResult, UnassignedEntry } from './roles.js';

export { RELEASED_CONTAINERS_KEPT } from './released-containers.js';

/**
 * In-memory ENI/IP/allocation store. See the module docstring for the address states;
 * ENI and address methods (addIps, addPrefixes, reserve*, poolViews, counts…) come from
 * {@link AddressStore} and {@link PrefixStore}. Constructor: `(cooldownMs, unit = 'ip', { primaryServesNewPods = true })`.
 * It implements every role of roles.ts; consumers are handed the roles they need, not
 * the class (only the daemon's wiring, start-up and tests construct and hold it whole).
 */
export class Datastore
  extends PrefixStore
  implements
    Assignments,
    PoolCounts,
    ReleasePhases,
    EniInventory,
    RestoreTarget,
    Quarantine,
    ChangeJournal,
    DatastoreViews
{
  private readonly allocationsByKey = new Map<string, Allocation>();
  /** Containers whose attachment was unassigned (DEL, GC) and nothing assigned since. */
  private readonly releasedContainers = new ReleasedContainers((id) => this.changes.released(id));

  /**
   * Assigns an address to `key`. Idempotent: a key that already holds an address gets
   * it back (`existing`). Takes an available address of the lowest device number ENI:
   * secondary IPs and addresses of prefixes already in use before those of a wholly free
   * /28 prefix (so free prefixes stay free and can be released), then least recently
   * released first. Never from an ENI closed to new pods (custom networking's primary ENI).
   */
  assign(key: AllocationKey, pod: PodRef | undefined, now: number): AssignResult {
    const ks = keyString(key);
    const held = this.allocationsByKey.get(ks);
    if (held) {
      const eni = this.pendingByIp.has(held.ipv4) ? undefined : this.enisById.get(held.eniId)?.info;
      if (eni) return { kind: 'existing', allocation: { ...held }, eni };
      return { kind: 'pending', allocation: { ...held } };
    }
    const state = this.stateAt(now);
    for (const rec of [...this.enisById.values()].sort((a, b) => a.info.deviceNumber - b.info.deviceNumber)) {
      if (this.closedToNewPods(rec.info)) continue; // custom networking: the primary ENI serves no new pod
      const best = pickAvailable(rec, state);
      if (!best) continue;
      best.holder = ks;
      best.releasedAt = undefined;
      this.changes.key(ks, key);
      this.changes.ip(best.ip);
      const allocation: Allocation = {
        ...key,
        ipv4: best.ip,
        eniId: rec.info.eniId,
        allocatedAt: now,
        ...(pod ? { pod } : {}),
      };
      this.allocationsByKey.set(ks, allocation);
      this.forgetUnassigned(key.containerID);
      return { kind: 'assigned', allocation: { ...allocation }, eni: rec.info };
    }
    return { kind: 'empty' };
  }

  /**
   * Unassigns the address held by `key`: it goes into cooldown. A key that holds nothing
   * is a no-op (DEL of an unknown container). Never touches another key's address. Either
   * way the container is remembered as unassigned ({@link wasUnassigned}).
   * @returns the unassigned allocation, or undefined.
   */
  unassign(key: AllocationKey, now: number): Allocation | undefined {
    const ks = keyString(key);
    this.rememberUnassigned(key.containerID, now);
    const a = this.allocationsByKey.get(ks);
    if (!a) return undefined;
    this.allocationsByKey.delete(ks);
    this.changes.key(ks, key);
    const r = this.ipIndex.get(a.ipv4);
    if (r && r.holder === ks) {
      r.holder = undefined;
      r.releasedAt = now;
      this.changes.ip(r.ip);
    } else {
      this.pendingByIp.delete(a.ipv4);
    }
    return a;
  }

  /**
   * Undoes an assignment whose checkpoint write failed: the address goes straight back
   * to available (no cooldown, it was never used). Returns true if something was undone.
   */
  rollbackAssign(allocation: Allocation): boolean {
    const ks = keyString(allocation);
    const a = this.allocationsByKey.get(ks);
    if (!a || a.ipv4 !== allocation.ipv4) return false;
    this.allocationsByKey.delete(ks);
    this.changes.key(ks, a);
    const r = this.ipIndex.get(a.ipv4);
    if (r && r.holder === ks) r.holder = undefined;
    this.changes.ip(a.ipv4);
    this.addressesMayBeAvailable();
    return true;
  }

  /**
   * Puts back an allocation whose unassign could not be made durable (the DEL fails and
   * the runtime retries). Refuses if the address was taken meanwhile.
   */
  rollbackUnassign(allocation: Allocation): boolean {
    const r = this.restoreAllocation(allocation);
    return r === 'restored' || r === 'releasing';
  }

  /**
   * Re-creates an allocation from a restore source (checkpoint, runtime, a DEL rolled back).
   * - `restored`: the IP is on a known ENI and held by nobody → assigned. If it was
   *   reserved for a release not sent to EC2 yet, the reservation is cancelled (the
   *   releaser's {@link markReleaseSent} / {@link markPrefixReleaseSent} leaves it out):
   *   a live pod's IP is never unassigned;
   * - `releasing`: the IP's unassign was already sent to EC2 (it cannot be called back).
   *   The allocation is recorded at once (the IP stays unavailable to anyone else) and
   *   EC2's answer decides: the unassign failed or EC2 still shows the IP →
   *   {@link cancelRelease} and it is plainly assigned; EC2 took it →
   *   {@link completeRelease} turns the allocation `pending` and reports it. The caller
   *   should log this loudly: ipamd released an address a pod is using;
   * - `pending`: the IP is on no known ENI yet (IMDS/EC2 lag): the allocation is kept
   *   and the IP becomes assigned the moment {@link addIps} adds it;
   * - `duplicate-key`: the key already holds an address (left as is);
   * - `ip-taken`: another key holds that IP (left as is; the caller logs the conflict).
   */
  restoreAllocation(a: Allocation): RestoreResult {
    const ks = keyString(a);
    if (this.allocationsByKey.has(ks)) return 'duplicate-key';
    const r = this.ipIndex.get(a.ipv4);
    if (!r) {
      if (this.pendingByIp.has(a.ipv4)) return 'ip-taken';
      const copy = { ...a };
      this.pendingByIp.set(a.ipv4, copy);
      this.allocationsByKey.set(ks, copy);
      this.changes.key(ks, a);
      return 'pending';
    }
    if (r.holder !== undefined) return 'ip-taken';
    r.holder = ks;
    r.unverified = false;
    r.releasedAt = undefined;
    this.allocationsByKey.set(ks, { ...a, eniId: r.eniId });
    this.changes.key(ks, a);
    this.changes.ip(r.ip);
    this.forgetUnassigned(a.containerID);
    if (r.releasing === 'sent') return 'releasing';
    r.releasing = false;
    return 'restored';
  }

  /**
   * EC2 confirmed these addresses are gone (an unassign it answered, or a describe that
   * settled one of unknown outcome): they leave the datastore whatever their state.
   * An allocation holding one (adopted while the unassign was in flight, see
   * {@link restoreAllocation}) is kept, never dropped, but becomes pending: never handed
   * out, a repeated ADD is refused, and it is assigned again if EC2 ever puts the
   * address back on one of our ENIs.
   * @returns those allocations (copies), for the caller to report as conflicts.
   */
  completeRelease(ips: readonly string[]): Allocation[] {
    const lost: Allocation[] = [];
    for (const ip of ips) {
      const r = this.ipIndex.get(ip);
      if (!r) continue;
      const held = r.holder === undefined ? undefined : this.allocationsByKey.get(r.holder);
      if (held) {
        this.pendingByIp.set(ip, held);
        lost.push({ ...held });
      }
      this.dropAddress(r);
    }
    return lost;
  }

  /** {@link completeRelease} for whole /28 prefixes EC2 confirmed gone. @returns the allocations made pending. */
  completePrefixRelease(prefixes: readonly string[]): Allocation[] {
    return prefixes.flatMap((p) => {
      const rec = this.recordOfPrefix(p);
      return rec ? this.completeRelease([...(rec.prefixes.get(p) ?? [])]) : [];
    });
  }

  /**
   * True if an attachment of `containerID` was unassigned (CNI DEL or GC) and none was
   * assigned or restored for it since. The evidence pass never adopts such a sandbox: a
   * runtime still listing it READY with its IP is a snapshot from before the DEL, or a
   * StopPodSandbox in progress (CNI DEL comes first). Bounded ({@link RELEASED_CONTAINERS_KEPT});
   * kept in the checkpoint ({@link unassignedEntries}), expired by {@link expireUnassigned}.
   */
  wasUnassigned(containerID: string): boolean {
    return this.releasedContainers.has(containerID);
  }

  /** Remembers `containerID` as unassigned at `at` (ms), newest last, forgetting the oldest beyond {@link RELEASED_CONTAINERS_KEPT}. */
  private rememberUnassigned(containerID: string, at: number): void {
    this.releasedContainers.remember(containerID, at);
  }

  /** Forgets the remembered DEL of `containerID`, if any. */
  private forgetUnassigned(containerID: string): void {
    this.releasedContainers.forget(containerID);
  }

  /**
   * The remembered unassigned containers ({@link wasUnassigned}), oldest first, for the
   * checkpoint (docs/design.md#13-evidence-before-trust item 5: the memory of DELs survives a restart). At most
   * {@link RELEASED_CONTAINERS_KEPT}; `releasedAt` in ms since epoch. The same (frozen)
   * array is returned until the remembered set changes, so a caller can tell "unchanged" by identity.
   */
  unassignedEntries(): ReadonlyArray<UnassignedEntry> {
    return this.releasedContainers.entries();
  }

  /**
   * Restores remembered unassigned containers from this boot's checkpoint (call before
   * restoring its allocations: an allocation restored for the same container wins, as an
   * assignment after the DEL would). Order is by `releasedAt`; beyond
   * {@link RELEASED_CONTAINERS_KEPT} the oldest are forgotten. Entries already known keep the newer time.
   */
  restoreUnassigned(entries: ReadonlyArray<UnassignedEntry>): void {
    const all = [...entries, ...this.unassignedEntries()].sort((a, b) => a.releasedAt - b.releasedAt);
    for (const e of all)
      this.rememberUnassigned(e.containerID, Math.max(e.releasedAt, this.releasedContainers.get(e.containerID) ?? 0));
  }

  /**
   * Forgets unassigned containers the runtime no longer lists: an entry expires when a
   * successful runtime read (`listed`: the READY sandbox ids it returned) does not list
   * it and it was unassigned at or before `releasedBefore` (ms; the caller passes now − GC
   * grace, so a read started before the DEL cannot expire it). A sandbox still stopping is
   * still listed, so its entry stays. @returns how many entries were forgotten.
   */
  expireUnassigned(listed: ReadonlySet<string>, releasedBefore: number): number {
    return this.releasedContainers.forgetWhere((id, at) => !listed.has(id) && at <= releasedBefore);
  }

  /**
   * Marks a known, unheld IP as cooling since `releasedAt` (a restored cooldown entry, ms).
   * A `releasedAt` after `now` (written by a process whose clock ran ahead: the wall clock
   * stepped back across the restart) is taken as `now`, so a restored cooldown lasts at most
   * its period (docs/design.md#time).
   */
  restoreCooldown(ip: string, releasedAt: number, now: number): void {
    const r = this.ipIndex.get(ip);
    if (r && r.holder === undefined) {
      r.releasedAt = Math.min(releasedAt, now);
      this.changes.ip(ip);
    }
  }

  /**
   * Starts recording changes for {@link takeChanges} (the checkpoint writer calls it once,
   * before its first snapshot; off by default so a datastore nobody persists keeps no log).
   */
  trackChanges(): void {
    this.changes.enabled = true;
  }

  /**
   * What changed since the last call (or since {@link trackChanges}), read from the current
   * state, and forgets it: O(changes). Empty lists when nothing changed. See {@link DatastoreDelta}.
   */
  takeChanges(): DatastoreDelta {
    const ids = this.changes.take();
    const d: DatastoreDelta = { put: [], del: [], cool: [], uncool: [], rel: [], unrel: [] };
    for (const [ks, k] of ids.keys) {
      const a = this.allocationsByKey.get(ks);
      if (a) d.put.push({ ...a });
      else d.del.push(k);
    }
    for (const ip of ids.ips) {
      const at = journalCooldownOf(this.ipIndex.get(ip));
      if (at === undefined) d.uncool.push(ip);
      else d.cool.push({ ip, releasedAt: at });
    }
    for (const id of ids.released) {
      const at = this.releasedContainers.get(id);
      if (at === undefined) d.unrel.push(id);
      else d.rel.push({ containerID: id, releasedAt: at });
    }
    return d;
  }

  /** How many DELs are remembered ({@link wasUnassigned}). */
  unassignedCount(): number {
    return this.releasedContainers.size;
  }

  /** The allocation of `key`, or undefined. */
  lookup(key: AllocationKey): Allocation | undefined {
    const a = this.allocationsByKey.get(keyString(key));
    return a ? { ...a } : undefined;
  }

  /** The allocation holding `ip`, or undefined. */
  holderOf(ip: string): Allocation | undefined {
    const r = this.ipIndex.get(ip);
    const ks = r?.holder ?? (this.pendingByIp.has(ip) ? keyString(this.pendingByIp.get(ip)!) : undefined);
    const a = ks === undefined ? undefined : this.allocationsByKey.get(ks);
    return a ? { ...a } : undefined;
  }
  /** All allocations (copies), including pending ones. */
  allocations(): Allocation[] {
    return [...this.allocationsByKey.values()].map((a) => ({ ...a }));
  }

  /** Allocations whose IP is on no known ENI yet. */
  pendingAllocations(): Allocation[] {
    return [...this.pendingByIp.values()].map((a) => ({ ...a }));
  }

  /**
   * Quarantines `ip` (docs/design.md#13-evidence-before-trust item 4): the plugin found the node already routing it to
   * another pod's veth, so some live pod uses it while ipamd thought it free. From now on
   * it is never handed out and never released (state `unverified`, whether or not it is
   * held) until {@link liftQuarantine}. Re-quarantining keeps the first `since`.
   * @returns false when the address is not on any known ENI (nothing to keep out).
   */
  quarantine(ip: string, now: number, reason: string): boolean {
    const r = this.ipIndex.get(ip);
    if (!r) return false;
    r.quarantined ??= { since: now, reason };
    return true;
  }

  /** Ends the quarantine of `ip` (the conflict is gone). @returns true if it was quarantined. */
  liftQuarantine(ip: string): boolean {
    const r = this.ipIndex.get(ip);
    if (!r?.quarantined) return false;
    r.quarantined = undefined;
    this.addressesMayBeAvailable();
    return true;
  }

  /** Quarantined addresses (ms since epoch of `since`), sorted by IP. */
  quarantined(): Array<{ ip: string; eniId: string; since: number; reason: string }> {
    return [...this.ipIndex.values()]
      .filter((r) => r.quarantined)
      .map((r) => ({ ip: r.ip, eniId: r.eniId, ...r.quarantined! }))
      .sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0));
  }
}
