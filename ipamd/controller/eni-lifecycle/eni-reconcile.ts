/**
 * The ENI reconcile (docs/design.md#10-the-warm-pool-at-depth item 6, docs/design.md#4-restore-after-restart rule 4): every
 * ENI_IPAM_RECONCILE_INTERVAL it compares, **by content**, what the datastore holds,
 * what IMDS lists and what EC2 describes for this instance's ENIs. EC2 is the truth;
 * IMDS is a hint that the OS sees an interface.
 *
 * One pass, run exclusively with the pool controller (no grow/shrink step interleaves):
 * 1. one complete DescribeNetworkInterfaces (`attachment.instance-id=<us>`, every page).
 *    If it fails, the pass changes nothing (no decision from a failed or partial describe);
 * 2. IMDS ENI list (failure → no new ENI is adopted this pass; nothing else depends on it);
 * 3. per ENI of ours that EC2 shows `attached`:
 *    - not in the datastore (crash after attach, attach while IMDS lagged): adopted once
 *      IMDS lists it, else kept pending and retried with backoff;
 *    - in the datastore: secondary IPs EC2 shows that the datastore lacks are added;
 *      datastore IPs EC2 no longer shows are removed only when nobody holds them
 *      (available); a held one is kept and reported (`heldMissing`) — never dropped;
 *    - DeleteOnTermination false (crash between attach and modify) → set;
 * 4. datastore ENIs EC2 no longer shows attached lose their unheld IPs (and leave when empty);
 * 5. orphans (ENIs we detached) are deleted once `available` (releases not frozen).
 *
 * IPs IMDS lists that EC2 does not (`imdsOnly`) and EC2 IPs IMDS misses (`imdsMissing`)
 * are reported only: an IMDS-only IP is never added, an IMDS-missing one never removed.
 *
 * Names, one per concept: the *evidence pass* (restore/reconciler.ts) reads the CRI
 * runtime, Kubernetes and the kernel against the datastore's allocations; the *ENI
 * reconcile* (controller/eni-lifecycle/eni-reconcile.ts) reads EC2 and IMDS against the
 * datastore's ENIs and addresses; *CNI GC* (service/gc.ts) is the runtime's GC verb; the
 * *leaked-ENI sweep* (controller/eni-lifecycle/leak-sweep.ts) deletes ENIs no node uses.
 */
import { monoNow } from '../../clock.js';
import ipaddr from 'ipaddr.js';
import type { Ec2Port, Ec2Eni } from '../../cloud/ec2-port.js';
import type { ImdsEniAddresses } from '../../cloud/imds.js';
import type { EniInventory } from '../../datastore/roles.js';
import type { Logger } from '../../log.js';
import { isOurEni } from './eni-ownership.js';
import type { EniManager, ImdsEniLister } from './eni-manager.js';
import { PeriodicTask } from '../periodic-task.js';

/** The part of the pool controller the reconcile needs. */
export interface ExclusivePool {
  /** Runs `fn` while no pool step runs. */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** Asks for a pool step (after IPs were added). */
  trigger(): void;
}

/** Options of {@link EniReconciler}. */
export interface EniReconcilerOptions {
  ec2: Ec2Port;
  imds: ImdsEniLister;
  ds: EniInventory;
  enis: EniManager;
  pool: ExclusivePool;
  log: Logger;
  instanceId: string;
  /** Period of the pass (ms). */
  intervalMs: number;
  /** First retry delay while ENIs are pending (ms, default 250; doubles up to `intervalMs`). */
  retryMinMs?: number;
  now?: () => number;
  /** Told of every pass's report, failed passes included (metrics). */
  onPass?: (r: ReconcileReport) => void;
}

/** What one pass found and did. */
export interface ReconcileReport {
  at: number;
  /** False when the EC2 describe failed: nothing was changed. */
  ok: boolean;
  error?: string;
  imdsOk: boolean;
  adoptedEnis: string[];
  /** ENIs dropped from the datastore: EC2 no longer shows them attached and no pod holds their IPs. */
  removedEnis: string[];
  pendingEnis: string[];
  addedIps: string[];
  removedIps: string[];
  /** Held IPs EC2 no longer shows on our ENIs (kept; an operator should look). IP lists below may hold /28 prefixes (CIDR) too. */
  heldMissing: string[];
  imdsOnly: string[];
  imdsMissing: string[];
  deleteOnTerminationFixed: string[];
  orphansDeleted: string[];
}

