/**
 * The datastore: which secondary IPs the node holds, on which ENI, and which
 * attachment holds each. Pure and synchronous — no I/O, no timers; time is passed in
 * as `now` (ms since epoch). ipamd's single process is its only writer (DESIGN §8).
 *
 * Address states:
 * - available: on an ENI, held by nobody, not cooling, not being released;
 * - assigned:  held by exactly one allocation key;
 * - cooling:   released less than `cooldownMs` ago (IP_COOLDOWN_PERIOD) — neither
 *              available nor assigned, so a just-freed IP is not reused at once;
 * - releasing: reserved by the pool controller for an EC2 unassign in flight, so an
 *              ADD can never be handed an address that is being unassigned;
 * - unverified: found on an ENI at start with no checkpoint to say who holds it; a live
 *              pod may be using it, so it is neither handed out nor released until a
 *              clean read of the runtime says (DESIGN §4).
 */
import type { PoolEniView } from '../pool/types.js';
import type { Allocation, AllocationKey, DatastoreCounts, EniInfo, IpState, PodRef } from './types.js';

interface IpRecord {
  ip: string;
  eniId: string;
  /** Allocation key string while assigned. */
  holder?: string;
  /** When it was last released (ms), for cooldown and least-recently-used reuse. */
  releasedAt?: number;
  releasing: boolean;
  unverified?: boolean;
}

interface EniRecord {
  info: EniInfo;
  ips: Map<string, IpRecord>;
}

/** Result of {@link Datastore.assign}. */
export type AssignResult =
  | { kind: 'assigned'; allocation: Allocation; eni: EniInfo }
  | { kind: 'existing'; allocation: Allocation; eni: EniInfo }
  /** The key holds a restored address that is on no known ENI yet (EC2/IMDS lag). */
  | { kind: 'pending'; allocation: Allocation }
  | { kind: 'empty' };

/** Result of {@link Datastore.restoreAllocation}. */
export type RestoreResult = 'restored' | 'pending' | 'duplicate-key' | 'ip-taken';


/** Canonical string of an allocation key (NUL-separated, so no field can forge another). */
export function keyString(k: AllocationKey): string {
  return `${k.networkName}\u0000${k.containerID}\u0000${k.ifName}`;
}

/** In-memory ENI/IP/allocation store. See the module docstring for the address states. */
export class Datastore {
  private readonly enisById = new Map<string, EniRecord>();
  private readonly ipIndex = new Map<string, IpRecord>();
  private readonly allocationsByKey = new Map<string, Allocation>();
  /** Allocations restored for IPs not (yet) on any known ENI: kept, never handed out. */
  private readonly pendingByIp = new Map<string, Allocation>();

  /** @param cooldownMs IP_COOLDOWN_PERIOD in ms (≥ 0). */
  constructor(private readonly cooldownMs: number) {
    if (!(cooldownMs >= 0)) throw new RangeError(`cooldownMs must be >= 0, got ${cooldownMs}`);
  }

  /** Adds an ENI, or refreshes the metadata of a known one (its IPs are kept). */
  upsertEni(info: EniInfo): void {
    const rec = this.enisById.get(info.eniId);
    if (rec) rec.info = { ...info };
    else this.enisById.set(info.eniId, { info: { ...info }, ips: new Map() });
  }

  /** The ENI's info, or undefined. */
  getEni(eniId: string): EniInfo | undefined {
    return this.enisById.get(eniId)?.info;
  }

  /** All ENIs, by device number. */
  listEnis(): EniInfo[] {
    return [...this.enisById.values()].map((r) => r.info).sort((a, b) => a.deviceNumber - b.deviceNumber);
  }

