/**
 * KubePodSource: the pods bound to this node according to the Kubernetes API, one of the
 * three sources ipamd reads to restore pod IP allocations after a restart (docs/design.md#4-restore-after-restart:
 * each source has a ≤5 s timeout and is retried in the background; a source that cannot
 * be read freezes releases). List + watch with `fieldSelector=spec.nodeName=<node>`
 * through @kubernetes/client-node, as client-go's reflector does
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
 * LIST, WATCH from the list's resourceVersion, resume the watch from the last seen
 * resourceVersion when it ends, and LIST again on 410 Gone or after errors (with backoff).
 */
import type { Logger } from 'pino';
import type { AgentTrackingKubeConfig } from './config.js';
import { loadKubeConfig } from './config.js';
import { KubeUnavailableError, describeError } from './errors.js';
import { listNodePods } from './pod-list.js';
import { readNodeRuntimeVersion } from './node-read.js';
import { podKey, toKubePod, type KubePod } from './pod-evidence.js';
import { watchNodePods, type RunningWatch } from './pod-watch.js';

export { KubeUnavailableError } from './errors.js';
export type { KubePod } from './pod-evidence.js';

/**
 * A watch the server ends sooner than this (ms) without sending any event is a failure, not
 * a routine end (client-go's reflector calls it a "very short watch"): the source backs off
 * before the next list instead of resuming in a tight loop.
 */
const SHORT_WATCH_MS = 1000;

/** The cache as seen by callers. */
export interface KubePodSnapshot {
  /** True when a list succeeded and the watch following it is established and healthy. */
  synced: boolean;
  /** The last known pods on the node (kept, but not authoritative, while unsynced). */
  pods: KubePod[];
  /** Why the source is not synced (latest failure). */
  lastError?: string;
  /** When the cache was last confirmed complete (epoch ms): a list succeeded and its watch was established. */
  syncedAt?: number;
  /** This node's `status.nodeInfo.containerRuntimeVersion`, read after each list (undefined if unreadable). */
  nodeRuntimeVersion?: string;
}

/** Constructor options; the retry bounds are optional tuning (ms). */
export interface KubePodSourceOptions {
  /** This node's name (MY_NODE_NAME, as in spec.nodeName). */
  nodeName: string;
  /** Kubeconfig file; without it: in-cluster, then KUBECONFIG, then ~/.kube/config. */
  kubeconfigPath?: string;
  /** Deadline of each list and of each watch's response (ms, ≤ 5000, default 5000). */
  timeoutMs?: number;
  log?: Logger;
  /** First retry delay after a failure (ms, default 200), doubled up to retryMaxMs (default 5000). */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** Server-side watch duration before a routine resume (s, default 300, ±20 % jitter). */
  watchTimeoutSeconds?: number;
}

/** Pods on this node from the Kubernetes API: one-shot list, or a background list+watch cache. */
export class KubePodSource {
  private readonly nodeName: string;
  private readonly kubeconfigPath?: string;
  private readonly timeoutMs: number;
  private readonly log?: Logger;
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  private readonly watchTimeoutSeconds: number;
  private pods = new Map<string, KubePod>();
  private synced = false;
  private lastError?: string;
  private syncedAt?: number;
  private nodeRuntimeVersion?: string;
  private readonly listeners: Array<() => void> = [];
  private running = false;
  private loop?: Promise<void>;
  private readonly stopCtl = new AbortController();
  private watch?: RunningWatch;
  private wake?: () => void;

  /** See KubePodSourceOptions. Never throws; configuration problems surface from listOnce/snapshot. */
  constructor(o: KubePodSourceOptions) {
    this.nodeName = o.nodeName;
    this.kubeconfigPath = o.kubeconfigPath;
    this.timeoutMs = Math.min(Math.max(o.timeoutMs ?? 5000, 1), 5000);
    this.log = o.log;
    this.retryMinMs = o.retryMinMs ?? 200;
    this.retryMaxMs = o.retryMaxMs ?? 5000;
    this.watchTimeoutSeconds = o.watchTimeoutSeconds ?? 300;
  }

  /**
   * One bounded list, no watch: the pods with spec.nodeName = this node, complete.
   * @throws KubeUnavailableError on missing configuration, timeout (timeoutMs), refused
   *   connection, or any error answer (5xx, 403...) — never resolves with a partial list.
   */
  async listOnce(): Promise<KubePod[]> {
    const kc = this.loadConfig();
    const r = await listNodePods(kc, this.nodeName, this.timeoutMs, this.stopCtl.signal);
    return [...r.pods.values()];
  }

  /** Starts list+watch in the background, retrying with backoff until stop(). Never throws; idempotent. */
  start(): void {
    if (this.running || this.stopCtl.signal.aborted) return;
    this.running = true;
    this.loop = this.run();
  }

  /** The latest cache (a copy). */
  snapshot(): KubePodSnapshot {
    const s: KubePodSnapshot = { synced: this.synced, pods: [...this.pods.values()].map((p) => ({ ...p })) };
    if (this.lastError !== undefined) s.lastError = this.lastError;
    if (this.syncedAt !== undefined) s.syncedAt = this.syncedAt;
    if (this.nodeRuntimeVersion !== undefined) s.nodeRuntimeVersion = this.nodeRuntimeVersion;
    return s;
  }

