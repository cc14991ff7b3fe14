/**
 * Tells Kubernetes what the node's IP pool can do, beside the request path:
 *
 * - a Warning Event `FailedIPAllocation` on a pod whose ADD got no IP, naming the reason
 *   (the `eni_ipam_add_failures_total` reason) and the binding limit; deduplicated and
 *   rate-limited by {@link EventBook};
 * - the Node condition `eni-ipam.io/IPAllocatable` (node-ip-state.ts), re-evaluated every
 *   `intervalMs` from memory and patched only when it changes or every `heartbeatMs`,
 *   with a Node Event when its status or reason changes, or when the sources releases are
 *   frozen on change (the freeze at start, `startup`, giving way to `cri`: the Event then
 *   names why releases stay frozen, not only why they froze first);
 * - with `taintWhenExhausted`, the taint `eni-ipam.io/no-ip-available:NoSchedule` while
 *   the node can serve no new pod, removed as soon as it can (and removed at start when
 *   the feature is off, so turning it off never strands a node).
 *
 * Fire and forget: {@link podAddFailed} only records in memory (bounded); one background
 * loop makes every API call, one at a time, each with a deadline. A failing API never
 * blocks or fails an ADD; failures are logged once per kind until the next success.
 */
import type { Logger } from '../log.js';
import { EventBook, type EventBookOptions, type EventOccurrence } from './event-book.js';
import { isoSeconds, statusOf, type KubeWrites } from './kube-writes.js';
import { describeApiCall, describeError } from '../kube/errors.js';
import {
  CONDITION_TYPE,
  conditionBody,
  nodeIpState,
  taintsWith,
  type NodeConditionBody,
  type NodeIpFacts,
  type NodeIpState,
  type TaintBody,
} from './node-ip-state.js';

/** Reason of the pod Event. */
export const POD_EVENT_REASON = 'FailedIPAllocation';

/** Options of {@link KubeReporter}; times in ms. */
export interface KubeReporterOptions {
  writes: Pick<KubeWrites, 'writeEvent' | 'readNode' | 'patchCondition' | 'patchTaints'> &
    Partial<Pick<KubeWrites, 'identity'>>;
  nodeName: string;
  log: Logger;
  /** Apply the taint while the node can serve no new pod (ENI_IPAM_TAINT_WHEN_EXHAUSTED). */
  taintWhenExhausted: boolean;
  /** A snapshot of the pool's facts (memory only). */
  facts: () => NodeIpFacts;
  /** Re-evaluation period (default 1000). */
  intervalMs?: number;
  /** Condition re-written at least this often (lastHeartbeatTime; default 300 000). */
  heartbeatMs?: number;
  book?: EventBookOptions;
  now?: () => number;
}

/** A failed ADD, as the reporter is told of it. */
export interface AddFailureReport {
  pod?: { namespace: string; name: string; uid?: string };
  /** `eni_ipam_add_failures_total` reason: no_ip, subnet_full, eni_limit, throttled, frozen, timeout... */
  reason: string;
  /** The error the ADD failed with (names the binding limit when one binds). */
  message: string;
}

/**
 * Whether the node condition on the Node is what ipamd last computed (`synced`), when it
 * last wrote it (`writtenAt`, ms since epoch; the condition's lastHeartbeatTime) and why
 * it could not (`error`, one line). While not synced the condition on the Node is stale:
 * `eni_ipam_node_condition_synced` 0, `/v1/status` `nodeCondition` (docs/troubleshooting.md).
 */
export interface ConditionSync {
  synced: boolean;
  writtenAt?: number;
  error?: string;
}

/** The calls the reporter makes: the verb and resource in error lines, and the chart value that grants them. */
const CALLS: Record<string, (node: string) => { verb: string; resource: string; grantedBy: string }> = {
  'read node': (node) => ({ verb: 'get', resource: `nodes/${node}`, grantedBy: 'always (nodes get)' }),
  'patch node status': (node) => ({
    verb: 'patch',
    resource: `nodes/${node}/status`,
    grantedBy: 'with rbac.nodeEventsAndStatus=true (the default)',
  }),
  'patch node taints': (node) => ({
    verb: 'patch',
    resource: `nodes/${node}`,
    grantedBy: 'with taintWhenExhausted=true',
  }),
  'write event': () => ({
    verb: 'create',
    resource: 'events',
    grantedBy: 'with rbac.nodeEventsAndStatus=true (the default)',
  }),
};

