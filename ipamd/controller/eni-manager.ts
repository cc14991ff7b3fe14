/**
 * ENI lifecycle: create + tag + attach + DeleteOnTermination for growth, and
 * detach + wait + delete for shrink (DESIGN §3 "ENI ownership").
 *
 * Ownership: ENIs we create carry `node.k8s.amazonaws.com/instance_id=<id>` and
 * `node.k8s.amazonaws.com/createdAt=<RFC 3339>` (plus the cluster tag and
 * ADDITIONAL_ENI_TAGS) and the description `aws-K8S-<instance id>`. Untagged or
 * `no_manage=true` ENIs are never touched.
 *
 * Half-done work is tracked, never forgotten (crash-safety and IMDS lag, issue 4):
 * - **pending** ENIs are attached and ours but not yet served from: still `attaching`,
 *   or not yet listed by IMDS (IMDS is a hint that the OS sees the interface; EC2 is the
 *   truth for what the ENI holds). They count toward the instance's ENI limit and keep
 *   their device index; the reconcile ({@link EniReconciler}) adopts them later.
 * - **orphans** are ENIs we detached (or may have) and not yet deleted: out of the
 *   datastore at once, their device index kept until EC2 shows them gone; deletion is
 *   retried by {@link EniManager.retryOrphans} (and the leaked-ENI sweep catches the rest).
 * - **in flight** ENIs are being created/attached/freed now: the sweep skips them.
 */
import type { Datastore } from '../datastore/datastore.js';
import type { EniInfo } from '../datastore/types.js';
import { Ec2Error, type Ec2Api, type Ec2Eni } from '../cloud/ec2.js';
import type { ImdsEni } from '../cloud/imds.js';
import type { Logger } from '../log.js';
import type { ReleaseGate } from './release-gate.js';
import { ENI_DESCRIPTION_PREFIX, eniCreatedAtMs, failedForSure, isOurEni, TAG_CLUSTER_NAME, TAG_CREATED_AT, TAG_INSTANCE_ID } from './eni-ownership.js';

export { ENI_DESCRIPTION_PREFIX, TAG_CLUSTER_NAME, TAG_CREATED_AT, TAG_INSTANCE_ID, TAG_NO_MANAGE, eniCreatedAtMs, failedForSure, isOurEni } from './eni-ownership.js';

/** The instance facts the ENI manager needs. */
export interface InstanceContext {
  instanceId: string;
  /** Subnet and security groups of the primary ENI: new ENIs go there. */
  subnetId: string;
  subnetCidr: string;
  securityGroupIds: string[];
  /** Max ENIs (instance limit, capped by MAX_ENI). */
  maxEnis: number;
  /** Secondary IPs per ENI (Ipv4AddressesPerInterface − 1). */
  ipsPerEni: number;
}

/** Lists the ENIs IMDS shows (ImdsClient satisfies it). */
export interface ImdsEniLister {
  enis(): Promise<ImdsEni[]>;
}

/** Options of {@link EniManager}. */
export interface EniManagerOptions {
  ec2: Ec2Api;
  ds: Datastore;
  gate: ReleaseGate;
  log: Logger;
  instance: InstanceContext;
  clusterName?: string;
  additionalTags: Record<string, string>;
  /** Device indexes taken by attached ENIs we do not manage. */
  unmanagedDeviceIndexes: Set<number>;
  /** IMDS, to wait until a new ENI is listed before serving from it (omit: EC2 alone decides). */
  imds?: ImdsEniLister;
  /** How long createAndAttach waits for IMDS to list a new ENI before leaving it to the reconcile (ms, default 30 000). */
  imdsWaitMs?: number;
  now?: () => number;
  /** How long to wait for an attachment to settle (ms, default 60 000). */
  settleTimeoutMs?: number;
  /** Host networking for a newly attached ENI; runs before any of its IPs can be handed out. */
  onAttached?: (eni: EniInfo) => Promise<void>;
  /** Host networking teardown, right before the ENI is detached. */
  beforeDetach?: (eni: EniInfo) => Promise<void>;
  /** ENABLE_PREFIX_DELEGATION: new ENIs are created with /28 prefixes (Ipv4PrefixCount) instead of secondary IPs. */
  prefixDelegation?: boolean;
}

/** Options of {@link EniManager.free}. */
export interface FreeOptions {
  /** ENIs younger than this are kept (ms; default 60 000). */
  minAgeMs?: number;
  /** Checked right before the detach: true cancels the free (demand came back). */
  shouldCancel?: () => boolean;
}

