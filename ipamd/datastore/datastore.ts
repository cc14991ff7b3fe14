/**
 * The datastore: which addresses the node holds (secondary IPs, and the 16 addresses of
 * each /28 prefix with prefix delegation), on which ENI, and which attachment holds each.
 * Pure and synchronous — no I/O, no timers; time is passed in as `now` (ms since epoch).
 * ipamd's single process is its only writer (docs/design.md#8-lessons-the-field-paid-for). A /28 prefix is unassigned
 * only whole, and only when none of its 16 addresses is assigned, cooling, unverified
 * or releasing ({@link Datastore.reservePrefixesForRelease}).
 *
 * Address states (available, assigned, cooling, releasing, unverified) and what moves an
 * address between them: records.ts.
 *
 * Built by composition (docs/architecture.md#the-datastore): each part owns one piece of
 * state — ENIs and addresses (address-table.ts), /28 prefixes (prefix-table.ts),
 * allocations (allocation-table.ts), pending allocations (pending.ts), the cooldown
 * period (cooldown.ts), quarantine (quarantine-list.ts), release phases
 * (release-phases.ts), remembered unassigned containers (released-containers.ts), the
 * change log and journal (changes.ts, journal.ts), the availability signal
 * (availability.ts) — and {@link Datastore} wires them and implements every role of
 * roles.ts by delegation.
 */
