/**
 * The ENI/address table: the ENIs the node holds and their addresses (secondary IPs and
 * the 16 addresses of each /28 prefix), one record per address with its state fields
 * (records.ts), and the counts and pool views read from them. Pure and synchronous; time
 * is passed in as `now` (ms since epoch). See datastore.ts for the address states.
 */
import type { AllocationUnit, PoolEniView } from '../pool/types.js';
import type { StateFn } from './prefixes.js';
import type { AvailabilitySignal } from './availability.js';
import type { ChangeLog } from './changes.js';
import type { Cooldown } from './cooldown.js';
import type { PendingAllocations } from './pending.js';
import type { EniRecord, IpRecord } from './records.js';
import type { DatastoreCounts, EniInfo, IpState } from './types.js';
import { poolViewOf } from './views.js';
import { clearUnverified, countAddresses, markUnheldUnverified, unverifiedOf } from './address-scan.js';

/** What an {@link AddressTable} works with (the datastore's other parts, wired by datastore.ts). */
export interface AddressTableParts {
  cooldown: Cooldown;
  pending: PendingAllocations;
  changes: ChangeLog;
  signal: AvailabilitySignal;
  /** What the pool assigns: `'ip'` or `'prefix'` (ENABLE_PREFIX_DELEGATION); only changes the units of pool views. */
  unit: AllocationUnit;
  /**
   * False under custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): the primary ENI's
   * addresses are never handed to a new pod, and those held by nobody are left out of the
   * pool (not in `total` or `available` of {@link AddressTable.counts} and
   * {@link AddressTable.poolViews}; the ENI has no room for more). Addresses on it that
   * are held (restored allocations) stay assigned and are served to their keys until released.
   */
  primaryServesNewPods: boolean;
}

/** ENIs and their address records; the one owner of both maps. */
export class AddressTable {
  private readonly enisById = new Map<string, EniRecord>();
  private readonly ipIndex = new Map<string, IpRecord>();

  constructor(private readonly p: AddressTableParts) {}

  /** True when `info`'s addresses serve no new pod (the primary ENI under custom networking). */
  closedToNewPods(info: EniInfo): boolean {
    return !this.p.primaryServesNewPods && info.isPrimary;
  }

  /** Adds an ENI, or refreshes the metadata of a known one (its IPs are kept). */
  upsertEni(info: EniInfo): void {
    const rec = this.enisById.get(info.eniId);
    if (rec) rec.info = { ...info };
    else this.enisById.set(info.eniId, { info: { ...info }, ips: new Map(), prefixes: new Map() });
  }

  /** The ENI's info, or undefined. */
  getEni(eniId: string): EniInfo | undefined {
    return this.enisById.get(eniId)?.info;
  }

  /** All ENIs, by device number. */
  listEnis(): EniInfo[] {
    return [...this.enisById.values()].map((r) => r.info).sort((a, b) => a.deviceNumber - b.deviceNumber);
  }

  /** The ENI records (live, not copies), by device number. */
  enisByDevice(): EniRecord[] {
    return [...this.enisById.values()].sort((a, b) => a.info.deviceNumber - b.info.deviceNumber);
  }

  /** The ENI records (live), in insertion order. */
  eniRecords(): IterableIterator<EniRecord> {
    return this.enisById.values();
  }

  /** Addresses on an ENI (any state; secondary IPs and prefix addresses), sorted. @throws Error if the ENI is unknown. */
  eniIps(eniId: string): string[] {
    return [...this.mustEni(eniId).ips.keys()].sort();
  }

  /** The record of a known address (live), or undefined. */
  record(ip: string): IpRecord | undefined {
    return this.ipIndex.get(ip);
  }

  /** Every address record (live). */
  records(): IterableIterator<IpRecord> {
    return this.ipIndex.values();
  }

  /** The address index (live), for the prefix helpers of prefixes.ts. */
  index(): Map<string, IpRecord> {
    return this.ipIndex;
  }

  /**
   * Adds secondary IPs to a known ENI. Addresses already known are ignored. An address
   * that a pending (restored) allocation claims becomes assigned to it at once.
   * @throws Error if the ENI is unknown or an IP sits on another ENI.
   */
  addIps(eniId: string, ips: readonly string[]): void {
    const rec = this.mustEni(eniId);
    for (const ip of ips) {
      const known = this.ipIndex.get(ip);
      if (known) {
        if (known.eniId !== eniId) throw new Error(`IP ${ip} is already on ${known.eniId}, not ${eniId}`);
        continue;
      }
      this.insert(rec, ip);
    }
    this.p.signal.notify();
  }

  /**
   * Adds a new address record to ENI record `rec` (of /28 `prefix`, if given), assigned
   * at once to a pending allocation that claims it ({@link PendingAllocations.claim}).
   */
  insert(rec: EniRecord, ip: string, prefix?: string): void {
    const r: IpRecord = { ip, eniId: rec.info.eniId, releasing: false, ...(prefix ? { prefix } : {}) };
    this.p.pending.claim(r);
    rec.ips.set(ip, r);
    this.ipIndex.set(ip, r);
  }