  /** Secondary IPs on an ENI (any state), sorted. Throws if the ENI is unknown. */
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
      const r: IpRecord = { ip, eniId, releasing: false };
      const pending = this.pendingByIp.get(ip);
      if (pending) {
        this.pendingByIp.delete(ip);
        pending.eniId = eniId;
        r.holder = keyString(pending);
      }
      rec.ips.set(ip, r);
      this.ipIndex.set(ip, r);
    }
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
    for (const ip of rec.ips.keys()) this.ipIndex.delete(ip);
    this.enisById.delete(eniId);
  }

  /**
   * Picks up to `count` available IPs of an ENI and marks them `releasing`, so no ADD
   * can take them while the EC2 unassign is in flight. Prefers the least recently used.
   * @returns the reserved IPs (possibly fewer than asked).
   */
  reserveForRelease(eniId: string, count: number, now: number): string[] {
    const rec = this.mustEni(eniId);
    const free = [...rec.ips.values()].filter((r) => this.stateOf(r, now) === 'available');
    free.sort((a, b) => (b.releasedAt ?? -1) - (a.releasedAt ?? -1));
    const picked = free.slice(0, Math.max(0, count));
    for (const r of picked) r.releasing = true;
    return picked.map((r) => r.ip);
  }

  /** Reserves every IP of an ENI that is available (for an ENI about to be freed). */
  reserveAllForRelease(eniId: string, now: number): string[] {
    return this.reserveForRelease(eniId, Number.MAX_SAFE_INTEGER, now);
  }

  /** Returns reserved IPs to the pool (the EC2 release failed or was cancelled). */
  cancelRelease(ips: readonly string[]): void {
    for (const ip of ips) {
      const r = this.ipIndex.get(ip);
      if (r) r.releasing = false;
    }
  }

  /**
   * Forgets IPs after EC2 confirmed they were unassigned. Only `releasing` or
   * available addresses are removed; an assigned or cooling one is kept and reported.
   * @returns the IPs that were not removed because they are in use.
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
      this.enisById.get(r.eniId)?.ips.delete(ip);
      this.ipIndex.delete(ip);
    }
    return kept;
  }

  /**
   * Assigns an address to `key`. Idempotent: a key that already holds an address gets
   * it back (`existing`). Takes the available IP of the lowest device number ENI,
   * least recently released first.
   */
  assign(key: AllocationKey, pod: PodRef | undefined, now: number): AssignResult {
    const ks = keyString(key);
    const held = this.allocationsByKey.get(ks);
    if (held) {
      const eni = this.pendingByIp.has(held.ipv4) ? undefined : this.enisById.get(held.eniId)?.info;
      if (eni) return { kind: 'existing', allocation: { ...held }, eni };
      return { kind: 'pending', allocation: { ...held } };
    }
    for (const rec of [...this.enisById.values()].sort((a, b) => a.info.deviceNumber - b.info.deviceNumber)) {
      let best: IpRecord | undefined;
      for (const r of rec.ips.values()) {
        if (this.stateOf(r, now) !== 'available') continue;
        if (!best || (r.releasedAt ?? -1) < (best.releasedAt ?? -1)) best = r;
      }
      if (!best) continue;
      best.holder = ks;
      best.releasedAt = undefined;
      const allocation: Allocation = { ...key, ipv4: best.ip, eniId: rec.info.eniId, allocatedAt: now, ...(pod ? { pod } : {}) };
      this.allocationsByKey.set(ks, allocation);
      return { kind: 'assigned', allocation: { ...allocation }, eni: rec.info };
    }
    return { kind: 'empty' };
  }

  /**
   * Releases the address held by `key` into cooldown. A key that holds nothing is a
   * no-op (DEL of an unknown container). Never touches another key's address.
   * @returns the released allocation, or undefined.
   */
  release(key: AllocationKey, now: number): Allocation | undefined {
    const ks = keyString(key);
    const a = this.allocationsByKey.get(ks);
    if (!a) return undefined;
    this.allocationsByKey.delete(ks);
    const r = this.ipIndex.get(a.ipv4);
    if (r && r.holder === ks) {
      r.holder = undefined;
      r.releasedAt = now;
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
    const r = this.ipIndex.get(a.ipv4);
    if (r && r.holder === ks) r.holder = undefined;
    return true;
  }

  /**
   * Puts back an allocation whose release could not be made durable (the DEL fails and
   * the runtime retries). Refuses if the address was taken meanwhile.
   */
  rollbackRelease(allocation: Allocation): boolean {
    return this.restoreAllocation(allocation) === 'restored';
  }

  /**
   * Re-creates an allocation from a restore source (checkpoint, runtime).
   * - `restored`: the IP is on a known ENI and free (available or cooling) → assigned;
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
      return 'pending';
    }
    if (r.holder !== undefined) return 'ip-taken';
    r.holder = ks;
    r.unverified = false;
    r.releasing = false;
    r.releasedAt = undefined;
    this.allocationsByKey.set(ks, { ...a, eniId: r.eniId });
    return 'restored';
  }

  /** Marks a known, unheld IP as cooling since `releasedAt` (restored cooldown entry). */
  restoreCooldown(ip: string, releasedAt: number): void {
    const r = this.ipIndex.get(ip);
    if (r && r.holder === undefined) r.releasedAt = releasedAt;
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

  /** State of a known IP, or undefined if it is on no ENI. */
  ipState(ip: string, now: number): IpState | undefined {
    const r = this.ipIndex.get(ip);
    return r ? this.stateOf(r, now) : undefined;
  }

  /** All allocations (copies), including pending ones. */
  allocations(): Allocation[] {
    return [...this.allocationsByKey.values()].map((a) => ({ ...a }));
  }

  /** Allocations whose IP is on no known ENI yet. */
  pendingAllocations(): Allocation[] {
    return [...this.pendingByIp.values()].map((a) => ({ ...a }));
  }

  /** IPs still in cooldown at `now`, with their release time (for the checkpoint). */
  coolingEntries(now: number): Array<{ ip: string; releasedAt: number }> {
    const out: Array<{ ip: string; releasedAt: number }> = [];
    for (const r of this.ipIndex.values()) {
      if (this.stateOf(r, now) === 'cooling') out.push({ ip: r.ip, releasedAt: r.releasedAt! });
    }
    return out;
  }

  /** When the earliest cooling IP becomes available (ms), or undefined if none cools. */
  nextCooldownEnd(now: number): number | undefined {
    let min: number | undefined;
    for (const e of this.coolingEntries(now)) {
      const end = e.releasedAt + this.cooldownMs;
      if (min === undefined || end < min) min = end;
    }
    return min;
  }

  /**
   * Marks every unheld IP as `unverified` (start-up without a usable checkpoint): such an
   * IP is neither handed out nor released until {@link verifyAll}. @returns how many.
   */
  markAllUnverified(): number {
    let n = 0;
    for (const r of this.ipIndex.values()) {
      if (r.holder === undefined) {
        r.unverified = true;
        n++;
      }
    }
    return n;
  }

  /** Clears `unverified` everywhere (a clean evidence pass adopted what is in use). @returns how many. */
  verifyAll(): number {
    let n = 0;
    for (const r of this.ipIndex.values()) {
      if (r.unverified) {
        r.unverified = false;
        n++;
      }
    }
    return n;
  }

  /** Counts at `now` over all ENIs. */
  counts(now: number): DatastoreCounts {
    const c: DatastoreCounts = { total: 0, assigned: 0, cooling: 0, releasing: 0, unverified: 0, available: 0, enis: this.enisById.size };
    for (const r of this.ipIndex.values()) {
      c.total++;
      c[this.stateOf(r, now)]++;
    }
    return c;
  }

  /**
   * Per-ENI counts for the pool decisions. Addresses being released are left out of
   * `total`: they are already on their way out. Unverified addresses count as cooling:
   * not available (the pool grows around them) and never freed.
   */
  poolViews(now: number): PoolEniView[] {
    return this.listEnis().map((info) => {
      const v: PoolEniView = {
        eniId: info.eniId, deviceNumber: info.deviceNumber, isPrimary: info.isPrimary,
        createdAtMs: info.createdAtMs, capacity: info.capacity, total: 0, assigned: 0, cooling: 0,
      };
      for (const r of this.enisById.get(info.eniId)!.ips.values()) {
        const st = this.stateOf(r, now);
        if (st === 'releasing') continue;
        v.total++;
        if (st === 'assigned') v.assigned++;
        else if (st === 'cooling' || st === 'unverified') v.cooling++; // not available, not freeable
      }
      return v;
    });
  }

  private stateOf(r: IpRecord, now: number): IpState {
    if (r.holder !== undefined) return 'assigned';
    if (r.unverified) return 'unverified';
    if (r.releasing) return 'releasing';
    if (r.releasedAt !== undefined && now - r.releasedAt < this.cooldownMs) return 'cooling';
    return 'available';
  }

  private mustEni(eniId: string): EniRecord {
    const rec = this.enisById.get(eniId);
    if (!rec) throw new Error(`unknown ENI ${eniId}`);
    return rec;
  }
}
