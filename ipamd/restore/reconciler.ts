/**
 * The evidence reconciler: at start and then every ENI_IPAM_GC_INTERVAL it reads the
 * CRI runtime and the Kubernetes pod cache, applies {@link mergeEvidence} to the
 * datastore (adopt sandboxes it lacks, release leaked allocations into cooldown), and
 * keeps the release gate honest: any unreadable source freezes releases (DESIGN §4
 * rule 3); a clean read of every source lifts the freeze, including the start-up one
 * held for a missing or corrupt checkpoint.
 */
import type { Datastore } from '../datastore/datastore.js';
import type { ReleaseGate } from '../controller/release-gate.js';
import type { Logger } from '../log.js';
import { mergeEvidence, type MergeResult, type PodEvidence, type SandboxEvidence, type SourceRead } from './merge.js';

/** Anything that lists READY sandboxes, throwing when it cannot (CriSource). */
export interface SandboxLister {
  listReadySandboxes(): Promise<SandboxEvidence[]>;
}

/** Anything that holds a synced pod cache (KubePodSource). */
export interface PodCache {
  snapshot(): { synced: boolean; pods: PodEvidence[]; lastError?: string };
}

/** Options of {@link EvidenceReconciler}. */
export interface ReconcilerOptions {
  ds: Datastore;
  gate: ReleaseGate;
  log: Logger;
  cri: SandboxLister;
  /** Undefined when no Kubernetes source is configured. */
  kube?: PodCache;
  persist: () => Promise<void>;
  intervalMs: number;
  /** Minimum allocation age before a GC release (ms); covers ADDs still in progress. */
  graceMs: number;
  networkName: string;
  now?: () => number;
  /** Called after every pass (metrics, tests). */
  onPass?: (r: PassReport) => void;
}

/** What one pass did. */
export interface PassReport {
  criOk: boolean;
  kubeOk: boolean | 'absent';
  adopted: number;
  released: number;
  conflicts: number;
  live: number;
  canRelease: boolean;
}

/** Periodic restore/GC pass over the evidence sources. */
export class EvidenceReconciler {
  private timer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private retryDelayMs = 0;
  private stopped = false;
  private running?: Promise<PassReport>;
  private readonly now: () => number;

  constructor(private readonly o: ReconcilerOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Starts the periodic pass (the first one runs at once; call {@link runPass} to await it). */
  start(): void {
    this.timer = setInterval(() => void this.runPass().catch(() => undefined), this.o.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a pass in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.retryTimer);
    await this.running?.catch(() => undefined);
  }

  /** Runs one pass now (coalesced with a pass already running). */
  runPass(): Promise<PassReport> {
    this.running ??= this.pass().finally(() => { this.running = undefined; });
    return this.running;
  }

  private async pass(): Promise<PassReport> {
    const { ds, gate, log } = this.o;
    let cri: SourceRead<SandboxEvidence>;
    try {
      cri = { ok: true, items: await this.o.cri.listReadySandboxes() };
      gate.lift('cri');
    } catch (e) {
      cri = { ok: false, reason: (e as Error).message };
      gate.freeze('cri', `container runtime unreadable: ${(e as Error).message}`);
    }
    let kube: SourceRead<PodEvidence> = { ok: 'absent' };
    if (this.o.kube) {
      const snap = this.o.kube.snapshot();
      if (snap.synced) {
        kube = { ok: true, items: snap.pods };
        gate.lift('kube');
      } else {
        kube = { ok: false, reason: snap.lastError ?? 'pod list not synced yet' };
        gate.freeze('kube', `Kubernetes pods unreadable: ${snap.lastError ?? 'not synced yet'}`);
      }
    }
    const now = this.now();
    const m: MergeResult = mergeEvidence({
      allocations: ds.allocations(), cri, kube, now, graceMs: this.o.graceMs, networkName: this.o.networkName, ifName: 'eth0',
      isOurIp: (ip) => ds.ipState(ip, now) !== undefined, holderOf: (ip) => ds.holderOf(ip), wasReleased: (id) => ds.wasReleased(id),
    });
    let adopted = 0;
    for (const a of m.adopt) {
      const r = ds.restoreAllocation(a);
      if (r === 'restored') {
        adopted++;
        log.info({ containerID: a.containerID, ip: a.ipv4, pod: a.pod }, 'adopted a running sandbox the checkpoint lacked');
      } else if (r === 'releasing') {
        // The unassign was already sent: EC2's answer decides (shrink-executor / prefix-release settle it).
        adopted++;
        log.error({ containerID: a.containerID, ip: a.ipv4, pod: a.pod }, 'adopted a running sandbox whose IP has an unassign in flight at EC2: kept if EC2 keeps the IP, flagged (pending, ADD refused) if EC2 takes it');
      }
    }
    for (const s of m.stale) log.debug({ sandbox: s.id, ip: s.ip }, 'runtime still lists a sandbox whose DEL was served; not adopted');
    // The memory of DELs expires once the runtime no longer lists the sandbox (persisted with the next write).
    if (cri.ok === true) ds.expireReleased(new Set(cri.items.map((s) => s.id)), now - this.o.graceMs);
    let released = 0;
    if (m.canRelease) {
      for (const a of m.release) {
        if (ds.release(a, now)) {
          released++;
          log.info({ containerID: a.containerID, ip: a.ipv4, pod: a.pod }, 'GC: no source vouches for this allocation; released into cooldown');
        }
      }
    }
    for (const c of m.conflicts) log.error({ sandbox: c.sandbox, holder: c.holder }, 'runtime sandbox uses an IP another allocation holds; left unchanged');
    if (adopted + released > 0) {
      // A failed write loses nothing: after a crash the checkpoint is re-merged with the same evidence.
      await this.o.persist().catch((e: Error) => log.error({ err: e.message }, 'checkpoint write after evidence pass failed'));
    }
    if (m.canRelease) {
      // Every source read cleanly and what is in use was adopted: the rest is verified free.
      const verified = ds.verifyAll();
      if (verified > 0) log.info({ verified }, 'IPs found at start without a checkpoint are verified free');
      gate.lift('checkpoint');
    }
    const report: PassReport = { criOk: cri.ok === true, kubeOk: kube.ok === 'absent' ? 'absent' : kube.ok === true, adopted, released, conflicts: m.conflicts.length, live: m.live.length + adopted, canRelease: m.canRelease };
    log.debug(report, 'evidence pass');
    this.scheduleRetry(report);
    this.o.onPass?.(report);
    return report;
  }

  /** An unreadable source is retried with jittered exponential backoff (0.5 s → interval), not only on the GC timer. */
  private scheduleRetry(r: PassReport): void {
    clearTimeout(this.retryTimer);
    if (this.stopped || (r.criOk && r.kubeOk !== false)) {
      this.retryDelayMs = 0;
      return;
    }
    this.retryDelayMs = Math.min(this.retryDelayMs ? this.retryDelayMs * 2 : 500, this.o.intervalMs);
    const delay = this.retryDelayMs * (0.8 + Math.random() * 0.4);
    this.retryTimer = setTimeout(() => void this.runPass().catch(() => undefined), delay);
    this.retryTimer.unref();
  }
}
