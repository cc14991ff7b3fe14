/**
 * Allocations restored for addresses that are on no known ENI yet (EC2/IMDS lag, or an
 * address EC2 took while an adoption was in flight): kept, never handed out, and
 * assigned the moment the address shows up on one of the node's ENIs
 * ({@link PendingAllocations.claim}). Pure; no I/O.
 */
import type { ChangeLog } from './changes.js';
import { keyString, type IpRecord } from './records.js';
import type { Allocation } from './types.js';

/**
 * Pending allocations by address. The allocation objects are shared with the allocation
 * table (allocation-table.ts): filling in the ENI here fills it in there.
 */
export class PendingAllocations {
  private readonly byIp = new Map<string, Allocation>();

  /** @param changes the datastore's change log (a claimed allocation changes what the checkpoint keeps). */
  constructor(private readonly changes: ChangeLog) {}

  /** True if a pending allocation claims `ip`. */
  has(ip: string): boolean {
    return this.byIp.has(ip);
  }

  /** The pending allocation claiming `ip` (the shared object, not a copy), or undefined. */
  get(ip: string): Allocation | undefined {
    return this.byIp.get(ip);
  }

  /** Records `a` (kept by reference) as pending for its address `ip`. */
  set(ip: string, a: Allocation): void {
    this.byIp.set(ip, a);
  }

  /** Forgets the pending allocation of `ip`, if any. */
  delete(ip: string): void {
    this.byIp.delete(ip);
  }

  /** All pending allocations (copies). */
  list(): Allocation[] {
    return [...this.byIp.values()].map((a) => ({ ...a }));
  }

  /**
   * A new address record `r` is about to join the address table: if a pending allocation
   * claims its address, the allocation leaves the pending set, takes the record's ENI and
   * becomes the record's holder.
   */
  claim(r: IpRecord): void {
    const pending = this.byIp.get(r.ip);
    if (!pending) return;
    this.byIp.delete(r.ip);
    pending.eniId = r.eniId;
    r.holder = keyString(pending);
    this.changes.key(r.holder, pending);
    this.changes.ip(r.ip);
  }
}
