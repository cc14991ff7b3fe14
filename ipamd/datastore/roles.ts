/**
 * The datastore's roles: what each kind of consumer may do with it, as narrow interfaces
 * (the {@link Datastore} class implements them all; a consumer's options name the roles it
 * needs, never the class). Pure types; times are ms (ipamd's monotonic clock, epoch scale).
 *
 * Two words, one meaning each:
 * - **assign / unassign**: an attachment (a pod's CNI ADD, DEL, GC) takes an address from
 *   the pool or gives it back into cooldown — {@link Assignments};
 * - **release**: addresses leave the node for EC2 (UnassignPrivateIpAddresses of IPs or
 *   /28 prefixes, an ENI detached), in phases: reserved → sent → completed or cancelled —
 *   {@link ReleasePhases}.
 *
 * | role | consumers |
 * |---|---|
 * | {@link Assignments} | the request path (`service/`), the DEL spool, CNI GC |
 * | {@link PoolCounts} | the pool controller, CNI STATUS, the ADD failure explanation |
 * | {@link ReleasePhases} | the shrink executor, the prefix releaser, the ENI free |
 * | {@link EniInventory} | discovery, the ENI manager, the grow executor, the EC2/IMDS reconcile |
 * | {@link RestoreTarget} | the checkpoint restore and the evidence reconcile (`restore/`) |
 * | {@link Quarantine} | the quarantine check (the request path quarantines through {@link Assignments}) |
 * | {@link ChangeJournal} | the checkpoint writer |
 * | {@link DatastoreViews} | observability (metrics, introspection, status), the inventory cache, host networking |
 * | {@link CooldownEvidence} | the EndpointSlice watch that may end a cooldown early (issue 41) |
 */
import type { PoolEniView } from '../pool/types.js';
import type { Allocation, AllocationKey, DatastoreCounts, EniInfo, IpState, PodRef } from './types.js';
import type { ReuseEvidence } from './reuse-evidence.js';

/**
 * The EndpointSlice evidence that may end a cooldown before IP_COOLDOWN_PERIOD
 * (docs/design.md#cooldown-that-ends-on-evidence).
 */
export interface CooldownEvidence {
  /** Reads `evidence` on every reuse question from now on; `allowanceMs` is ENI_IPAM_PROXY_SYNC_ALLOWANCE (ms). */
  useReuseEvidence(evidence: ReuseEvidence, allowanceMs: number): void;
  /** The evidence may have ended a cooldown now: waiting ADDs try again. */
  reuseEvidenceChanged(): void;
}

/** Result of {@link Assignments.assign}. */
export type AssignResult =
  | { kind: 'assigned'; allocation: Allocation; eni: EniInfo }
  | { kind: 'existing'; allocation: Allocation; eni: EniInfo }
  /** The key holds a restored address that is on no known ENI yet (EC2/IMDS lag). */
  | { kind: 'pending'; allocation: Allocation }
  | { kind: 'empty' };

/** Result of {@link RestoreTarget.restoreAllocation}. */
export type RestoreResult = 'restored' | 'releasing' | 'pending' | 'duplicate-key' | 'ip-taken';

/**
 * What changed since the last {@link ChangeJournal.takeChanges}, with the current values
 * (docs/design.md#16-footprint-and-latency): allocations put (upserted) or deleted by key,
 * cooldown entries set or removed by IP (see changes.ts for which entries), remembered
 * unassigned containers set (oldest first: each is now newer than every one remembered and
 * not listed) or forgotten. Times in ms since epoch.
 */
export interface DatastoreDelta {
  put: Allocation[];
  del: AllocationKey[];
  cool: Array<{ ip: string; releasedAt: number }>;
  uncool: string[];
  rel: Array<{ containerID: string; releasedAt: number }>;
  unrel: string[];
}

/** A remembered unassigned container (a DEL or GC served), `releasedAt` in ms. */
export interface UnassignedEntry {
  containerID: string;
  releasedAt: number;
}

/** The pool's counts at `now` (ms), and the signal that addresses may have become available. */
export interface PoolCounts {
  /** Counts at `now` over all ENIs. */
  counts(now: number): DatastoreCounts;
  /** Per-ENI counts for the pure pool decisions, in addresses (see views.ts). */
  poolViews(now: number): PoolEniView[];
  /** When the earliest cooling address becomes available (ms), or undefined if none cools. */
  nextCooldownEnd(now: number): number | undefined;
  /** Sets the one listener told (synchronously) whenever addresses may have become available. Must not throw. */
  onAddressesAvailable(fn: () => void): void;
}

