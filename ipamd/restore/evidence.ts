/**
 * Builds the evidence sources of the restore (docs/design.md#4-restore-after-restart): the CRI runtime (endpoint
 * from CRI_RUNTIME_ENDPOINT or auto-detected, logged), the node's kernel (always; in
 * ENI_IPAM_CNI_EXEC_NETNS when set, else ipamd's own netns) and, when MY_NODE_NAME is
 * set, the pods bound to this node from the Kubernetes API (loaded lazily: the client
 * library costs ~0.1 s of CPU to import; on a start that serves at once, only after ipamd serves). Then runs the first evidence pass, bounded by the sources'
 * own ≤ 5 s timeouts, and starts the periodic one. Start-up waits for the first pass
 * only FIRST_PASS_WAIT_MS: a hung runtime must not delay serving from the checkpoint.
 */
import type { IpamdConfig } from '../config.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { Assignments, DatastoreViews, RestoreTarget } from '../datastore/roles.js';
import type { Logger } from '../log.js';
import { CriSource, detectCriEndpoint } from './cri-source.js';
import { KernelSource, type KernelReader } from './kernel-source.js';
import type { RuntimeIdentity } from './plausibility.js';
import type { V6Evidence } from './v6-evidence.js';
import { EvidenceReconciler, type PassReport, type PodCache } from './reconciler.js';

/** The running evidence machinery. */
export interface Evidence {
  reconciler: EvidenceReconciler;
  criEndpoint: string;
  kubeConfigured: boolean;
  /** Passes run so far and the last report (for status). */
  stats: { passes: number; last?: PassReport; lastAt?: number };
  /** The runtime identity recorded for this boot (for the checkpoint), if any. */
  runtimeIdentity(): RuntimeIdentity | undefined;
  /** What the kernel source reads (e.g. "the kernel (ipamd's netns)"). */
  kernelSource: string;
  /** Each source's state at the last pass and whether the brake held (metrics, status); undefined before it. */
  sourceStates(): { sources: Record<string, 'ok' | 'unreadable' | 'suspect'>; brakeHeld: boolean } | undefined;
  stop(): Promise<void>;
}

/** Each source's state in a pass report: unreadable, suspect (answered implausibly) or ok; an absent Kubernetes source is left out. */
export function sourceStates(r: PassReport): {
  sources: Record<string, 'ok' | 'unreadable' | 'suspect'>;
  brakeHeld: boolean;
} {
  const state = (ok: boolean, suspect?: string) => (!ok ? 'unreadable' : suspect ? 'suspect' : 'ok');
  const sources: Record<string, 'ok' | 'unreadable' | 'suspect'> = {
    cri: state(r.criOk, r.suspect.cri),
    kernel: state(r.kernelOk),
  };
  if (r.kubeOk !== 'absent') sources['kube'] = state(r.kubeOk, r.suspect.kube);
  return { sources, brakeHeld: r.brake !== undefined };
}

/** How long start-up waits for the pod list to sync before the first pass, ms (a source's own timeout is ≤ 5 s). */
export const KUBE_SYNC_WAIT_MS = 5000;

/**
 * How long start-up waits for the first evidence pass before ipamd serves anyway, ms.
 * Serving early is safe: without a checkpoint every IP found on the ENIs is unverified
 * (never handed out), with one every handed-out IP was free when it was written, and
 * the "startup" freeze keeps every release off until the pass has ended.
 */
export const FIRST_PASS_WAIT_MS = 2000;

/**
 * Starts the sources and the reconciler; resolves after the first pass or after
 * FIRST_PASS_WAIT_MS, whichever comes first (the pass then goes on in the background,
 * releases frozen with reason "startup" until it ends). Never throws for an unreadable source.
 */
