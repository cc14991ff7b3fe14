/**
 * Start-up step of ipamd: the cooldown that ends on evidence (ENI_IPAM_COOLDOWN_EVIDENCE,
 * docs/design.md#cooldown-that-ends-on-evidence). Hands the datastore an EndpointSlice
 * index (kube/endpoint-index.ts) at once, unsynced, so the timer rules until the watch
 * (kube/endpointslice-watch.ts) has listed every slice; the Kubernetes client is imported
 * in the background once ipamd serves (`after`), as the node-schedule watch's. Each change
 * of the index tells the datastore (waiting ADDs try again), and so does the end of each
 * change's proxy-sync allowance, when the change may let an address go.
 */
import type { IpamdConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { CooldownEvidence } from '../datastore/roles.js';
import { EndpointIndex } from '../kube/endpoint-index.js';
import type { EndpointSliceWatch } from '../kube/endpointslice-watch.js';

/** Wakes at most every {@link ALLOWANCE_TICK_MS} ms: allowance ends are rounded up to it. */
export const ALLOWANCE_TICK_MS = 250;

/** The running evidence, as the daemon sees it. */
export interface CooldownEvidenceHandle {
  /** Whether the watch is synced now; undefined with the evidence off. Memory only. */
  state(): { synced: boolean } | undefined;
  stop(): void;
}

/**
 * Calls `fire` at each due time pushed (ms, increasing), rounded up to
 * {@link ALLOWANCE_TICK_MS}; one timer at a time. `now` is the clock the dues are on.
 */
export class DueTimes {
  private readonly queue: number[] = [];
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly now: () => number,
    private readonly fire: () => void,
  ) {}

  /** Adds a due time (ms). */
  push(at: number): void {
    const due = Math.ceil(at / ALLOWANCE_TICK_MS) * ALLOWANCE_TICK_MS;
    if (this.queue.length > 0 && this.queue[this.queue.length - 1]! >= due) return;
    this.queue.push(due);
    if (!this.timer) this.arm();
  }

  /** Cancels every pending due time. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private arm(): void {
    const head = this.queue[0];
    if (head === undefined) return void (this.timer = undefined);
    this.timer = setTimeout(
      () => {
        const t = this.now();
        while (this.queue.length > 0 && this.queue[0]! <= t) this.queue.shift();
        this.fire();
        this.arm();
      },
      Math.max(0, head - this.now()) + 1,
    );
  }
}

/**
 * Starts the evidence when the settings ask for it (never throws): ENI_IPAM_COOLDOWN_EVIDENCE
 * true and an IPv4 pool (ipv4 or dual mode). `now` is ipamd's monotonic clock.
 */
export function startCooldownEvidence(
  config: Pick<IpamdConfig, 'cooldownEvidence' | 'proxySyncAllowanceMs' | 'ipFamily' | 'ipCooldownMs'>,
  ds: CooldownEvidence,
  log: Logger,
  now: () => number,
  after: Promise<unknown>,
): CooldownEvidenceHandle {
  if (!config.cooldownEvidence || config.ipFamily === 'ipv6' || config.ipCooldownMs === 0)
    return { state: () => undefined, stop: () => undefined };
  const allowanceMs = config.proxySyncAllowanceMs;
  const index = new EndpointIndex(allowanceMs);
  ds.useReuseEvidence(index, allowanceMs);
  const dues = new DueTimes(now, () => ds.reuseEvidenceChanged());
  let watch: EndpointSliceWatch | undefined;
  let stopped = false;
  const changed = () => {
    ds.reuseEvidenceChanged();
    if (index.syncedSince() !== undefined) dues.push(now() + allowanceMs);
  };
  const load = async () => {
    const [{ EndpointSliceWatch }, { loadKubeConfig }] = await Promise.all([
      import('../kube/endpointslice-watch.js'),
      import('../kube/config.js'),
    ]);
    if (stopped) return;
    watch = new EndpointSliceWatch({ kc: loadKubeConfig().kc, index, log, now, changed });
    watch.start();
  };
  void after
    .catch(() => undefined)
    .then(load)
    .catch((e: Error) =>
      log.warn(
        { err: e.message },
        'cannot watch EndpointSlices: every cooldown runs its full IP_COOLDOWN_PERIOD (ENI_IPAM_COOLDOWN_EVIDENCE)',
      ),
    );
  return {
    state: () => ({ synced: index.syncedSince() !== undefined }),
    stop: () => {
      stopped = true;
      watch?.stop();
      index.lost();
      dues.stop();
    },
  };
}