/** See the module docstring. */
export class KubeReporter {
  private readonly book: EventBook;
  private readonly now: () => number;
  private readonly intervalMs: number;
  private readonly heartbeatMs: number;
  private stopped = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private kicked = false;
  /** The condition on the node as last read or written; undefined until the node was read. */
  private cond?: Partial<NodeConditionBody>;
  private condKnown = false;
  private condWrittenAt = -Infinity;
  /** The sources releases were frozen on when the condition was last written ('' when not frozen). */
  private frozenOn?: string;
  /** Whether our taint is on the node, as last read or written; undefined: unknown. */
  private tainted?: boolean;
  private readonly failing = new Set<string>();
  /** The condition's sync with the Node (see {@link ConditionSync}). */
  private condSync: ConditionSync = { synced: false, error: 'not written yet' };

  constructor(private readonly o: KubeReporterOptions) {
    this.book = new EventBook(o.book);
    this.now = o.now ?? Date.now;
    this.intervalMs = o.intervalMs ?? 1000;
    this.heartbeatMs = o.heartbeatMs ?? 300_000;
  }

  /** Starts the background loop (idempotent). */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops the loop; resolves once the call in flight (bounded by its deadline) ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  /** Whether the condition on the Node is current (see {@link ConditionSync}). */
  conditionSync(): ConditionSync {
    return this.condSync;
  }

  /** Re-evaluates soon (a change the poll would only see later). */
  kick(): void {
    this.kicked = true;
    this.wake?.();
  }