export async function startEvidence(p: {
  config: IpamdConfig;
  ds: RestoreTarget & Assignments & DatastoreViews;
  gate: ReleaseGate;
  log: Logger;
  persist: () => Promise<void>;
  /** The runtime identity this boot's checkpoint recorded. */
  recordedIdentity?: RuntimeIdentity;
  /** The kernel source; default iproute2 in ENI_IPAM_CNI_EXEC_NETNS or ipamd's own netns. */
  kernel?: KernelReader;
  /**
   * Serve without waiting for the first pass at all (not even FIRST_PASS_WAIT_MS): for a
   * start with ipamd's own checkpoint from this boot, which holds every allocation ever
   * acknowledged (so no sandbox can hold an IP the datastore thinks free); releases stay
   * frozen ("startup") until the pass ends, as on any start.
   */
  serveAtOnce?: boolean;
  /**
   * With `serveAtOnce`: start the first pass and the Kubernetes client's load only once
   * this settles (e.g. once ipamd serves), so neither (the client's import, ~0.1 s of CPU;
   * the CRI client; the kernel read's fork) delays serving; releases stay frozen until
   * the pass ends, as on any start. Ignored without `serveAtOnce` (start-up then waits for
   * the first pass, which waits for the pod list). Omit: at once.
   */
  startAfter?: Promise<unknown>;
  /** `ipv6`/`dual` mode: the IPv6 allocations, judged by the same passes (v6-evidence.ts). */
  v6?: V6Evidence;
}): Promise<Evidence> {
  const { config, log } = p;
  const { cri, endpoint } = openCriSource(config, log);

  const run: EvidenceRun = { stopped: false };
  const { kube, kubeSynced, endKubeWait } = startKubeSource(p, run);

  const kernel = p.kernel ?? new KernelSource(config.cniExecNetns ? { netnsPath: config.cniExecNetns } : {});
  const stats: Evidence['stats'] = { passes: 0 };
  /** The first pass has ended (a later successful pass lifts "startup" if it failed). */
  let firstEnded = false;
  const reconciler = new EvidenceReconciler({
    ds: p.ds,
    gate: p.gate,
    log,
    cri,
    ...(kube ? { kube } : {}),
    persist: p.persist,
    kernel,
    criEndpoint: endpoint,
    ...(config.nodeName ? { nodeName: config.nodeName } : {}),
    ...(p.recordedIdentity ? { recordedIdentity: p.recordedIdentity } : {}),
    ...(p.v6 ? { v6: p.v6 } : {}),
    intervalMs: config.gcIntervalMs,
    graceMs: config.gcGraceMs,
    networkName: config.networkName,
    onPass: (r) => {
      if (firstEnded) p.gate.lift('startup');
      stats.passes++;
      stats.last = r;
      stats.lastAt = Date.now();
    },
  });
  // The first pass (after the pod list synced, or KUBE_SYNC_WAIT_MS) may outlast a hung
  // source's 5 s timeout; serving does not wait for it beyond FIRST_PASS_WAIT_MS, but
  // releases stay frozen until it has ended (it then sets the per-source freezes itself).
  p.gate.freeze('startup', 'the first evidence pass has not finished yet');
  let stop = (): void => undefined;
  const stopping = new Promise<void>((r) => (stop = r));
  const first = (async () => {
    if (p.startAfter && p.serveAtOnce) await Promise.race([p.startAfter.catch(() => undefined), stopping]);
    await kubeSynced;
    if (run.stopped) return;
    const failed = await reconciler.runPass().then(
      () => undefined,
      (e: Error) => e.message,
    );
    if (run.stopped) return;
    firstEnded = true;
    // A pass that threw read nothing: "startup" holds releases until a pass succeeds (onPass).
    if (failed === undefined) p.gate.lift('startup');
    else {
      log.error({ err: failed }, 'first evidence pass failed: releases stay frozen until a pass succeeds');
      p.gate.freeze(
        'startup',
        `the first evidence pass failed (${failed}); releases stay frozen until a pass succeeds`,
      );
    }
    reconciler.start();
  })();
  let waitTimer: NodeJS.Timeout | undefined;
  const done =
    p.serveAtOnce ||
    (await Promise.race([
      first.then(() => true),
      new Promise<false>((r) => {
        waitTimer = setTimeout(() => r(false), FIRST_PASS_WAIT_MS);
      }),
    ]));
  clearTimeout(waitTimer);
  logServingBeforeFirstPass(log, !!p.serveAtOnce, done);
  return {
    reconciler,
    criEndpoint: endpoint,
    kubeConfigured: !!kube,
    stats,
    runtimeIdentity: () => reconciler.recordedIdentity,
    kernelSource: kernel instanceof KernelSource ? kernel.description : 'the kernel',
    sourceStates: () => (stats.last ? sourceStates(stats.last) : undefined),
    async stop() {
      run.stopped = true;
      stop();
      endKubeWait();
      await first;
      await reconciler.stop();
      await kube?.stop();
      cri.close();
    },
  };
}

/**
 * The CRI source at CRI_RUNTIME_ENDPOINT, or at the socket found on the node, or at
 * containerd's default; logs which and why. `endpoint` is the `unix://` URL chosen.
 */