/** An attachment takes or gives back an address (ADD, DEL, GC), and what it holds. */
export interface Assignments {
  /** Assigns an address to `key` (idempotent: `existing` for a key that holds one). */
  assign(key: AllocationKey, pod: PodRef | undefined, now: number): AssignResult;
  /** Gives `key`'s address back into cooldown; remembers the container as unassigned. @returns the allocation, or undefined. */
  unassign(key: AllocationKey, now: number): Allocation | undefined;
  /** Undoes an assignment whose checkpoint write failed (the address is available at once). @returns true if undone. */
  rollbackAssign(allocation: Allocation): boolean;
  /** Puts back an allocation whose unassign could not be made durable. @returns false if the address was taken meanwhile. */
  rollbackUnassign(allocation: Allocation): boolean;
  /** The allocation of `key`, or undefined. */
  lookup(key: AllocationKey): Allocation | undefined;
  /** All allocations (copies), pending ones included. */
  allocations(): Allocation[];
  /** True if `containerID` was unassigned (DEL, GC) and nothing was assigned to it since. */
  wasUnassigned(containerID: string): boolean;
  /** Keeps `ip` out of every hand-out and release (an ADD found it routed to another pod). @returns false for an unknown IP. */
  quarantine(ip: string, now: number, reason: string): boolean;
  /** The ENI's info, or undefined. */
  getEni(eniId: string): EniInfo | undefined;
}

/** Addresses leaving the node for EC2, in phases: reserve → mark sent → complete, or cancel. */
export interface ReleasePhases {
  /** Reserves up to `count` available secondary IPs of an ENI. @returns the IPs reserved. @throws Error for an unknown ENI. */
  reserveForRelease(eniId: string, count: number, now: number): string[];
  /** Reserves every available address of an ENI (prefix addresses included) for its free. @throws Error for an unknown ENI. */
  reserveAllForRelease(eniId: string, now: number): string[];
  /** Reserves up to `count` wholly free /28 prefixes of an ENI. @throws Error for an unknown ENI. */
  reservePrefixesForRelease(eniId: string, count: number, now: number): string[];
  /** Marks reserved IPs sent, right before the EC2 call; @returns those still reserved (only these may be sent). */
  markReleaseSent(ips: readonly string[]): string[];
  /** {@link markReleaseSent} for /28 prefixes. */
  markPrefixReleaseSent(prefixes: readonly string[]): string[];
  /** Returns reserved IPs to the pool (the EC2 call failed for sure, was cancelled, or EC2 still shows them). */
  cancelRelease(ips: readonly string[]): void;
  /** {@link cancelRelease} for /28 prefixes. */
  cancelPrefixRelease(prefixes: readonly string[]): void;
  /** EC2 confirmed these addresses gone; @returns the allocations that held one, now pending (conflicts to report). */
  completeRelease(ips: readonly string[]): Allocation[];
  /** {@link completeRelease} for /28 prefixes. */
  completePrefixRelease(prefixes: readonly string[]): Allocation[];
}

/** The ENIs and addresses the node holds, as EC2 and IMDS show them. */
export interface EniInventory {
  /** Adds an ENI or refreshes a known one's metadata. */
  upsertEni(info: EniInfo): void;
  /** Adds secondary IPs to a known ENI. @throws Error for an unknown ENI or an IP on another ENI. */
  addIps(eniId: string, ips: readonly string[]): void;
  /** Adds /28 prefixes to a known ENI. @throws Error for an unknown ENI, a bad prefix or a known address. */
  addPrefixes(eniId: string, prefixes: readonly string[]): void;
  /** Removes an ENI holding only available addresses. @throws Error naming what it still holds. */
  removeEni(eniId: string, now: number): void;
  /** Forgets addresses EC2 no longer holds; @returns those kept because they are in use. */
  removeIps(ips: readonly string[], now: number): string[];
  /** Forgets /28 prefixes EC2 no longer holds; @returns those kept because an address is in use. */
  removePrefixes(prefixes: readonly string[], now: number): string[];
  /** The ENI's info, or undefined. */
  getEni(eniId: string): EniInfo | undefined;
  /** All ENIs, by device number. */
  listEnis(): EniInfo[];
  /** Addresses on an ENI (any state), sorted. @throws Error for an unknown ENI. */
  eniIps(eniId: string): string[];
  /** /28 prefixes on an ENI (any state), sorted. @throws Error for an unknown ENI. */
  eniPrefixes(eniId: string): string[];
  /** The /28 prefix an address belongs to, or undefined. */
  prefixOf(ip: string): string | undefined;
  /** State of a known address at `now`, or undefined. */
  ipState(ip: string, now: number): IpState | undefined;
  /** True when `info`'s addresses serve no new pod (custom networking's primary ENI). */
  closedToNewPods(info: EniInfo): boolean;
}