  /** Records a failed ADD (memory only; never throws, never waits). */
  podAddFailed(r: AddFailureReport): void {
    if (!r.pod?.name || !r.pod.namespace) return;
    const occ: EventOccurrence = {
      involved: { kind: 'Pod', name: r.pod.name, namespace: r.pod.namespace, ...(r.pod.uid ? { uid: r.pod.uid } : {}) },
      namespace: r.pod.namespace,
      type: 'Warning',
      reason: POD_EVENT_REASON,
      message: `eni-ipam could not assign an IP on node ${this.o.nodeName} (${r.reason}): ${r.message}`.slice(0, 1024),
    };
    this.book.observe(occ, this.now());
    this.kick();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.kicked = false;
      try {
        await this.tick();
      } catch (e) {
        this.failed('tick', e);
      }
      if (this.stopped || this.kicked) continue;
      const wait = Math.min(this.intervalMs, this.book.nextDueIn(this.now()));
      await new Promise<void>((r) => {
        const t = setTimeout(r, wait);
        this.wake = () => {
          clearTimeout(t);
          r();
        };
      });
      this.wake = undefined;
    }
  }

  private async tick(): Promise<void> {
    const f = this.o.facts();
    const s = nodeIpState(f);
    await this.syncCondition(s, frozenSources(f));
    await this.syncTaint(s);
    await this.flushEvents();
  }

  /** Writes the condition `s` when it changed (or for the heartbeat); `frozenOn`: {@link frozenSources}. */
  private async syncCondition(s: NodeIpState, frozenOn: string): Promise<void> {
    const now = this.now();
    if (!this.condKnown) {
      const node = (await this.call('read node', () => this.o.writes.readNode()))?.v;
      if (!node) return this.unsynced('read node');
      const c = node.status?.conditions?.find((x) => x.type === CONDITION_TYPE);
      this.cond = c
        ? {
            status: c.status as 'True' | 'False',
            reason: c.reason ?? '',
            message: c.message ?? '',
            ...(c.lastTransitionTime
              ? { lastTransitionTime: isoSeconds(new Date(c.lastTransitionTime).getTime()) }
              : {}),
          }
        : undefined;
      this.tainted = (node.spec?.taints ?? []).some((t) => !taintsWith([t as TaintBody], false, ''));
      this.condKnown = true;
    }
    const prev = this.cond;
    const status = s.allocatable ? 'True' : 'False';
    const same =
      prev?.status === status && prev.reason === s.reason && prev.message === s.message && frozenOn === this.frozenOn;
    if (same && now - this.condWrittenAt < this.heartbeatMs) return;
    const body = conditionBody(s, prev, isoSeconds(now));
    if ((await this.call('patch node status', () => this.o.writes.patchCondition(body))) === undefined)
      return this.unsynced('patch node status');
    this.condWrittenAt = now;
    this.condSync = { synced: true, writtenAt: now };
    this.cond = body;
    const causeChanged = frozenOn !== '' && frozenOn !== this.frozenOn;
    this.frozenOn = frozenOn;
    if (prev?.status !== status || prev.reason !== s.reason || causeChanged) {
      this.o.log.info(
        { condition: CONDITION_TYPE, status, reason: s.reason, message: s.message },
        'node IP condition changed',
      );
      this.book.observe(
        {
          involved: { kind: 'Node', name: this.o.nodeName, uid: this.o.nodeName },
          namespace: 'default',
          type: s.allocatable && s.reason === 'IPsAvailable' ? 'Normal' : 'Warning',
          reason: s.reason,
          message: `${CONDITION_TYPE}=${status}: ${s.message}`.slice(0, 1024),
        },
        now,
      );
    }
  }

  private async syncTaint(s: NodeIpState): Promise<void> {
    const want = this.o.taintWhenExhausted && s.taint;
    if (this.tainted === want) return;
    const node = (await this.call('read node', () => this.o.writes.readNode()))?.v;
    if (!node) return;
    const next = taintsWith(node.spec?.taints as TaintBody[] | undefined, want, isoSeconds(this.now()));
    if (
      next &&
      (await this.call('patch node taints', () =>
        this.o.writes.patchTaints(next, node.metadata?.resourceVersion ?? ''),
      )) === undefined
    )
      return; // 409: next tick reads again
    this.tainted = want;
    this.o.log.info(
      { taint: 'eni-ipam.io/no-ip-available:NoSchedule', applied: want, reason: s.reason },
      want ? 'node tainted: it can serve no new pod' : 'node taint removed',
    );
  }

  private async flushEvents(): Promise<void> {
    for (let w = this.book.take(this.now()); w && !this.stopped; w = this.book.take(this.now())) {
      const write = w;
      try {
        this.book.written(write, await this.o.writes.writeEvent(write));
        this.failing.delete('write event');
      } catch (e) {
        this.book.failed(write, write.op === 'patch' && statusOf(e) === 404);
        this.failed('write event', e);
      }
    }
  }

  /** Runs an API call: `{ v }` on success, undefined (logged once per kind until it works again) on failure. */
  private async call<T>(what: string, fn: () => Promise<T>): Promise<{ v: T } | undefined> {
    try {
      const v = await fn();
      this.failing.delete(what);
      return { v };
    } catch (e) {
      this.failed(what, e);
      return undefined;
    }
  }

  /** The condition could not be read or written: stale on the Node (the error is the call's line). */
  private unsynced(what: string): void {
    this.condSync = {
      synced: false,
      ...(this.condSync.writtenAt !== undefined ? { writtenAt: this.condSync.writtenAt } : {}),
      error: this.lastLine.get(what) ?? `${what} failed`,
    };
  }

  /** The last error line of each call kind (for {@link ConditionSync}). */
  private readonly lastLine = new Map<string, string>();

  /**
   * Logs a failed call once per kind until it works again, as one line: verb, resource,
   * identity, the server's answer (kube/errors.ts), and for an RBAC refusal what grants it.
   */
  private failed(what: string, e: unknown): void {
    const call = CALLS[what]?.(this.o.nodeName);
    const status = statusOf(e);
    const line = call
      ? describeApiCall({ verb: call.verb, resource: call.resource, identity: this.o.writes.identity }, e)
      : `${what}: ${describeError(e)}`;
    const hint =
      status === 403 && call
        ? `; the chart's ClusterRole grants ${call.verb} ${call.resource.replace(/\/[^/]+(\/status)?$/, '$1')} ${call.grantedBy}: check that the ClusterRole and its ClusterRoleBinding exist and bind ${this.o.writes.identity ?? "ipamd's ServiceAccount"} (docs/troubleshooting.md)`
        : status === 401
          ? `; the API server refused ${this.o.writes.identity ?? "ipamd's"} token (ServiceAccount deleted?)`
          : '';
    this.lastLine.set(what, `${line}${hint}`);
    if (this.failing.has(what)) return;
    this.failing.add(what);
    this.o.log.warn({ err: `${line}${hint}`, status }, `Kubernetes ${what} failed; retrying quietly`);
  }
}

/** The sources releases are frozen on, sorted and comma-joined (`cri,kube`); '' when not frozen. */
function frozenSources(f: NodeIpFacts): string {
  if (!f.frozen) return '';
  return [...new Set(f.freezeReasons.map((r) => r.split(':', 1)[0]!))].sort().join(',');
}
