/**
 * The address half of the datastore: ENIs, the addresses they hold (secondary IPs and
 * the 16 addresses of each /28 prefix) and their states, release reservations, counts
 * and pool views. prefix-store.ts adds the /28 prefix operations, and {@link Datastore}
 * the allocations on top. Pure and synchronous;
 * time is passed in as `now` (ms since epoch). See `datastore.ts` for the address states.
 */
import type { AllocationUnit, PoolEniView } from '../pool/types.js';
import type { StateFn } from './prefixes.js';
import { ChangeLog } from './changes.js';
import { ipStateOf, keyString, type EniRecord, type IpRecord } from './records.js';
import type { Allocation, DatastoreCounts, EniInfo, IpState } from './types.js';
import { poolViewOf } from './views.js';
import {
  clearUnverified,
  coolingOf,
  countAddresses,
  earliestCooldownEnd,
  markUnheldUnverified,
  unverifiedOf,
} from './address-scan.js';

/** ENIs and their addresses; base class of the datastore (not used on its own). */
export abstract class AddressStore {
  protected readonly enisById = new Map<string, EniRecord>();
  protected readonly ipIndex = new Map<string, IpRecord>();
  /** Allocations restored for IPs not (yet) on any known ENI: kept, never handed out. */
  protected readonly pendingByIp = new Map<string, Allocation>();
  /** What changed since the checkpoint last took it (changes.ts); every change of what the checkpoint keeps is noted here. */
  protected readonly changes = new ChangeLog();
  /** Told after a change that may have made an address available (see {@link onAddressesAvailable}). */
  private availabilityListener?: () => void;

  /** Custom networking: the primary ENI's addresses serve no new pod (see the constructor). */
  protected readonly primaryClosed: boolean;

  /**
   * @param cooldownMs IP_COOLDOWN_PERIOD in ms (≥ 0).
   * @param unit what the pool assigns: `'ip'` (secondary IPs) or `'prefix'` (/28 prefixes,
   *        ENABLE_PREFIX_DELEGATION); only changes the units of {@link poolViews}.
   * @param o `primaryServesNewPods: false` (custom networking, AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG):
   *        the primary ENI's addresses are never handed to a new pod, and those held by
   *        nobody are left out of the pool (not in `total` or `available` of {@link counts}
   *        and {@link poolViews}; the ENI has no room for more). Addresses on it that are
   *        held (restored allocations) stay assigned and are served to their keys until
   *        released. Default true.
   * @throws RangeError if `cooldownMs` is negative or NaN.
   */
  constructor(
    protected readonly cooldownMs: number,
    protected readonly unit: AllocationUnit = 'ip',
    o: { primaryServesNewPods?: boolean } = {},
  ) {
    if (!(cooldownMs >= 0)) throw new RangeError(`cooldownMs must be >= 0, got ${cooldownMs}`);
    this.primaryClosed = o.primaryServesNewPods === false;
  }

  /** True when `info`'s addresses serve no new pod (the primary ENI under custom networking). */
  closedToNewPods(info: EniInfo): boolean {
    return this.primaryClosed && info.isPrimary;
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

  /** Addresses on an ENI (any state; secondary IPs and prefix addresses), sorted. Throws if the ENI is unknown. */
  eniIps(eniId: string): string[] {
    return [...this.mustEni(eniId).ips.keys()].sort();
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
      this.insertIp(rec, ip);
    }
    this.addressesMayBeAvailable();
  }

  /**
   * Removes an ENI that holds no assigned, cooling or releasing address.
   * @throws Error naming what it still holds.
   */
  removeEni(eniId: string, now: number): void {
    const rec = this.enisById.get(eniId);
    if (!rec) return;
    for (const r of rec.ips.values()) {
      const st = this.stateOf(r, now);
      if (st !== 'available') throw new Error(`ENI ${eniId} still holds ${r.ip} (${st})`);
    }
    for (const ip of rec.ips.keys()) {
      this.ipIndex.delete(ip);
      this.changes.ip(ip);
    }
    this.enisById.delete(eniId);
  }

  /**
   * Picks up to `count` available secondary IPs of an ENI (never an address of a /28
   * prefix: prefixes are released whole, see {@link reservePrefixesForRelease}) and marks
   * them `releasing`, so no ADD can take them while the EC2 unassign is in flight.
   * @returns the reserved IPs (possibly fewer than asked).
   */
  reserveForRelease(eniId: string, count: number, now: number): string[] {
    return this.reserve(eniId, count, now, (r) => r.prefix === undefined);
  }

  /** Reserves every available address of an ENI, prefix addresses included (for an ENI about to be freed). */
  reserveAllForRelease(eniId: string, now: number): string[] {
    return this.reserve(eniId, Number.MAX_SAFE_INTEGER, now, () => true);
  }

  private reserve(eniId: string, count: number, now: number, which: (r: IpRecord) => boolean): string[] {
    const rec = this.mustEni(eniId);
    const free = [...rec.ips.values()].filter((r) => which(r) && this.stateOf(r, now) === 'available');
    free.sort((a, b) => (b.releasedAt ?? -1) - (a.releasedAt ?? -1));
    const picked = free.slice(0, Math.max(0, count));
    for (const r of picked) r.releasing = 'reserved';
    return picked.map((r) => r.ip);
  }

  /**
   * The last step before a releaser calls EC2 with reserved addresses: marks them `sent`
   * (from now on only EC2's answer settles them) and returns them — except those whose
   * reservation an adoption cancelled meanwhile (`Datastore.restoreAllocation`), which
   * must not be sent. Call it synchronously right before the EC2 call.
   */
  markReleaseSent(ips: readonly string[]): string[] {
    return ips.filter((ip) => {
      const r = this.ipIndex.get(ip);
      if (!this.stillReserved(r)) return false;
      r.releasing = 'sent';
      return true;
    });
  }