/** Putting back what the node held before a restart, and settling it against the evidence. */
export interface RestoreTarget {
  /** Re-creates an allocation from a restore source; see the result's cases in allocation-table.ts. */
  restoreAllocation(a: Allocation): RestoreResult;
  /** Restores remembered unassigned containers (before the allocations). */
  restoreUnassigned(entries: ReadonlyArray<UnassignedEntry>): void;
  /** Marks a known, unheld IP cooling since `releasedAt` (clamped to `now`). */
  restoreCooldown(ip: string, releasedAt: number, now: number): void;
  /** Marks every unheld address unverified (no usable checkpoint). @returns how many. */
  markAllUnverified(): number;
  /** The addresses marked unverified now. */
  unverifiedIps(): string[];
  /** Clears `unverified` except where `keep(ip)`. @returns how many were cleared. */
  verifyAll(keep?: (ip: string) => boolean): number;
  /** Forgets unassigned containers a runtime read no longer lists, unassigned at or before `releasedBefore` (ms). @returns how many. */
  expireUnassigned(listed: ReadonlySet<string>, releasedBefore: number): number;
  /** Allocations whose address is on no known ENI yet. */
  pendingAllocations(): Allocation[];
  /** The allocation holding `ip`, or undefined. */
  holderOf(ip: string): Allocation | undefined;
}

/** Addresses a live pod was found using while ipamd thought them free (docs/design.md#13-evidence-before-trust). */
export interface Quarantine {
  /** Keeps `ip` out of every hand-out and release. @returns false for an unknown IP. */
  quarantine(ip: string, now: number, reason: string): boolean;
  /** Ends the quarantine of `ip`. @returns true if it was quarantined. */
  liftQuarantine(ip: string): boolean;
  /** Quarantined addresses (`since` in ms), sorted by IP. */
  quarantined(): Array<{ ip: string; eniId: string; since: number; reason: string }>;
}

/** What the checkpoint writer reads: a full snapshot, then the changes since the last one. */
export interface ChangeJournal {
  /** Starts recording changes (once, before the first snapshot). */
  trackChanges(): void;
  /** What changed since the last call, and forgets it. */
  takeChanges(): DatastoreDelta;
  /** All allocations (copies). */
  allocations(): Allocation[];
  /** Addresses cooling at `now`, with their release time. */
  coolingEntries(now: number): Array<{ ip: string; releasedAt: number }>;
  /** Remembered unassigned containers, oldest first (the same frozen array until they change). */
  unassignedEntries(): ReadonlyArray<UnassignedEntry>;
  /** How many unassigned containers are remembered. */
  unassignedCount(): number;
}

/** Everything observability may read; nothing it may change. */
export interface DatastoreViews extends Omit<PoolCounts, 'onAddressesAvailable'> {
  getEni(eniId: string): EniInfo | undefined;
  listEnis(): EniInfo[];
  eniIps(eniId: string): string[];
  eniPrefixes(eniId: string): string[];
  prefixOf(ip: string): string | undefined;
  ipState(ip: string, now: number): IpState | undefined;
  closedToNewPods(info: EniInfo): boolean;
  lookup(key: AllocationKey): Allocation | undefined;
  allocations(): Allocation[];
  pendingAllocations(): Allocation[];
  holderOf(ip: string): Allocation | undefined;
  coolingEntries(now: number): Array<{ ip: string; releasedAt: number }>;
  unverifiedIps(): string[];
  quarantined(): Array<{ ip: string; eniId: string; since: number; reason: string }>;
  unassignedCount(): number;
  /** Addresses ADDs took after a cooldown since start, by what ended it (timer, or the EndpointSlice evidence). */
  cooldownReuses(): { timer: number; evidence: number };
}