  /** Registers `fn`, called after every change of the snapshot (pods, synced, lastError). */
  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  /** Stops the background loop and any request in flight; resolves when it has ended. */
  async stop(): Promise<void> {
    this.stopCtl.abort();
    this.watch?.cancel();
    this.wake?.();
    await this.loop;
    this.running = false;
  }

  private loadConfig(): AgentTrackingKubeConfig {
    try {
      return loadKubeConfig(this.kubeconfigPath).kc;
    } catch (e) {
      throw new KubeUnavailableError(`Kubernetes API configuration: ${describeError(e)}`, { cause: e });
    }
  }

  private async run(): Promise<void> {
    let failures = 0;
    let kc: AgentTrackingKubeConfig | undefined;
    while (!this.stopCtl.signal.aborted) {
      try {
        kc ??= this.loadConfig();
        const list = await listNodePods(kc, this.nodeName, this.timeoutMs, this.stopCtl.signal);
        if (this.stopCtl.signal.aborted) break;
        this.pods = list.pods;
        this.nodeRuntimeVersion = await readNodeRuntimeVersion(kc, this.nodeName, this.timeoutMs, (why) =>
          this.log?.debug(
            { node: this.nodeName, err: why },
            'node read failed; runtime identity not compared with the node',
          ),
        );
        this.changed();
        let rv = list.resourceVersion;
        let relist = false;
        while (!relist && !this.stopCtl.signal.aborted) {
          const jitter = 0.8 + Math.random() * 0.4;
          const watchStart = Date.now();
          let events = 0;
          this.watch = watchNodePods(
            kc,
            {
              nodeName: this.nodeName,
              resourceVersion: rv,
              timeoutMs: this.timeoutMs,
              serverTimeoutSeconds: Math.max(1, Math.round(this.watchTimeoutSeconds * jitter)),
            },
            {
              onEstablished: () => {
                if (!this.synced)
                  this.log?.info({ node: this.nodeName, pods: this.pods.size }, 'kube pod source synced');
                this.synced = true;
                this.syncedAt = Date.now();
                this.lastError = undefined;
                this.changed();
              },
              onEvent: (type, pod) => {
                events++;
                const v = pod.metadata?.resourceVersion;
                if (v) rv = v;
                if (type === 'BOOKMARK') return;
                const k = toKubePod(pod);
                if (!k) return;
                if (type === 'DELETED') this.pods.delete(podKey(k.namespace, k.name));
                else this.pods.set(podKey(k.namespace, k.name), k);
                this.changed();
              },
            },
          );
          const end = await this.watch.done;
          this.watch = undefined;
          if (this.stopCtl.signal.aborted) break;
          // A watch that lasted or delivered resets the backoff; one the server ended at once,
          // empty, counts as a failure (client-go's "very short watch"): resuming or listing
          // again at once would loop as fast as the server answers.
          const lasted = Date.now() - watchStart;
          const healthy = events > 0 || lasted >= SHORT_WATCH_MS;
          if (healthy) failures = 0;
          if (end.kind === 'error') throw end.error;
          if (end.kind === 'expired') {
            // The cache may have missed changes until the new list: not authoritative meanwhile.
            this.log?.info({ node: this.nodeName, resourceVersion: rv }, 'kube pod watch expired (410), listing again');
            this.synced = false;
            this.lastError = `watch from resourceVersion ${rv} expired (410 Gone), listing again`;
            this.changed();
            relist = true;
            if (!healthy) await this.sleep(this.backoff(failures++));
          } else if (!healthy) {
            throw new KubeUnavailableError(`pod watch ended by the server after ${lasted} ms with no event`);
          } else {
            this.log?.debug({ node: this.nodeName, resourceVersion: rv }, 'kube pod watch closed, resuming');
          }
        }
      } catch (e) {
        if (this.stopCtl.signal.aborted) break;
        const msg = describeError(e);
        const wasSynced = this.synced;
        this.synced = false;
        this.lastError = msg;
        this.changed();
        const delay = this.backoff(failures);
        const fields = { node: this.nodeName, err: msg, retryInMs: Math.round(delay) };
        // Warn on the transition (synced -> unavailable, or the first failure); repeats at debug.
        if (wasSynced || failures === 0)
          this.log?.warn(fields, 'kube pod source unavailable, releases must stay frozen');
        else this.log?.debug(fields, 'kube pod source still unavailable');
        failures++;
        await this.sleep(delay);
      }
    }
    this.synced = false;
  }

  /** The wait before retry `failures` + 1 (ms): retryMinMs doubled per failure up to retryMaxMs, 50-100 % jitter. */
  private backoff(failures: number): number {
    return Math.min(this.retryMaxMs, this.retryMinMs * 2 ** Math.min(failures, 20)) * (0.5 + Math.random() / 2);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    });
  }

  private changed(): void {
    for (const fn of this.listeners) {
      try {
        fn();
      } catch (e) {
        this.log?.error({ err: describeError(e) }, 'kube pod source onChange listener threw');
      }
    }
  }
}