/** Creates, attaches, detaches and deletes this node's ENIs. */
export class EniManager {
  private readonly now: () => number;
  private readonly settleMs: number;
  private readonly pending = new Map<string, { deviceIndex: number; since: number }>();
  private readonly orphans = new Map<string, { deviceIndex: number }>();
  private readonly inFlightIds = new Set<string>();
  private pendingListener?: () => void;
  /** Attached ENIs whose DeleteOnTermination could not be set yet (the reconcile retries). */
  readonly needsDeleteOnTermination = new Set<string>();

  constructor(private readonly o: EniManagerOptions) {
    this.now = o.now ?? Date.now;
    this.settleMs = o.settleTimeoutMs ?? 60_000;
  }

  /** The instance facts this manager works with. */
  get instance(): InstanceContext {
    return this.o.instance;
  }

  /** Number of ENIs attached or on their way (managed, pending, orphans still attached, unmanaged). */
  attachedCount(): number {
    return this.o.ds.listEnis().length + this.o.unmanagedDeviceIndexes.size + this.pending.size + this.orphans.size;
  }

  /** ENIs attached and ours but not served from yet (attaching, or not yet listed by IMDS). */
  pendingIds(): string[] {
    return [...this.pending.keys()];
  }

  /** ENIs detached (or being detached) by us and not yet deleted. */
  orphanIds(): string[] {
    return [...this.orphans.keys()];
  }

  /** True while the ENI is being created, attached or freed by this process (the sweep leaves it alone). */
  isBusy(eniId: string): boolean {
    return this.inFlightIds.has(eniId) || this.pending.has(eniId) || this.orphans.has(eniId);
  }

  /** The lowest device index no attached ENI uses. */
  firstFreeDeviceIndex(): number {
    const used = new Set<number>([
      ...this.o.unmanagedDeviceIndexes, ...this.o.ds.listEnis().map((e) => e.deviceNumber),
      ...[...this.pending.values()].map((p) => p.deviceIndex), ...[...this.orphans.values()].map((p) => p.deviceIndex),
    ]);
    let i = 1;
    while (used.has(i)) i++;
    return i;
  }