function openCriSource(config: IpamdConfig, log: Logger): { cri: CriSource; endpoint: string } {
  const { endpoint, detected } = detectCriEndpoint(config.criRuntimeEndpoint);
  log.info(
    { endpoint, detected, configured: config.criRuntimeEndpoint ?? null },
    detected || config.criRuntimeEndpoint
      ? 'CRI runtime endpoint chosen'
      : 'no CRI socket found; using the containerd default (releases stay frozen until it answers)',
  );
  return { cri: new CriSource({ endpoint, log }), endpoint };
}

/** State {@link startEvidence} shares with its helpers: `stopped` once `stop()` has begun. */
interface EvidenceRun {
  stopped: boolean;
}

/** The Kubernetes pod source as the restore sees it, loaded lazily (see {@link startKubeSource}). */
interface LazyKube {
  /** The pod source; undefined when MY_NODE_NAME is not set. */
  kube: (PodCache & { stop(): Promise<void> }) | undefined;
  /**
   * Settles once the pod list synced, KUBE_SYNC_WAIT_MS (ms) after the client loaded, when
   * the client failed to load, or on `endKubeWait()`; already settled without MY_NODE_NAME.
   */
  kubeSynced: Promise<void>;
  /** Settles `kubeSynced` now (stop). */
  endKubeWait: () => void;
}

/**
 * When MY_NODE_NAME is set, starts loading the Kubernetes client in the background (after
 * `startAfter` with `serveAtOnce`, else at once; never once `run.stopped`) and returns a pod
 * source that reads as not synced until it has loaded. Without it, logs that the source is off.
 */
function startKubeSource(
  p: { config: IpamdConfig; log: Logger; serveAtOnce?: boolean; startAfter?: Promise<unknown> },
  run: EvidenceRun,
): LazyKube {
  let kubeSynced: Promise<void> = Promise.resolve();
  let endKubeWait = (): void => undefined;
  const { config, log } = p;
  if (config.nodeName) {
    // The client (~70 MiB, ~1 s to import) loads in the background: serving does not wait
    // for it; until it has loaded the source reads as not synced (releases stay frozen).
    const nodeName = config.nodeName;
    let src: import('../kube/pod-source.js').KubePodSource | undefined;
    let syncTimer: NodeJS.Timeout | undefined;
    kubeSynced = new Promise<void>((resolve) => {
      endKubeWait = () => {
        clearTimeout(syncTimer);
        resolve();
      };
    });
    let loading: Promise<void> | undefined;
    const load = () =>
      (loading = import('../kube/pod-source.js').then(
        ({ KubePodSource }) => {
          if (run.stopped) return;
          const s = new KubePodSource({ nodeName, log });
          src = s;
          s.start();
          syncTimer = setTimeout(endKubeWait, KUBE_SYNC_WAIT_MS);
          s.onChange(() => {
            if (s.snapshot().synced) endKubeWait();
          });
        },
        (e: Error) => {
          log.error({ err: e.message }, 'could not load the Kubernetes client: the pod source stays unsynced');
          endKubeWait();
        },
      ));
    const loadUnlessStopped = () => {
      if (!run.stopped) void load();
    };
    if (p.startAfter && p.serveAtOnce) void p.startAfter.then(loadUnlessStopped, loadUnlessStopped);
    else void load();
    const kube = {
      snapshot: () =>
        src?.snapshot() ?? { synced: false, pods: [], lastError: 'the Kubernetes client is still loading' },
      stop: async () => {
        await loading;
        await src?.stop();
      },
    };
    return { kube, kubeSynced, endKubeWait };
  }
  log.warn('MY_NODE_NAME is not set: the Kubernetes pod source is off; the CRI runtime alone vouches for allocations');
  return { kube: undefined, kubeSynced, endKubeWait };
}

/** Logs why ipamd serves before the first evidence pass ended, if it does (`done`: the pass ended within the wait). */
function logServingBeforeFirstPass(log: Logger, serveAtOnce: boolean, done: boolean): void {
  if (serveAtOnce)
    log.info(
      "serving from this boot's checkpoint while the first evidence pass runs; releases stay frozen until it ends",
    );
  else if (!done)
    log.warn(
      { waitedMs: FIRST_PASS_WAIT_MS },
      'a restore source is slow: serving from the checkpoint before the first evidence pass ends; releases stay frozen until it does',
    );
}