  /**
   * Removes an ENI that holds no assigned, cooling or releasing address (an unknown ENI is a no-op).
   * @throws Error naming what it still holds.
   */
  removeEni(eniId: string, now: number): void {
    const rec = this.enisById.get(eniId);
    if (!rec) return;
    for (const r of rec.ips.values()) {
      const st = this.p.cooldown.stateOf(r, now);
      if (st !== 'available') throw new Error(`ENI ${eniId} still holds ${r.ip} (${st})`);
    }
    for (const ip of rec.ips.keys()) {
      this.ipIndex.delete(ip);
      this.p.changes.ip(ip);
    }
    this.enisById.delete(eniId);
  }

  /**
   * Forgets addresses EC2 no longer holds (an unassign it confirmed, or a complete
   * describe that no longer shows them). Only `releasing` or available addresses are
   * removed; an assigned, cooling or unverified one is kept and reported. An address of
   * a /28 prefix leaves its prefix (which then is never free again; an emptied prefix is
   * forgotten): prefixes are *released* only whole (release-phases.ts).
   * @returns the addresses that were not removed because they are in use.
   */
  removeIps(ips: readonly string[], now: number): string[] {
    const kept: string[] = [];
    for (const ip of ips) {
      const r = this.ipIndex.get(ip);
      if (!r) continue;
      const st = this.p.cooldown.stateOf(r, now);
      if (st !== 'releasing' && st !== 'available') {
        kept.push(ip);
        continue;
      }
      this.drop(r);
    }
    return kept;
  }

  /**
   * Removes one address from its ENI and the index, whatever its state (its holder, if
   * any, is the caller's business). An address of a /28 prefix leaves its prefix; an
   * emptied prefix is forgotten.
   */
  drop(r: IpRecord): void {
    const rec = this.enisById.get(r.eniId);
    rec?.ips.delete(r.ip);
    this.ipIndex.delete(r.ip);
    this.p.changes.ip(r.ip);
    if (rec && r.prefix !== undefined) {
      const left = (rec.prefixes.get(r.prefix) ?? []).filter((x) => x !== r.ip);
      if (left.length > 0) rec.prefixes.set(r.prefix, left);
      else rec.prefixes.delete(r.prefix);
    }
  }

  /** State of a known IP at `now`, or undefined if it is on no ENI. */
  ipState(ip: string, now: number): IpState | undefined {
    const r = this.ipIndex.get(ip);
    return r ? this.p.cooldown.stateOf(r, now) : undefined;
  }

  /** The state function at `now` (ms): the cooldown's timer alone (the release path, the checkpoint). */
  stateAt(now: number): StateFn {
    return this.p.cooldown.stateAt(now);
  }

  /** The state function of what an ADD may take at `now` (ms): a cooldown the evidence ended is available. */
  reuseStateAt(now: number): StateFn {
    return this.p.cooldown.reuseStateAt(now);
  }

  /**
   * Marks every unheld IP as `unverified` (start-up without a usable checkpoint): such an
   * IP is neither handed out nor released until {@link verifyAll}. @returns how many.
   */
  markAllUnverified(): number {
    return markUnheldUnverified(this.ipIndex.values());
  }

  /** The IPs marked unverified now (dotted quads, unordered). */
  unverifiedIps(): string[] {
    return unverifiedOf(this.ipIndex.values());
  }

  /**
   * Clears `unverified` everywhere (a clean evidence pass adopted what is in use), except
   * on IPs for which `keep(ip)` is true (the kernel shows them wired to a pod: never
   * verified free). @returns how many were cleared.
   */
  verifyAll(keep?: (ip: string) => boolean): number {
    const n = clearUnverified(this.ipIndex.values(), keep);
    if (n > 0) this.p.signal.notify();
    return n;
  }

  /** Counts at `now` over all ENIs, as an ADD sees them (a cooldown the evidence ended is available). */
  counts(now: number): DatastoreCounts {
    // Custom networking: the primary ENI's free addresses are not in the pool.
    const outOfPool = (r: IpRecord) =>
      !this.p.primaryServesNewPods && this.enisById.get(r.eniId)?.info.isPrimary === true;
    return countAddresses(this.ipIndex.values(), this.reuseStateAt(now), this.enisById.size, outOfPool);
  }

  /**
   * Per-ENI counts for the pool decisions, in addresses (see `views.ts`): addresses being
   * released are left out of `total`; unverified ones count as cooling (not available,
   * never freed); in `'prefix'` unit `capacity` is slots × 16 and `freeSlots` counts the
   * wholly free /28 prefixes. An ENI closed to new pods (custom networking's primary ENI)
   * shows only its held addresses, no room and no free prefix.
   */
  poolViews(now: number): PoolEniView[] {
    return this.listEnis().map((info) =>
      poolViewOf(this.enisById.get(info.eniId)!, this.p.unit, this.stateAt(now), this.closedToNewPods(info)),
    );
  }

  /** The ENI record of `eniId` (live). @throws Error for an unknown ENI. */
  mustEni(eniId: string): EniRecord {
    const rec = this.enisById.get(eniId);
    if (!rec) throw new Error(`unknown ENI ${eniId}`);
    return rec;
  }
}
