/**
 * The evidence pass: at start and then every ENI_IPAM_GC_INTERVAL it reads the
 * CRI runtime (sandboxes and its `Version` identity), the Kubernetes pod cache and the
 * node's kernel (one `ip -json -batch` run), applies {@link mergeEvidence} to the
 * datastore (adopt sandboxes it lacks, release leaked allocations into cooldown), and
 * keeps the release gate honest (docs/design.md#4-restore-after-restart rules 3 and 5): an unreadable source
 * (gate source `cri`, `kube`, `kernel`) or a suspect one (same source, the reason says
 * why) freezes releases, and so does a pass the release brake held (`brake`); a clean,
 * plausible read of every source lifts them, including the start-up freeze held for a
 * missing or corrupt checkpoint.
 *
 * Names, one per concept: the *evidence pass* (restore/reconciler.ts) reads the CRI
 * runtime, Kubernetes and the kernel against the datastore's allocations; the *ENI
 * reconcile* (controller/eni-lifecycle/eni-reconcile.ts) reads EC2 and IMDS against the
 * datastore's ENIs and addresses; *CNI GC* (service/gc.ts) is the runtime's GC verb; the
 * *leaked-ENI sweep* (controller/eni-lifecycle/leak-sweep.ts) deletes ENIs no node uses.
 */
import { monoNow } from '../clock.js';
import type { Assignments, DatastoreViews, RestoreTarget } from '../datastore/roles.js';
import type { Allocation } from '../datastore/types.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import { PeriodicTask } from '../controller/periodic-task.js';
import type { Logger } from '../log.js';
import type { KernelReader } from './kernel-source.js';
import {
  mergeEvidence,
  type KernelRead,
  type MergeInput,
  type MergeResult,
  type PodEvidence,
  type SandboxEvidence,
  type SourceRead,
} from './merge.js';
import { formatIdentity, type RuntimeIdentity } from './plausibility.js';
import { combineMerges, mergeV6Evidence, releaseV6Unvouched, settleUnowned, type V6Evidence } from './v6-evidence.js';

/** Anything that lists READY sandboxes, throwing when it cannot (CriSource). */
export interface SandboxLister {
  listReadySandboxes(): Promise<SandboxEvidence[]>;
  /** The runtime's CRI `Version` (name, version); undefined when it does not answer it. Never throws. */
  runtimeIdentity?(): Promise<RuntimeIdentity | undefined>;
}

/** Anything that holds a synced pod cache (KubePodSource). */
export interface PodCache {
  snapshot(): { synced: boolean; pods: PodEvidence[]; lastError?: string; nodeRuntimeVersion?: string };
}

/** Options of {@link EvidenceReconciler}. */
/** What one pass read (see `readSources`): `readAt` in ms of the reconciler's clock, before the reads. */
interface PassReads {
  readAt: number;
  cri: SourceRead<SandboxEvidence>;
  identity: RuntimeIdentity | undefined;
  kernel: KernelRead;
  kube: SourceRead<PodEvidence>;
  nodeRuntimeVersion: string | undefined;
}

export interface ReconcilerOptions {
  ds: RestoreTarget & Assignments & DatastoreViews;
  gate: ReleaseGate;
  log: Logger;
  cri: SandboxLister;
  /** Undefined when no Kubernetes source is configured. */
  kube?: PodCache;
  /** The node's kernel (kernel-source.ts). */
  kernel: KernelReader;
  /** The runtime's endpoint and this node's name, for freeze reasons. */
  criEndpoint?: string;
  nodeName?: string;
  /** The runtime identity this boot's checkpoint recorded, if any. */
  recordedIdentity?: RuntimeIdentity;
  /** Called with the runtime identity whenever a pass trusted it (to record it in the checkpoint). */
  onTrustedIdentity?: (id: RuntimeIdentity) => void;
  persist: () => Promise<void>;
  intervalMs: number;
  /** Minimum allocation age before a GC release (ms); covers ADDs still in progress. */
  graceMs: number;
  networkName: string;
  now?: () => number;
  /** Called after every pass (metrics, tests). */
  onPass?: (r: PassReport) => void;
  /** `ipv6`/`dual` mode: the IPv6 allocations, judged by the same evidence (v6-evidence.ts). */
  v6?: V6Evidence;
}