/** Runs the reconcile on a timer, with quick retries while ENIs are pending. */
export class EniReconciler {
  private readonly now: () => number;
  /** The periodic pass; its extra run is the quick retry while ENIs are pending. */
  private readonly task: PeriodicTask;
  /** Delay of the quick retry scheduled (ms), 0 when none is. */
  private retryMs = 0;
  /** The first pass is held back by a start-up delay (no quick retry before it). */
  private firstPassDelayed = false;
  private running?: Promise<ReconcileReport>;
  private stopped = false;
  /** The last pass's report (for status). */
  last?: ReconcileReport;
  /** Passes run. */
  passes = 0;

  constructor(private readonly o: EniReconcilerOptions) {
    this.now = o.now ?? monoNow;
    this.task = new PeriodicTask({ intervalMs: o.intervalMs, run: () => this.runOnce() });
    o.enis.onPending(() => this.kick());
  }

  /** Schedules a quick pass (an ENI became pending or an orphan), unless one is already due sooner. */
  private kick(): void {
    if (this.stopped || this.retryMs > 0) return;
    this.retryMs = this.o.retryMinMs ?? 250;
    this.task.runAfter(this.retryMs);
  }

  /**
   * Starts the periodic pass: the first now, or after `firstPassDelayMs` (ms; a start-up
   * jitter: a quick retry asked for before then does not come sooner), then one every
   * `intervalMs`.
   */
  start(firstPassDelayMs = 0): void {
    if (firstPassDelayMs > 0) {
      this.retryMs = firstPassDelayMs;
      this.firstPassDelayed = true;
    }
    this.task.start(firstPassDelayMs);
  }

