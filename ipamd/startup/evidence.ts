/**
 * Builds the evidence sources of the restore (DESIGN §4): the CRI runtime (endpoint
 * from CRI_RUNTIME_ENDPOINT or auto-detected, logged) and, when MY_NODE_NAME is set, the
 * pods bound to this node from the Kubernetes API (loaded lazily: the client library
 * costs ~0.4 s to import). Then runs the first evidence pass, bounded by the sources'
 * own ≤ 5 s timeouts, and starts the periodic one.
 */
import type { IpamdConfig } from '../config.js';
import type { ReleaseGate } from '../controller/release-gate.js';
import type { Datastore } from '../datastore/datastore.js';
import type { Logger } from '../log.js';
import { CriSource, detectCriEndpoint } from '../restore/cri-source.js';
import { EvidenceReconciler, type PassReport, type PodCache } from '../restore/reconciler.js';

/** The running evidence machinery. */
export interface Evidence {
  reconciler: EvidenceReconciler;
  criEndpoint: string;
  kubeConfigured: boolean;
  /** Passes run so far and the last report (for status). */
  stats: { passes: number; last?: PassReport; lastAt?: number };
  stop(): Promise<void>;
}

/** Starts the sources and the reconciler; resolves after the first pass. Never throws for an unreadable source. */
export async function startEvidence(p: { config: IpamdConfig; ds: Datastore; gate: ReleaseGate; log: Logger; persist: () => Promise<void> }): Promise<Evidence> {
  const { config, log } = p;
  const { endpoint, detected } = detectCriEndpoint(config.criRuntimeEndpoint);
  log.info({ endpoint, detected, configured: config.criRuntimeEndpoint ?? null }, detected || config.criRuntimeEndpoint ? 'CRI runtime endpoint chosen' : 'no CRI socket found; using the containerd default (releases stay frozen until it answers)');
  const cri = new CriSource({ endpoint, log });

  let kube: (PodCache & { stop(): Promise<void> }) | undefined;
  if (config.nodeName) {
    const { KubePodSource } = await import('../restore/kube-source.js');
    const src = new KubePodSource({ nodeName: config.nodeName, log });
    src.start();
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 5000);
      src.onChange(() => { if (src.snapshot().synced) { clearTimeout(t); resolve(); } });
    });
    kube = src;
  } else {
    log.warn('MY_NODE_NAME is not set: the Kubernetes pod source is off; the CRI runtime alone vouches for allocations');
  }

  const stats: Evidence['stats'] = { passes: 0 };
  const reconciler = new EvidenceReconciler({
    ds: p.ds, gate: p.gate, log, cri, ...(kube ? { kube } : {}), persist: p.persist,
    intervalMs: config.gcIntervalMs, graceMs: config.gcGraceMs, networkName: config.networkName,
    onPass: (r) => { stats.passes++; stats.last = r; stats.lastAt = Date.now(); },
  });
  await reconciler.runPass().catch((e: Error) => log.error({ err: e.message }, 'first evidence pass failed'));
  reconciler.start();
  return {
    reconciler, criEndpoint: endpoint, kubeConfigured: !!kube, stats,
    async stop() {
      await reconciler.stop();
      await kube?.stop();
      cri.close();
    },
  };
}