/** What one pass did. */
export interface PassReport {
  criOk: boolean;
  kubeOk: boolean | 'absent';
  kernelOk: boolean;
  /** Pod IPs the kernel showed wired, and pod veths it showed (0 when unreadable). */
  kernelPods: number;
  kernelPodVeths: number;
  /** Runtime identity as `containerd 1.6.20`, or `identity unknown`. */
  runtime: string;
  adopted: number;
  released: number;
  conflicts: number;
  live: number;
  /** Allocations only the kernel kept live. */
  kernelVouched: number;
  /** Unverified IPs kept unverified because the kernel shows them wired. */
  keptUnverified: number;
  /** Reasons a source is suspect, by source. */
  suspect: { cri?: string; kube?: string };
  /** Set when the release brake held this pass. */
  brake?: string;
  canRelease: boolean;
}

/** Runs the evidence pass: at start (restore), then every ENI_IPAM_GC_INTERVAL and sooner while a source is unreadable. */
export class EvidenceReconciler {
  /** The periodic pass; its extra run is the retry while a source is unreadable. */
  private readonly task: PeriodicTask;
  private retryDelayMs = 0;
  private stopped = false;
  private running?: Promise<PassReport>;
  private readonly now: () => number;
  /** Freeze reasons this reconciler holds, by gate source (to log changes once). */
  private readonly reasons = new Map<string, string>();
  /** The runtime identity recorded for this boot (from the checkpoint, then from trusted passes). */
  private recorded?: RuntimeIdentity;
  private identityUnsaved = false;

  constructor(private readonly o: ReconcilerOptions) {
    this.now = o.now ?? monoNow;
    this.task = new PeriodicTask({ intervalMs: o.intervalMs, run: () => this.runPass() });
    if (o.recordedIdentity) this.recorded = o.recordedIdentity;
  }

  /** The runtime identity recorded for this boot, if any (written into the checkpoint). */
  get recordedIdentity(): RuntimeIdentity | undefined {
    return this.recorded;
  }

  /** Starts the periodic pass (the first one runs at once; call {@link runPass} to await it). */
  start(): void {
    this.task.start();
  }

  /** Stops the timer and waits for a pass in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.task.stop();
    await this.running?.catch(() => undefined);
  }

  /** Runs one pass now (coalesced with a pass already running). */
  runPass(): Promise<PassReport> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Freezes (reason) or lifts (undefined) `source`, logging a new or changed reason once. */
  private hold(source: string, reason: string | undefined): void {
    const was = this.reasons.get(source);
    if (reason === undefined) {
      this.o.gate.lift(source);
      if (was !== undefined) this.o.log.info({ source }, 'freeze lifted');
      this.reasons.delete(source);
      return;
    }
    this.o.gate.freeze(source, reason);
    if (was !== reason) this.o.log.warn({ source, reason }, 'releases frozen');
    this.reasons.set(source, reason);
  }