  /**
   * Returns reserved IPs to the pool: the EC2 release failed for sure, was cancelled, or a
   * describe shows them still on the ENI. An IP adopted while its unassign was in flight
   * keeps its holder and so becomes plainly assigned (EC2 kept it).
   */
  cancelRelease(ips: readonly string[]): void {
    for (const ip of ips) {
      const r = this.ipIndex.get(ip);
      if (r) r.releasing = false;
    }
    this.addressesMayBeAvailable();
  }

  /**
   * Forgets addresses EC2 no longer holds (an unassign it confirmed, or a complete
   * describe that no longer shows them). Only `releasing` or available addresses are
   * removed; an assigned, cooling or unverified one is kept and reported. An address of
   * a /28 prefix leaves its prefix (which then is never free again; an emptied prefix is
   * forgotten): prefixes are *released* only whole, via {@link reservePrefixesForRelease}.
   * @returns the addresses that were not removed because they are in use.
   */
  removeIps(ips: readonly string[], now: number): string[] {
    const kept: string[] = [];
    for (const ip of ips) {
      const r = this.ipIndex.get(ip);
      if (!r) continue;
      const st = this.stateOf(r, now);
      if (st !== 'releasing' && st !== 'available') {
        kept.push(ip);
        continue;
      }
      this.dropAddress(r);
    }
    return kept;
  }

  /**
   * Removes one address from its ENI and the index, whatever its state (its holder, if
   * any, is the caller's business). An address of a /28 prefix leaves its prefix; an
   * emptied prefix is forgotten.
   */
  protected dropAddress(r: IpRecord): void {
    const rec = this.enisById.get(r.eniId);
    rec?.ips.delete(r.ip);
    this.ipIndex.delete(r.ip);
    this.changes.ip(r.ip);
    if (rec && r.prefix !== undefined) {
      const left = (rec.prefixes.get(r.prefix) ?? []).filter((x) => x !== r.ip);
      if (left.length > 0) rec.prefixes.set(r.prefix, left);
      else rec.prefixes.delete(r.prefix);
    }
  }

  /** True for a known address that is reserved or sent for release and held by nobody. */
  protected stillReserved(r: IpRecord | undefined): r is IpRecord {
    return r !== undefined && r.releasing !== false && r.holder === undefined;
  }

  /** State of a known IP, or undefined if it is on no ENI. */
  ipState(ip: string, now: number): IpState | undefined {
    const r = this.ipIndex.get(ip);
    return r ? this.stateOf(r, now) : undefined;
  }

  /** IPs still in cooldown at `now`, with their release time (for the checkpoint). */
  coolingEntries(now: number): Array<{ ip: string; releasedAt: number }> {
    return coolingOf(this.ipIndex.values(), this.stateAt(now));
  }

  /** When the earliest cooling IP becomes available (ms), or undefined if none cools. */
  nextCooldownEnd(now: number): number | undefined {
    return earliestCooldownEnd(this.coolingEntries(now), this.cooldownMs);
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
    if (n > 0) this.addressesMayBeAvailable();
    return n;
  }

  /** Counts at `now` over all ENIs. */
  counts(now: number): DatastoreCounts {
    // Custom networking: the primary ENI's free addresses are not in the pool.
    const outOfPool = (r: IpRecord) => this.primaryClosed && this.enisById.get(r.eniId)?.info.isPrimary === true;
    return countAddresses(this.ipIndex.values(), this.stateAt(now), this.enisById.size, outOfPool);
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
      poolViewOf(this.enisById.get(info.eniId)!, this.unit, this.stateAt(now), this.closedToNewPods(info)),
    );
  }

  /**
   * Sets the one listener called (synchronously, after the change) whenever addresses
   * may have become available: IPs or /28 prefixes added, a release reservation
   * cancelled, unverified addresses verified, an assignment rolled back. Cooldown expiry
   * is a matter of time and is not signalled. The listener must not throw.
   */
  onAddressesAvailable(fn: () => void): void {
    this.availabilityListener = fn;
  }

  /** Calls the {@link onAddressesAvailable} listener, if any. */
  protected addressesMayBeAvailable(): void {
    this.availabilityListener?.();
  }

  protected stateOf(r: IpRecord, now: number): IpState {
    return ipStateOf(r, now, this.cooldownMs);
  }

  protected stateAt(now: number): StateFn {
    return (r) => ipStateOf(r, now, this.cooldownMs);
  }

  protected insertIp(rec: EniRecord, ip: string, prefix?: string): void {
    const r: IpRecord = { ip, eniId: rec.info.eniId, releasing: false, ...(prefix ? { prefix } : {}) };
    const pending = this.pendingByIp.get(ip);
    if (pending) {
      this.pendingByIp.delete(ip);
      pending.eniId = rec.info.eniId;
      r.holder = keyString(pending);
      this.changes.key(r.holder, pending);
      this.changes.ip(ip);
    }
    rec.ips.set(ip, r);
    this.ipIndex.set(ip, r);
  }

  protected recordOfPrefix(prefix: string): EniRecord | undefined {
    for (const rec of this.enisById.values()) if (rec.prefixes.has(prefix)) return rec;
    return undefined;
  }

  protected mustEni(eniId: string): EniRecord {
    const rec = this.enisById.get(eniId);
    if (!rec) throw new Error(`unknown ENI ${eniId}`);
    return rec;
  }
}