  /** Records an attached ENI of ours that is not served from yet (start-up, IMDS lag); tells the listener. */
  markPending(eniId: string, deviceIndex: number): void {
    if (this.o.ds.getEni(eniId)) return;
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

  /**
   * Puts an attached ENI of ours, with the secondary IPs EC2 shows on it, into the
   * datastore (EC2 is the truth for its content). Clears its pending/orphan marks.
   * @returns the ENI's datastore info.
   */
  adopt(eni: Ec2Eni): EniInfo {
    const { instance } = this.o;
    const info: EniInfo = {
      eniId: eni.eniId, mac: eni.mac, deviceNumber: eni.attachment?.deviceIndex ?? this.firstFreeDeviceIndex(),
      subnetId: eni.subnetId || instance.subnetId, subnetCidr: instance.subnetCidr, primaryIp: eni.primaryIp,
      isPrimary: false, createdAtMs: eniCreatedAtMs(eni) ?? this.now(), capacity: instance.ipsPerEni,
    };
    this.forget(eni.eniId);
    this.o.ds.upsertEni(info);
    this.o.ds.addIps(eni.eniId, eni.secondaryIps);
    this.o.ds.addPrefixes(eni.eniId, eni.ipv4Prefixes);
    if (eni.attachment && !eni.attachment.deleteOnTermination) this.needsDeleteOnTermination.add(eni.eniId);
    return info;
  }

  /**
   * Creates a tagged ENI with `secondaryCount` secondary IPs (with prefix delegation:
   * that many /28 prefixes) in the primary ENI's subnet,
   * attaches it at the first free device index, sets DeleteOnTermination, waits for the
   * attachment (EC2) and then for IMDS to list it (backoff, up to `imdsWaitMs`), and
   * adds it with its IPs to the datastore. If IMDS is still behind, the ENI stays
   * pending (counted, not served from) and the reconcile adopts it later.
   * If the attach fails for sure, the new (unattached, ours) ENI is deleted again.
   * A failed DeleteOnTermination is not fatal: the reconcile sets it later.
   * @returns the new ENI's info, or undefined when it was left pending. @throws Ec2Error
   */
  async createAndAttach(secondaryCount: number): Promise<EniInfo | undefined> {
    const { ec2, instance, log } = this.o;
    const createdAt = this.now();
    const tags: Record<string, string> = {
      ...this.o.additionalTags,
      [TAG_INSTANCE_ID]: instance.instanceId,
      [TAG_CREATED_AT]: new Date(createdAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      ...(this.o.clusterName ? { [TAG_CLUSTER_NAME]: this.o.clusterName } : {}),
    };
    const deviceIndex = this.firstFreeDeviceIndex();
    const eni = await ec2.createEni({
      subnetId: instance.subnetId, description: `${ENI_DESCRIPTION_PREFIX}${instance.instanceId}`, tags,
      // With prefix delegation the count is /28 prefixes (one EC2 slot each, like a secondary IP).
      ...(this.o.prefixDelegation
        ? { secondaryCount: 0, prefixCount: Math.min(secondaryCount, instance.ipsPerEni) }
        : { secondaryCount: Math.min(secondaryCount, instance.ipsPerEni) }),
      securityGroupIds: instance.securityGroupIds,
    });
    this.inFlightIds.add(eni.eniId);
    try {
      log.info({ eniId: eni.eniId, deviceIndex, secondaryIps: eni.secondaryIps.length }, 'created ENI');
      let attachmentId: string;
      try {
        attachmentId = await ec2.attachEni(eni.eniId, instance.instanceId, deviceIndex);
      } catch (e) {
        if (!failedForSure(e)) {
          // The attach may have happened: keep the index; the reconcile adopts it or the sweep deletes it.
          this.markPending(eni.eniId, deviceIndex);
          throw e;
        }
        log.warn({ eniId: eni.eniId, err: (e as Error).message }, 'attach failed; deleting the new ENI');
        await ec2.deleteEni(eni.eniId).catch((d: Error) => log.error({ eniId: eni.eniId, err: d.message }, 'could not delete unattached ENI; the leaked-ENI sweep will retry'));
        throw e;
      }
      this.markPending(eni.eniId, deviceIndex);
      try {
        await ec2.setDeleteOnTermination(eni.eniId, attachmentId);
      } catch (e) {
        this.needsDeleteOnTermination.add(eni.eniId);
        log.warn({ eniId: eni.eniId, err: (e as Error).message }, 'could not set DeleteOnTermination; the reconcile retries');
      }
      const settled = await this.waitForAttachment(eni.eniId, 'attached');
      if (!(await this.waitForImds(eni.eniId))) {
        log.warn({ eniId: eni.eniId, waitedMs: this.o.imdsWaitMs ?? 30_000 }, 'IMDS does not list the new ENI yet; left pending for the reconcile');
        return undefined;
      }
      const info = this.adopt(settled);
      log.info({ eniId: eni.eniId, deviceIndex, attachmentId, ips: settled.secondaryIps.length }, 'attached ENI');
      return info;
    } finally {
      this.inFlightIds.delete(eni.eniId);
    }
  }

  /**
   * Frees an ENI that holds no assigned, cooling or unverified address: detach (never
   * forced), wait until EC2 reports it `available`, delete (NotFound counts as deleted).
   * Refuses (returns false) while releases are frozen, for the primary ENI, for an ENI
   * younger than `minAgeMs`, one not tagged as ours, or when `shouldCancel()` says the
   * demand came back before the detach. Once the detach was sent the ENI leaves the
   * datastore at once (its IPs are no longer usable); a failure after that point leaves
   * it an orphan whose deletion {@link retryOrphans} retries.
   * @returns true if the ENI left the datastore. @throws Ec2Error on a failure before the detach.
   */
  async free(eniId: string, opts: FreeOptions = {}): Promise<boolean> {
    const { ds, ec2, gate, log } = this.o;
    const info = ds.getEni(eniId);
    if (!info || info.isPrimary || this.now() - info.createdAtMs < (opts.minAgeMs ?? 60_000)) return false;
    if (gate.frozen) {
      log.info({ eniId, reasons: gate.describe() }, 'not freeing ENI: releases are frozen');
      return false;
    }
    const reserved = ds.reserveAllForRelease(eniId, this.now());
    const view = ds.poolViews(this.now()).find((v) => v.eniId === eniId);
    if (!view || view.total !== 0) {
      ds.cancelRelease(reserved);
      return false;
    }
    this.inFlightIds.add(eniId);
    try {
      let eni: Ec2Eni | undefined;
      try {
        [eni] = await ec2.describeEnis([eniId]);
      } catch (e) {
        ds.cancelRelease(reserved);
        if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') {
          log.warn({ eniId }, 'ENI to free no longer exists in EC2; dropped from the datastore');
          return this.dropFromDatastore(eniId);
        }
        throw e;
      }
      if (!eni || !isOurEni(eni, this.o.instance.instanceId)) {
        ds.cancelRelease(reserved);
        log.warn({ eniId }, 'not freeing ENI: not tagged as ours');
        return false;
      }
      // Nothing may have come into use meanwhile (e.g. an evidence pass adopting a sandbox's IP).
      const inUse = ds.eniIps(eniId).some((ip) => ds.ipState(ip, this.now()) !== 'releasing');
      if (gate.frozen || inUse || opts.shouldCancel?.()) {
        ds.cancelRelease(reserved);
        log.info({ eniId, frozen: gate.frozen, inUse }, 'ENI free cancelled before the detach');
        return false;
      }
      if (eni.attachment) {
        try {
          await ec2.detachEni(eni.attachment.attachmentId);
        } catch (e) {
          if (failedForSure(e)) {
            ds.cancelRelease(reserved);
            throw e;
          }
          log.warn({ eniId, err: (e as Error).message }, 'detach outcome unknown; ENI taken out of the pool, the reconcile decides');
        }
      }
      // From here on the ENI's IPs are (or may be) off the instance: out of the pool now.
      ds.cancelRelease(reserved);
      this.dropFromDatastore(eniId);
      this.markOrphan(eniId, info.deviceNumber);
      try {
        await this.finishOrphan(eniId, true);
        log.info({ eniId, deviceNumber: info.deviceNumber }, 'freed ENI');
      } catch (e) {
        log.warn({ eniId, err: (e as Error).message }, 'ENI detached from the pool but not deleted yet; will retry');
      }
      return true;
    } finally {
      this.inFlightIds.delete(eniId);
    }
  }

  /**
   * Retries the deletion of orphans (detached by us, not yet deleted). Skipped while
   * releases are frozen. Errors are logged; the orphan stays for the next try.
   * @returns the ENIs deleted (or found gone).
   */
  async retryOrphans(): Promise<string[]> {
    const done: string[] = [];
    for (const eniId of [...this.orphans.keys()]) {
      if (this.o.gate.frozen || this.inFlightIds.has(eniId)) continue;
      this.inFlightIds.add(eniId);
      try {
        if (await this.finishOrphan(eniId, false)) done.push(eniId);
      } catch (e) {
        this.o.log.info({ eniId, err: (e as Error).message }, 'orphan ENI not deleted yet; will retry');
      } finally {
        this.inFlightIds.delete(eniId);
      }
    }
    return done;
  }

  /**
   * Deletes an orphan once EC2 shows it `available` (NotFound = already gone). With
   * `wait`, polls until detached (up to the settle timeout); without, returns false
   * while it is still detaching. @throws Ec2Error
   */
  private async finishOrphan(eniId: string, wait: boolean): Promise<boolean> {
    try {
      if (wait) await this.waitForAttachment(eniId, 'detached');
      else {
        const [eni] = await this.o.ec2.describeEnis([eniId]);
        if (eni && (eni.status !== 'available' || eni.attachment)) return false;
      }
      if (this.o.gate.frozen) throw new Ec2Error('DeleteNetworkInterface', 'ReleasesFrozen', `not deleting ${eniId}: releases are frozen`);
      await this.o.ec2.deleteEni(eniId);
    } catch (e) {
      if (!(e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound')) throw e;
    }
    this.orphans.delete(eniId);
    return true;
  }

  /** Removes an ENI whose addresses are all available from the datastore (sync, so no ADD interleaves). */
  private dropFromDatastore(eniId: string): boolean {
    try {
      this.o.ds.removeEni(eniId, this.now());
      return true;
    } catch (e) {
      this.o.log.error({ eniId, err: (e as Error).message }, 'ENI still holds addresses in use; kept in the datastore');
      return false;
    }
  }

  /** Polls IMDS with backoff until it lists `eniId`; false after `imdsWaitMs`. Without IMDS, true. */
  private async waitForImds(eniId: string): Promise<boolean> {
    const imds = this.o.imds;
    if (!imds) return true;
    const deadline = this.now() + (this.o.imdsWaitMs ?? 30_000);
    let delay = 100;
    for (;;) {
      try {
        if ((await imds.enis()).some((e) => e.eniId === eniId)) return true;
      } catch (e) {
        this.o.log.debug({ eniId, err: (e as Error).message }, 'IMDS read failed while waiting for a new ENI');
      }
      if (this.now() + delay > deadline) return false;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 2000);
    }
  }

  private async waitForAttachment(eniId: string, want: 'attached' | 'detached'): Promise<Ec2Eni> {
    const deadline = this.now() + this.settleMs;
    let delay = 100;
    for (;;) {
      const [eni] = await this.o.ec2.describeEnis([eniId]);
      if (!eni) throw new Ec2Error('DescribeNetworkInterfaces', 'InvalidNetworkInterfaceID.NotFound', `${eniId} vanished`);
      if (want === 'attached' && eni.attachment?.status === 'attached') return eni;
      if (want === 'detached' && eni.status === 'available' && (!eni.attachment || eni.attachment.status === 'detached')) return eni;
      if (this.now() > deadline) throw new Ec2Error('DescribeNetworkInterfaces', 'Timeout', `${eniId} not ${want} after ${this.settleMs} ms`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 2000);
    }
  }
}