  private async pass(): Promise<PassReport> {
    const { ds, log } = this.o;
    const reads = await this.readSources();
    const { cri, kube, kernel, identity, readAt } = reads;
    const now = this.now();
    const input = this.mergeInput(reads, now);
    const m4 = mergeEvidence(input);
    const v6 = this.o.v6;
    const m6 = v6 && mergeV6Evidence(input, v6);
    const m = m6 ? combineMerges(m4, m6) : m4;
    this.holdSources(reads, m);
    if (
      m.identityTrusted &&
      identity &&
      (!this.recorded || formatIdentity(this.recorded) !== formatIdentity(identity))
    ) {
      this.recorded = identity;
      this.identityUnsaved = true;
      this.o.onTrustedIdentity?.(identity);
    }
    const adopted = this.adopt(m);
    // The memory of DELs expires once a plausible runtime read no longer lists the sandbox
    // (a suspect read proves nothing; persisted with the next write).
    if (cri.ok === true && !m.suspect.cri)
      ds.expireUnassigned(new Set(cri.items.map((s) => s.id)), readAt - this.o.graceMs);
    let released = 0;
    let releasedV6 = 0;
    if (m.canRelease && m6 && this.o.v6) {
      const r = releaseV6Unvouched(this.o.v6, ds.allocations(), m4, m6, now, log);
      released = this.unassignUnvouched(r.v4, now);
      releasedV6 = r.v6;
    } else if (m.canRelease) released = this.unassignUnvouched(m.release, now);
    const settled = m6 && v6 ? settleUnowned(v6, m6, m.canRelease, kernel, now, log) : { claimed: 0, freed: 0 };
    if (releasedV6 + settled.claimed + settled.freed > 0)
      await this.o.v6?.persist().catch((e: Error) => log.error({ err: e.message }, 'IPv6 checkpoint write failed'));
    for (const c of m.conflicts)
      log.error(
        { sandbox: c.sandbox, holder: c.holder },
        'runtime sandbox uses an IP another allocation holds; left unchanged',
      );
    if (adopted + released > 0 || this.identityUnsaved) {
      // A failed write loses nothing: after a crash the checkpoint is re-merged with the same evidence.
      this.identityUnsaved = false;
      await this.o
        .persist()
        .catch((e: Error) => log.error({ err: e.message }, 'checkpoint write after evidence pass failed'));
    }
    if (m.canRelease) this.verifyTheRest(m);
    const report: PassReport = {
      criOk: cri.ok === true,
      kubeOk: kube.ok === 'absent' ? 'absent' : kube.ok === true,
      kernelOk: kernel.ok,
      kernelPods: kernel.ok ? kernel.podIps.size : 0,
      kernelPodVeths: kernel.ok ? kernel.podVeths : 0,
      runtime: formatIdentity(identity),
      adopted: adopted + settled.claimed,
      released: released + releasedV6,
      conflicts: m.conflicts.length,
      live: m.live.length + adopted,
      kernelVouched: m.kernelVouched.length,
      keptUnverified: m.keepUnverified.length,
      suspect: m.suspect,
      ...(m.brake?.held ? { brake: m.brake.reason! } : {}),
      canRelease: m.canRelease,
    };
    log.debug(report, 'evidence pass');
    this.scheduleRetry(report);
    this.o.onPass?.(report);
    return report;
  }

  /**
   * Reads the sources of one pass: the runtime's sandboxes and identity and the kernel
   * together (the kernel's is one process, the runtime's a few RPCs), then the API server's
   * pod cache. `readAt` is taken before the reads: the grace counts from there, as what they
   * return predates every allocation made after it. Never rejects (a failed read is `ok: false`).
   */
  private async readSources(): Promise<PassReads> {
    const readAt = this.now();
    const [cri, identity, kernel] = await Promise.all([
      this.o.cri.listReadySandboxes().then(
        (items): SourceRead<SandboxEvidence> => ({ ok: true, items }),
        (e: Error): SourceRead<SandboxEvidence> => ({ ok: false, reason: e.message }),
      ),
      this.o.cri.runtimeIdentity?.().catch(() => undefined),
      this.o.kernel.readKernel().then(
        (k): KernelRead => ({ ok: true, podIps: new Set(k.pods.keys()), podVeths: k.podVeths, devOf: k.pods }),
        (e: Error): KernelRead => ({ ok: false, reason: e.message }),
      ),
    ]);
    let kube: SourceRead<PodEvidence> = { ok: 'absent' };
    let nodeRuntimeVersion: string | undefined;
    if (this.o.kube) {
      const snap = this.o.kube.snapshot();
      if (snap.synced) {
        kube = { ok: true, items: snap.pods };
        nodeRuntimeVersion = snap.nodeRuntimeVersion;
      } else kube = { ok: false, reason: snap.lastError ?? 'pod list not synced yet' };
    }
    return { readAt, cri, identity, kernel, kube, nodeRuntimeVersion };
  }

  /** The input of the pure merge (merge.ts) of this pass's reads with the datastore's allocations, at `now` (ms). */
  private mergeInput(r: PassReads, now: number): MergeInput {
    const { ds } = this.o;
    const unverifiedIps = ds.unverifiedIps();
    return {
      allocations: ds.allocations(),
      cri: r.cri,
      kube: r.kube,
      kernel: r.kernel,
      unverifiedIps,
      now,
      readAt: r.readAt,
      graceMs: this.o.graceMs,
      networkName: this.o.networkName,
      ifName: 'eth0',
      isOurIp: (ip) => ds.ipState(ip, now) !== undefined,
      holderOf: (ip) => ds.holderOf(ip),
      wasUnassigned: (id) => ds.wasUnassigned(id),
      ...(this.o.criEndpoint ? { criEndpoint: this.o.criEndpoint } : {}),
      ...(this.o.nodeName ? { nodeName: this.o.nodeName } : {}),
      ...(r.identity ? { criIdentity: r.identity } : {}),
      ...(r.nodeRuntimeVersion ? { nodeRuntimeVersion: r.nodeRuntimeVersion } : {}),
      ...(this.recorded ? { recordedIdentity: this.recorded } : {}),
    };
  }