import { AddressTable } from './address-table.js';
import { AllocationTable } from './allocation-table.js';
import { AvailabilitySignal } from './availability.js';
import { ChangeLog } from './changes.js';
import { Cooldown, type CooldownReuses } from './cooldown.js';
import type { ReuseEvidence } from './reuse-evidence.js';
import { Journal } from './journal.js';
import { PendingAllocations } from './pending.js';
import { PrefixTable } from './prefix-table.js';
import { QuarantineList } from './quarantine-list.js';
import { ReleasedContainers } from './released-containers.js';
import { Releases } from './release-phases.js';
import type { AllocationUnit, PoolEniView } from '../pool/types.js';
import type { Allocation, AllocationKey, DatastoreCounts, EniInfo, IpState, PodRef } from './types.js';
import type {
  AssignResult,
  Assignments,
  ChangeJournal,
  CooldownEvidence,
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
 * In-memory ENI/IP/allocation store: the facade over the parts named in the module
 * docstring. Every method delegates to the part that owns the state; the behaviour and
 * its documentation are there (and each method's contract in roles.ts). Consumers are
 * handed the roles they need, not the class (only the daemon's wiring, start-up, benches
 * and tests construct and hold it whole).
 */
export class Datastore
  implements
    Assignments,
    PoolCounts,
    ReleasePhases,
    EniInventory,
    RestoreTarget,
    Quarantine,
    ChangeJournal,
    DatastoreViews,
    CooldownEvidence
{
  private readonly changes = new ChangeLog();
  private readonly signal = new AvailabilitySignal();
  private readonly cooldown: Cooldown;
  private readonly pending = new PendingAllocations(this.changes);
  private readonly unassigned = new ReleasedContainers((id) => this.changes.released(id));
  private readonly addresses: AddressTable;
  private readonly prefixes: PrefixTable;
  private readonly allocationTable: AllocationTable;
  private readonly releases: Releases;
  private readonly quarantines: QuarantineList;
  private readonly journal: Journal;

  /**
   * @param cooldownMs IP_COOLDOWN_PERIOD in ms (≥ 0).
   * @param unit `'ip'` (secondary IPs) or `'prefix'` (/28 prefixes, ENABLE_PREFIX_DELEGATION);
   *        only changes the units of {@link poolViews}.
   * @param o `primaryServesNewPods: false` under custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG):
   *        the primary ENI's addresses serve no new pod and its unheld ones are out of the
   *        pool ({@link AddressTable.closedToNewPods}, {@link AddressTable.counts}). Default true.
   * @throws RangeError if `cooldownMs` is negative or NaN.
   */
  constructor(cooldownMs: number, unit: AllocationUnit = 'ip', o: { primaryServesNewPods?: boolean } = {}) {
    const { changes, signal, pending, unassigned } = this;
    const cooldown = (this.cooldown = new Cooldown(cooldownMs, changes));
    const primaryServesNewPods = o.primaryServesNewPods !== false; // custom networking: false
    const addresses = new AddressTable({ cooldown, pending, changes, signal, unit, primaryServesNewPods });
    const prefixes = new PrefixTable(addresses, changes, signal);
    const allocations = new AllocationTable({ addresses, pending, unassigned, changes, signal, cooldown });
    this.addresses = addresses;
    this.prefixes = prefixes;
    this.allocationTable = allocations;
    this.releases = new Releases({ addresses, prefixes, allocations, pending, signal });
    this.quarantines = new QuarantineList(addresses, signal);
    this.journal = new Journal({ changes, addresses, allocations, unassigned });
  }

  // Assignments (allocation-table.ts; quarantine and getEni below)
  /** @see AllocationTable.assign */
  assign(key: AllocationKey, pod: PodRef | undefined, now: number): AssignResult {
    return this.allocationTable.assign(key, pod, now);
  }
  /** @see AllocationTable.unassign */
  unassign(key: AllocationKey, now: number): Allocation | undefined {
    return this.allocationTable.unassign(key, now);
  }
  /** @see AllocationTable.rollbackAssign */
  rollbackAssign(allocation: Allocation): boolean {
    return this.allocationTable.rollbackAssign(allocation);
  }
  /** @see AllocationTable.rollbackUnassign */
  rollbackUnassign(allocation: Allocation): boolean {
    return this.allocationTable.rollbackUnassign(allocation);
  }
  /** @see AllocationTable.lookup */
  lookup(key: AllocationKey): Allocation | undefined {
    return this.allocationTable.lookup(key);
  }
  /** @see AllocationTable.allocations */
  allocations(): Allocation[] {
    return this.allocationTable.allocations();
  }
  /** True if `containerID` was unassigned (DEL, GC) and nothing assigned since. @see ReleasedContainers.has */
  wasUnassigned(containerID: string): boolean {
    return this.unassigned.has(containerID);
  }

  // PoolCounts (address-table.ts, cooldown.ts, availability.ts)
  /** @see AddressTable.counts */
  counts(now: number): DatastoreCounts {
    return this.addresses.counts(now);
  }
  /** @see AddressTable.poolViews */
  poolViews(now: number): PoolEniView[] {
    return this.addresses.poolViews(now);
  }
  /** When the earliest cooling address becomes available (ms), or undefined if none cools. */
  nextCooldownEnd(now: number): number | undefined {
    return this.cooldown.nextEnd(this.addresses.records(), now);
  }
  /** @see AvailabilitySignal.listen */
  onAddressesAvailable(fn: () => void): void {
    this.signal.listen(fn);
  }

  // CooldownEvidence (cooldown.ts, reuse-evidence.ts; docs/design.md#cooldown-that-ends-on-evidence)
  /** @see Cooldown.useEvidence */
  useReuseEvidence(evidence: ReuseEvidence, allowanceMs: number): void {
    this.cooldown.useEvidence(evidence, allowanceMs);
  }
  /**
   * The evidence changed in a way that may end a cooldown now (a removal's allowance ran
   * out, the watch synced): tells the availability listener, so waiting ADDs try again.
   */
  reuseEvidenceChanged(): void {
    this.signal.notify();
  }
  /** @see Cooldown.reuseCounts */
  cooldownReuses(): CooldownReuses {
    return this.cooldown.reuseCounts();
  }

  // ReleasePhases (release-phases.ts)
  /** @see Releases.reserveForRelease */
  reserveForRelease(eniId: string, count: number, now: number): string[] {
    return this.releases.reserveForRelease(eniId, count, now);
  }
  /** @see Releases.reserveAllForRelease */
  reserveAllForRelease(eniId: string, now: number): string[] {
    return this.releases.reserveAllForRelease(eniId, now);
  }
  /** @see Releases.reservePrefixesForRelease */
  reservePrefixesForRelease(eniId: string, count: number, now: number): string[] {
    return this.releases.reservePrefixesForRelease(eniId, count, now);
  }
  /** @see Releases.markReleaseSent */
  markReleaseSent(ips: readonly string[]): string[] {
    return this.releases.markReleaseSent(ips);
  }
  /** @see Releases.markPrefixReleaseSent */
  markPrefixReleaseSent(prefixes: readonly string[]): string[] {
    return this.releases.markPrefixReleaseSent(prefixes);
  }
  /** @see Releases.cancelRelease */
  cancelRelease(ips: readonly string[]): void {
    this.releases.cancelRelease(ips);
  }
  /** @see Releases.cancelPrefixRelease */
  cancelPrefixRelease(prefixes: readonly string[]): void {
    this.releases.cancelPrefixRelease(prefixes);
  }
  /** @see Releases.completeRelease */
  completeRelease(ips: readonly string[]): Allocation[] {
    return this.releases.completeRelease(ips);
  }
  /** @see Releases.completePrefixRelease */
  completePrefixRelease(prefixes: readonly string[]): Allocation[] {
    return this.releases.completePrefixRelease(prefixes);
  }

  // EniInventory (address-table.ts, prefix-table.ts)
  /** @see AddressTable.upsertEni */
  upsertEni(info: EniInfo): void {
    this.addresses.upsertEni(info);
  }
  /** @see AddressTable.addIps */
  addIps(eniId: string, ips: readonly string[]): void {
    this.addresses.addIps(eniId, ips);
  }
  /** @see PrefixTable.addPrefixes */
  addPrefixes(eniId: string, prefixes: readonly string[]): void {
    this.prefixes.addPrefixes(eniId, prefixes);
  }
  /** @see AddressTable.removeEni */
  removeEni(eniId: string, now: number): void {
    this.addresses.removeEni(eniId, now);
  }
  /** @see AddressTable.removeIps */
  removeIps(ips: readonly string[], now: number): string[] {
    return this.addresses.removeIps(ips, now);
  }
  /** @see PrefixTable.removePrefixes */
  removePrefixes(prefixes: readonly string[], now: number): string[] {
    return this.prefixes.removePrefixes(prefixes, now);
  }
  /** @see AddressTable.getEni */
  getEni(eniId: string): EniInfo | undefined {
    return this.addresses.getEni(eniId);
  }
  /** @see AddressTable.listEnis */
  listEnis(): EniInfo[] {
    return this.addresses.listEnis();
  }
  /** @see AddressTable.eniIps */
  eniIps(eniId: string): string[] {
    return this.addresses.eniIps(eniId);
  }
  /** @see PrefixTable.eniPrefixes */
  eniPrefixes(eniId: string): string[] {
    return this.prefixes.eniPrefixes(eniId);
  }
  /** @see PrefixTable.prefixOf */
  prefixOf(ip: string): string | undefined {
    return this.prefixes.prefixOf(ip);
  }
  /** @see AddressTable.ipState */
  ipState(ip: string, now: number): IpState | undefined {
    return this.addresses.ipState(ip, now);
  }
  /** @see AddressTable.closedToNewPods */
  closedToNewPods(info: EniInfo): boolean {
    return this.addresses.closedToNewPods(info);
  }

  // RestoreTarget (allocation-table.ts, released-containers.ts, cooldown.ts, address-table.ts, pending.ts)
  /** @see AllocationTable.restoreAllocation */
  restoreAllocation(a: Allocation): RestoreResult {
    return this.allocationTable.restoreAllocation(a);
  }
  /** @see ReleasedContainers.restore */
  restoreUnassigned(entries: ReadonlyArray<UnassignedEntry>): void {
    this.unassigned.restore(entries);
  }
  /** @see Cooldown.restore */
  restoreCooldown(ip: string, releasedAt: number, now: number): void {
    this.cooldown.restore(this.addresses.record(ip), releasedAt, now);
  }
  /** @see AddressTable.markAllUnverified */
  markAllUnverified(): number {
    return this.addresses.markAllUnverified();
  }
  /** @see AddressTable.unverifiedIps */
  unverifiedIps(): string[] {
    return this.addresses.unverifiedIps();
  }
  /** @see AddressTable.verifyAll */
  verifyAll(keep?: (ip: string) => boolean): number {
    return this.addresses.verifyAll(keep);
  }
  /** @see ReleasedContainers.expire */
  expireUnassigned(listed: ReadonlySet<string>, releasedBefore: number): number {
    return this.unassigned.expire(listed, releasedBefore);
  }
  /** Allocations whose IP is on no known ENI yet (copies). */
  pendingAllocations(): Allocation[] {
    return this.pending.list();
  }
  /** @see AllocationTable.holderOf */
  holderOf(ip: string): Allocation | undefined {
    return this.allocationTable.holderOf(ip);
  }

  // Quarantine (quarantine-list.ts)
  /** @see QuarantineList.quarantine */
  quarantine(ip: string, now: number, reason: string): boolean {
    return this.quarantines.quarantine(ip, now, reason);
  }
  /** @see QuarantineList.liftQuarantine */
  liftQuarantine(ip: string): boolean {
    return this.quarantines.liftQuarantine(ip);
  }
  /** @see QuarantineList.quarantined */
  quarantined(): Array<{ ip: string; eniId: string; since: number; reason: string }> {
    return this.quarantines.quarantined();
  }

  // ChangeJournal (journal.ts; allocations above)
  /** @see Journal.trackChanges */
  trackChanges(): void {
    this.journal.trackChanges();
  }
  /** @see Journal.takeChanges */
  takeChanges(): DatastoreDelta {
    return this.journal.takeChanges();
  }
  /** Addresses cooling at `now`, with their release time (for the checkpoint snapshot). */
  coolingEntries(now: number): Array<{ ip: string; releasedAt: number }> {
    return this.cooldown.entries(this.addresses.records(), now);
  }
  /** The remembered unassigned containers, oldest first (the same frozen array until they change). */
  unassignedEntries(): ReadonlyArray<UnassignedEntry> {
    return this.unassigned.entries();
  }
  /** How many unassigned containers are remembered. */
  unassignedCount(): number {
    return this.unassigned.size;
  }
}