  /** Stops the timers and waits for a pass in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.task.stop();
    await this.running?.catch(() => undefined);
  }

  /** Runs one pass now (coalesced with one in flight). Never throws. */
  runOnce(): Promise<ReconcileReport> {
    if (this.firstPassDelayed) {
      this.firstPassDelayed = false;
      this.retryMs = 0; // quick retries after the first pass start from retryMinMs
    }
    this.running ??= this.o.pool
      .exclusive(() => this.pass())
      .catch((e: Error) => {
        this.o.log.error({ err: e.message }, 'reconcile pass failed');
        return this.empty(false, e.message);
      })
      .then((r) => {
        this.last = r;
        this.passes++;
        try {
          this.o.onPass?.(r);
        } catch (e) {
          this.o.log.warn({ err: (e as Error).message }, 'reconcile: pass observer failed');
        }
        this.scheduleRetry(r);
        return r;
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private empty(ok: boolean, error?: string): ReconcileReport {
    return {
      at: this.now(),
      ok,
      ...(error ? { error } : {}),
      imdsOk: false,
      adoptedEnis: [],
      removedEnis: [],
      pendingEnis: this.o.enis.pendingIds(),
      addedIps: [],
      removedIps: [],
      heldMissing: [],
      imdsOnly: [],
      imdsMissing: [],
      deleteOnTerminationFixed: [],
      orphansDeleted: [],
    };
  }

  private async pass(): Promise<ReconcileReport> {
    const { ec2, ds, enis, log } = this.o;
    let attached: Ec2Eni[];
    try {
      attached = await ec2.describeEnisByFilters({ 'attachment.instance-id': [this.o.instanceId] });
    } catch (e) {
      log.warn({ err: (e as Error).message }, 'reconcile: EC2 describe failed; no change this pass');
      return this.empty(false, (e as Error).message);
    }
    const r = this.empty(true);
    let imdsEnis: ImdsEniAddresses[] | undefined;
    try {
      imdsEnis = await this.o.imds.eniAddresses();
      r.imdsOk = true;
    } catch (e) {
      log.info({ err: (e as Error).message }, 'reconcile: IMDS unreadable; no ENI adopted this pass');
    }
    const imdsById = new Map((imdsEnis ?? []).map((e) => [e.eniId, e]));
    const now = this.now();
    const seen = new Set<string>();
    for (const eni of attached) {
      // A detaching ENI is on its way out: for the datastore it is as good as gone.
      if (eni.attachment?.status !== 'detaching') seen.add(eni.eniId);
      const primary = eni.attachment?.deviceIndex === 0;
      if (!primary && !isOurEni(eni, this.o.instanceId)) continue;
      const status = eni.attachment?.status;
      if (!ds.getEni(eni.eniId)) {
        if (primary) continue;
        if (status === 'detaching' || (enis.orphanIds().includes(eni.eniId) && status !== 'attached')) {
          enis.markOrphan(eni.eniId, eni.attachment?.deviceIndex ?? -1);
          continue;
        }
        if (status !== 'attached' || !imdsById.has(eni.eniId)) {
          enis.markPending(eni.eniId, eni.attachment?.deviceIndex ?? -1);
          continue;
        }
        // The ENI's own subnet CIDR (it may be outside the node subnet): its route table gateway.
        enis.learnSubnetCidr(eni.subnetId, imdsById.get(eni.eniId)!.subnetCidr);
        const subnetId = eni.subnetId || enis.instance.subnetId;
        if (subnetId !== enis.instance.subnetId && !enis.subnetCidrOf(subnetId)) {
          // Not the node subnet's as a guess: a wrong gateway breaks every pod on the ENI.
          enis.markPending(eni.eniId, eni.attachment?.deviceIndex ?? -1);
          log.warn(
            { eniId: eni.eniId, subnetId: eni.subnetId },
            "reconcile: an attached ENI of ours is not adopted yet: its subnet's CIDR is unknown (IMDS lists none); the next pass retries",
          );
          continue;
        }
        enis.adopt(eni);
        r.adoptedEnis.push(eni.eniId);
        r.addedIps.push(...eni.secondaryIps);
        log.info(
          { eniId: eni.eniId, deviceIndex: eni.attachment?.deviceIndex, ips: eni.secondaryIps.length },
          'reconcile: adopted an attached ENI of ours',
        );
      } else if (status === 'attached') {
        this.compareIps(eni, r, now);
      }
      if (!primary && eni.attachment && !eni.attachment.deleteOnTermination)
        enis.needsDeleteOnTermination.add(eni.eniId);
      const im = imdsById.get(eni.eniId);
      if (im) this.compareImds(eni, im, r);
    }
    for (const info of ds.listEnis()) {
      if (info.isPrimary || seen.has(info.eniId)) continue;
      // EC2 (complete describe) no longer shows it attached to us: unheld addresses go; held ones stay, reported.
      const before = ds.eniIps(info.eniId);
      ds.removePrefixes(ds.eniPrefixes(info.eniId), now);
      ds.removeIps(
        ds.eniIps(info.eniId).filter((ip) => ds.prefixOf(ip) === undefined),
        now,
      );
      const kept = ds.eniIps(info.eniId);
      r.removedIps.push(...before.filter((ip) => !kept.includes(ip)));
      r.heldMissing.push(...kept.filter((ip) => ds.ipState(ip, now) === 'assigned'));
      if (kept.length === 0) {
        ds.removeEni(info.eniId, now);
        r.removedEnis.push(info.eniId);
        // Still detaching (someone detached our ENI): keep its device index, delete it once available.
        if (attached.some((e) => e.eniId === info.eniId)) enis.markOrphan(info.eniId, info.deviceNumber);
      }
      log.warn({ eniId: info.eniId, kept }, 'reconcile: ENI in the datastore is not attached in EC2');
    }
    const listed = new Set(attached.map((e) => e.eniId));
    for (const eniId of enis.pendingIds()) if (!listed.has(eniId)) enis.forget(eniId);
    await this.fixDeleteOnTermination(attached, r);
    r.orphansDeleted = await enis.retryOrphans();
    r.pendingEnis = enis.pendingIds();
    if (r.addedIps.length) this.o.pool.trigger();
    const changed =
      r.adoptedEnis.length +
      r.addedIps.length +
      r.removedIps.length +
      r.heldMissing.length +
      r.deleteOnTerminationFixed.length +
      r.orphansDeleted.length;
    (changed ? log.info.bind(log) : log.debug.bind(log))(
      { ...r, imdsOnly: r.imdsOnly.length, imdsMissing: r.imdsMissing.length },
      'reconcile pass',
    );
    return r;
  }

  /** Adds EC2-only secondary IPs; removes datastore-only ones nobody holds. */
  private compareIps(eni: Ec2Eni, r: ReconcileReport, now: number): void {
    const { ds, log } = this.o;
    const ec2Ips = new Set(eni.secondaryIps);
    const prefixes = eni.ipv4Prefixes
      .filter((c) => ipaddr.IPv4.isValidCIDRFourPartDecimal(c))
      .map((c) => ipaddr.IPv4.parseCIDR(c));
    // Addresses inside a delegated prefix are on EC2 too (prefix mode keeps them per /28).
    const onEc2 = (ip: string) =>
      ec2Ips.has(ip) ||
      (ipaddr.IPv4.isValidFourPartDecimal(ip) && prefixes.some((p) => ipaddr.IPv4.parse(ip).match(p)));
    const have = new Set(ds.eniIps(eni.eniId));
    const add = eni.secondaryIps.filter((ip) => !have.has(ip));
    if (add.length) {
      try {
        ds.addIps(eni.eniId, add);
        r.addedIps.push(...add);
        log.info({ eniId: eni.eniId, ips: add }, 'reconcile: added IPs EC2 shows on our ENI');
      } catch (e) {
        log.error({ eniId: eni.eniId, err: (e as Error).message }, 'reconcile: could not add IPs');
      }
    }
    // Prefix delegation: /28 prefixes EC2 shows that the datastore lacks are added; ones EC2
    // no longer shows leave only when none of their addresses is in use.
    const havePrefixes = new Set(ds.eniPrefixes(eni.eniId));
    const addPrefixes = eni.ipv4Prefixes.filter((c) => !havePrefixes.has(c));
    if (addPrefixes.length) {
      try {
        ds.addPrefixes(eni.eniId, addPrefixes);
        r.addedIps.push(...addPrefixes);
        log.info({ eniId: eni.eniId, prefixes: addPrefixes }, 'reconcile: added /28 prefixes EC2 shows on our ENI');
      } catch (e) {
        log.error({ eniId: eni.eniId, err: (e as Error).message }, 'reconcile: could not add prefixes');
      }
    }
    const ec2Prefixes = new Set(eni.ipv4Prefixes);
    const gonePrefixes = [...havePrefixes].filter((c) => !ec2Prefixes.has(c));
    if (gonePrefixes.length) {
      const kept = ds.removePrefixes(gonePrefixes, now);
      r.removedIps.push(...gonePrefixes.filter((c) => !kept.includes(c)));
      if (kept.length)
        log.error(
          { eniId: eni.eniId, prefixes: kept },
          'reconcile: EC2 no longer shows prefixes with addresses in use; kept',
        );
    }
    // Secondary IPs only: addresses of a /28 prefix come and go with their prefix (above).
    const gone = [...have].filter((ip) => ds.prefixOf(ip) === undefined && !onEc2(ip));
    if (gone.length === 0) return;
    const removable = gone.filter((ip) => ds.ipState(ip, now) === 'available');
    ds.removeIps(removable, now);
    r.removedIps.push(...removable);
    const held = gone.filter((ip) => ds.ipState(ip, now) === 'assigned');
    r.heldMissing.push(...held);
    if (removable.length)
      log.warn({ eniId: eni.eniId, ips: removable }, 'reconcile: removed unheld IPs EC2 no longer shows');
    if (held.length)
      log.error(
        { eniId: eni.eniId, ips: held },
        'reconcile: EC2 no longer shows IPs pods hold; kept (never dropped while held)',
      );
  }

  /** Reports the content differences between EC2 and IMDS for one ENI (hint only). */
  private compareImds(eni: Ec2Eni, im: ImdsEniAddresses, r: ReconcileReport): void {
    const ec2Ips = new Set(eni.secondaryIps);
    const imdsIps = new Set(im.localIpv4s.filter((ip) => ip !== eni.primaryIp));
    for (const ip of imdsIps) if (!ec2Ips.has(ip)) r.imdsOnly.push(ip);
    for (const ip of ec2Ips) if (!imdsIps.has(ip)) r.imdsMissing.push(ip);
    const ec2Prefixes = new Set(eni.ipv4Prefixes);
    const imdsPrefixes = new Set(im.ipv4Prefixes);
    for (const c of imdsPrefixes) if (!ec2Prefixes.has(c)) r.imdsOnly.push(c);
    for (const c of ec2Prefixes) if (!imdsPrefixes.has(c)) r.imdsMissing.push(c);
  }

  private async fixDeleteOnTermination(attached: Ec2Eni[], r: ReconcileReport): Promise<void> {
    const { ec2, enis, log } = this.o;
    for (const eniId of [...enis.needsDeleteOnTermination]) {
      const eni = attached.find((e) => e.eniId === eniId);
      if (!eni?.attachment) {
        enis.needsDeleteOnTermination.delete(eniId);
        continue;
      }
      try {
        await ec2.setDeleteOnTermination(eniId, eni.attachment.attachmentId);
        enis.needsDeleteOnTermination.delete(eniId);
        r.deleteOnTerminationFixed.push(eniId);
        log.info({ eniId }, 'reconcile: set DeleteOnTermination');
      } catch (e) {
        log.warn({ eniId, err: (e as Error).message }, 'reconcile: could not set DeleteOnTermination; will retry');
      }
    }
  }

  /** While ENIs are pending or orphaned, retry sooner than the interval (backoff). */
  private scheduleRetry(r: ReconcileReport): void {
    this.task.cancelExtra();
    if (this.stopped || (r.ok && r.pendingEnis.length === 0 && this.o.enis.orphanIds().length === 0)) {
      this.retryMs = 0;
      return;
    }
    this.retryMs = Math.min(this.retryMs ? this.retryMs * 2 : (this.o.retryMinMs ?? 250), this.o.intervalMs);
    this.task.runAfter(this.retryMs);
  }
}