  /** Freezes or lifts each source on the release gate: unreadable or suspect freezes, and a held brake. */
  private holdSources({ cri, kube, kernel }: PassReads, m: MergeResult): void {
    this.hold(
      'cri',
      cri.ok === true
        ? m.suspect.cri && `suspect: ${m.suspect.cri}`
        : `container runtime unreadable: ${cri.ok === false ? cri.reason : 'not configured'}`,
    );
    if (this.o.kube)
      this.hold(
        'kube',
        kube.ok === true
          ? m.suspect.kube && `suspect: ${m.suspect.kube}`
          : `Kubernetes pods unreadable: ${kube.ok === false ? kube.reason : 'not configured'}`,
      );
    this.hold('kernel', kernel.ok ? undefined : kernel.reason);
    this.hold('brake', m.brake?.held ? m.brake.reason : undefined);
  }

  /** Restores the running sandboxes the checkpoint lacked (`m.adopt`); @returns how many were adopted. */
  private adopt(m: MergeResult): number {
    const { ds, log } = this.o;
    let adopted = 0;
    for (const a of m.adopt) {
      const r = ds.restoreAllocation(a);
      if (r === 'restored') {
        adopted++;
        log.info(
          { containerID: a.containerID, ip: a.ipv4, pod: a.pod },
          'adopted a running sandbox the checkpoint lacked',
        );
      } else if (r === 'releasing') {
        // The unassign was already sent: EC2's answer decides (shrink-executor / prefix-release settle it).
        adopted++;
        log.error(
          { containerID: a.containerID, ip: a.ipv4, pod: a.pod },
          'adopted a running sandbox whose IP has an unassign in flight at EC2: kept if EC2 keeps the IP, flagged (pending, ADD refused) if EC2 takes it',
        );
      }
    }
    for (const s of m.stale)
      log.debug({ sandbox: s.id, ip: s.ip }, 'runtime still lists a sandbox whose DEL was served; not adopted');
    for (const a of m.kernelVouched)
      log.debug(
        { containerID: a.containerID, ip: a.ipv4 },
        'kept: the kernel shows this IP wired to a pod veth although no other source lists it',
      );
    return adopted;
  }

  /** Only when releases are allowed: unassigns (into cooldown) the allocations no source vouches for; @returns how many. */
  private unassignUnvouched(release: Allocation[], now: number): number {
    const { ds, log } = this.o;
    let released = 0;
    for (const a of release) {
      if (ds.unassign(a, now)) {
        released++;
        log.info(
          { containerID: a.containerID, ip: a.ipv4, pod: a.pod },
          'GC: no source vouches for this allocation; released into cooldown',
        );
      }
    }
    return released;
  }

  /**
   * Only when `m.canRelease`: every source read cleanly and what is in use was adopted, so
   * the rest is verified free, except what the kernel shows wired to a pod (kept unverified:
   * never handed out, never released); then the checkpoint's freeze is lifted.
   */
  private verifyTheRest(m: MergeResult): void {
    const { ds, log } = this.o;
    const keep = new Set(m.keepUnverified);
    const verified = ds.verifyAll((ip) => keep.has(ip));
    if (verified > 0)
      log.info({ verified, keptUnverified: keep.size }, 'IPs found at start without a checkpoint are verified free');
    if (keep.size > 0)
      log.warn(
        { ips: m.keepUnverified },
        'IPs found at start without a checkpoint that the kernel shows wired to pods no source lists: kept unverified',
      );
    this.o.gate.lift('checkpoint');
  }

  /** An unreadable source is retried with jittered exponential backoff (0.5 s → interval), not only on the GC timer. */
  private scheduleRetry(r: PassReport): void {
    this.task.cancelExtra();
    if (this.stopped || (r.criOk && r.kubeOk !== false && r.kernelOk)) {
      this.retryDelayMs = 0;
      return;
    }
    this.retryDelayMs = Math.min(this.retryDelayMs ? this.retryDelayMs * 2 : 500, this.o.intervalMs);
    const delay = this.retryDelayMs * (0.8 + Math.random() * 0.4);
    this.task.runAfter(delay);
  }
}
