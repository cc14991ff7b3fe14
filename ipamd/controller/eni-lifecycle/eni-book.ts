/**
 * Bookkeeping of this node's ENIs that are not (or no longer) served from, and of the
 * device indexes: what counts toward the instance's ENI limit and which index a new ENI
 * may take. Synchronous and I/O-free, so parallel ENI creations can never pick the same
 * device index: {@link EniBook.reserveDeviceIndex} takes one before the first EC2 call.
 *
 * - **reserved** indexes belong to ENIs being created or attached right now;
 * - **pending** ENIs are attached and ours but not yet served from: still `attaching`,
 *   not yet listed by IMDS, or their host networking is not ready;
 * - **orphans** are ENIs we detached (or may have) and not yet deleted;
 * - **in flight** ENIs are being created, attached or freed by this process.
 * Each of these keeps its device index until EC2 shows the ENI gone.
 */
import type { EniInventory } from '../../datastore/roles.js';

/** Device indexes and half-done ENI work; base of {@link EniManager}. */
export class EniBook {
  protected readonly pending = new Map<string, { deviceIndex: number; since: number }>();
  protected readonly orphans = new Map<string, { deviceIndex: number }>();
  protected readonly inFlightIds = new Set<string>();
  private readonly reserved = new Set<number>();
  private pendingListener?: () => void;

  /**
   * @param ds the datastore (its ENIs hold their device numbers);
   * @param unmanagedDeviceIndexes device indexes taken by attached ENIs we do not manage;
   * @param now clock in ms.
   */
  constructor(
    protected readonly ds: EniInventory,
    protected readonly unmanagedDeviceIndexes: Set<number>,
    protected readonly now: () => number,
  ) {}

  /**
   * Number of ENIs attached or on their way: managed, pending, orphans still attached,
   * unmanaged, and creations in progress (reserved indexes).
   */
  attachedCount(): number {
    return (
      this.ds.listEnis().length +
      this.unmanagedDeviceIndexes.size +
      this.pending.size +
      this.orphans.size +
      this.reserved.size
    );
  }

  /** Attached ENIs ipamd does not manage (untagged or `no_manage=true`). */
  unmanagedCount(): number {
    return this.unmanagedDeviceIndexes.size;
  }

  /** ENIs attached and ours but not served from yet (attaching, not yet listed by IMDS, host networking not ready). */
  pendingIds(): string[] {
    return [...this.pending.keys()];
  }

  /** Pending ENIs no creation of this process is still working on (IMDS lag, a failed hook, found at start): the reconcile adopts them. */
  awaitingAdoption(): string[] {
    return [...this.pending.keys()].filter((id) => !this.inFlightIds.has(id));
  }

  /** ENIs detached (or being detached) by us and not yet deleted. */
  orphanIds(): string[] {
    return [...this.orphans.keys()];
  }

  /** ENI creations in progress (device indexes reserved, ENI not attached yet). */
  creatingCount(): number {
    return this.reserved.size;
  }

  /** True while the ENI is being created, attached or freed by this process (the sweep leaves it alone). */
  isBusy(eniId: string): boolean {
    return this.inFlightIds.has(eniId) || this.pending.has(eniId) || this.orphans.has(eniId);
  }

  /** The lowest device index (≥ 1) no attached, pending, orphaned or reserved ENI uses. */
  firstFreeDeviceIndex(): number {
    const used = new Set<number>([
      ...this.unmanagedDeviceIndexes,
      ...this.ds.listEnis().map((e) => e.deviceNumber),
      ...this.reserved,
      ...[...this.pending.values()].map((p) => p.deviceIndex),
      ...[...this.orphans.values()].map((p) => p.deviceIndex),
    ]);
    let i = 1;
    while (used.has(i)) i++;
    return i;
  }

  /**
   * Takes the first free device index for an ENI about to be created (counted by
   * {@link attachedCount} from now on). Give it back with {@link releaseDeviceIndex}, or
   * hand it over to {@link markPending} once the ENI is attached.
   */
  reserveDeviceIndex(): number {
    const i = this.firstFreeDeviceIndex();
    this.reserved.add(i);
    return i;
  }

  /** Returns a reserved device index (the creation failed, or the ENI now holds it as pending). */
  releaseDeviceIndex(deviceIndex: number): void {
    this.reserved.delete(deviceIndex);
  }

  /** Records an attached ENI of ours that is not served from yet; tells the listener when new. */
  markPending(eniId: string, deviceIndex: number): void {
    if (this.ds.getEni(eniId)) return;
    const fresh = !this.pending.has(eniId);
    this.pending.set(eniId, { deviceIndex, since: this.now() });
    if (fresh) this.pendingListener?.();
  }

  /** Calls `fn` whenever an ENI becomes pending or an orphan (the reconcile retries soon). */
  onPending(fn: () => void): void {
    this.pendingListener = fn;
  }

  /** Records an ENI of ours that is detaching or detached and must still be deleted. */
  markOrphan(eniId: string, deviceIndex: number): void {
    this.pending.delete(eniId);
    const fresh = !this.orphans.has(eniId);
    this.orphans.set(eniId, { deviceIndex });
    if (fresh) this.pendingListener?.();
  }

  /** Forgets a pending or orphan ENI (EC2 no longer shows it attached to us). */
  forget(eniId: string): void {
    this.pending.delete(eniId);
    this.orphans.delete(eniId);
  }
}
