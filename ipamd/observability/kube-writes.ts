/**
 * The few Kubernetes API writes ipamd makes about its node, through
 * @kubernetes/client-node's CoreV1Api, each bounded by a deadline (aborted, never left
 * hanging): create/patch a core/v1 Event, read the Node, patch the Node's status
 * subresource (strategic merge patch: `status.conditions` merge by `type`, so only ours
 * changes) and patch the Node's taints (JSON merge patch carrying the resourceVersion
 * read, so a concurrent change is a 409 Conflict, never a lost taint).
 * Patch types: https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/
 */
import {
  CoreV1Api,
  Observable,
  PatchStrategy,
  type CoreV1Event,
  type KubeConfig,
  type ObservableMiddleware,
  type V1Node,
} from '../kube/client.js';
import { httpStatusOf } from '../kube/errors.js';
import { kubeIdentity } from '../kube/config.js';
import type { EventWrite } from './event-book.js';
import type { NodeConditionBody, TaintBody } from './node-ip-state.js';

/** Who writes the Events (Event.source.component / reportingComponent). */
export const REPORTING_COMPONENT = 'eni-ipamd';

/** ISO 8601 with second precision (metav1.Time). */
export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The API calls; every method rejects with the client's error (HTTP status via `httpStatusOf`) or a timeout. */
export class KubeWrites {
  private readonly api: CoreV1Api;
  /** Who the calls are made as (kube/config.ts `kubeIdentity`), for error lines. */
  readonly identity: string | undefined;

  /** `timeoutMs`: deadline of each call (ms). */
  constructor(
    kc: KubeConfig,
    readonly nodeName: string,
    private readonly timeoutMs = 5000,
  ) {
    this.api = kc.makeApiClient(CoreV1Api);
    this.identity = kubeIdentity(kc);
  }

  /** Creates (returns the name) or patches the Event of `w` for this node's `host`. */
  async writeEvent(w: EventWrite): Promise<string> {
    const o = w.occurrence;
    if (w.op === 'patch' && w.name) {
      const body = { count: w.count, lastTimestamp: isoSeconds(w.lastTimestamp), message: o.message };
      await this.bounded((opts) =>
        this.api.patchNamespacedEvent(
          { name: w.name!, namespace: o.namespace, body },
          this.withType(PatchStrategy.MergePatch, opts),
        ),
      );
      return w.name;
    }
    const i = o.involved;
    const body: CoreV1Event = {
      metadata: {
        name: `${i.name}.${(Date.now() * 1e6 + Math.floor(Math.random() * 1e6)).toString(16)}`,
        namespace: o.namespace,
      },
      involvedObject: {
        apiVersion: 'v1',
        kind: i.kind,
        name: i.name,
        ...(i.namespace ? { namespace: i.namespace } : {}),
        ...(i.uid ? { uid: i.uid } : {}),
      },
      reason: o.reason,
      message: o.message,
      type: o.type,
      count: w.count,
      firstTimestamp: new Date(isoSeconds(w.firstTimestamp)),
      lastTimestamp: new Date(isoSeconds(w.lastTimestamp)),
      source: { component: REPORTING_COMPONENT, host: this.nodeName },
      reportingComponent: REPORTING_COMPONENT,
      reportingInstance: this.nodeName,
    };
    const made = await this.bounded((opts) => this.api.createNamespacedEvent({ namespace: o.namespace, body }, opts));
    return made.metadata?.name ?? body.metadata!.name!;
  }

  /** This node. */
  readNode(): Promise<V1Node> {
    return this.bounded((opts) => this.api.readNode({ name: this.nodeName }, opts));
  }

  /** Sets our condition on the node's status subresource (strategic merge: other conditions untouched). */
  async patchCondition(c: NodeConditionBody): Promise<void> {
    await this.bounded((opts) =>
      this.api.patchNodeStatus(
        { name: this.nodeName, body: { status: { conditions: [c] } } },
        this.withType(PatchStrategy.StrategicMergePatch, opts),
      ),
    );
  }

  /** Replaces the node's taint list, only if the node is still at `resourceVersion` (else HTTP 409). */
  async patchTaints(taints: TaintBody[], resourceVersion: string): Promise<void> {
    const body = { metadata: { resourceVersion }, spec: { taints } };
    await this.bounded((opts) =>
      this.api.patchNode({ name: this.nodeName, body }, this.withType(PatchStrategy.MergePatch, opts)),
    );
  }

  private withType(type: string, opts: { middleware: ObservableMiddleware[]; middlewareMergeStrategy: 'append' }) {
    const setType: ObservableMiddleware = {
      pre: (ctx) => {
        ctx.setHeaderParam('Content-Type', type);
        return new Observable(Promise.resolve(ctx));
      },
      post: (rsp) => new Observable(Promise.resolve(rsp)),
    };
    return { ...opts, middleware: [...opts.middleware, setType] };
  }

  /** Runs one call with an abort signal and a deadline of `timeoutMs`. */
  private async bounded<T>(
    call: (opts: { middleware: ObservableMiddleware[]; middlewareMergeStrategy: 'append' }) => Promise<T>,
  ): Promise<T> {
    const ac = new AbortController();
    const abort: ObservableMiddleware = {
      pre: (ctx) => {
        ctx.setSignal(ac.signal);
        return new Observable(Promise.resolve(ctx));
      },
      post: (rsp) => new Observable(Promise.resolve(rsp)),
    };
    let timer: NodeJS.Timeout | undefined;
    const req = call({ middleware: [abort], middlewareMergeStrategy: 'append' });
    req.catch(() => undefined);
    try {
      return await Promise.race([
        req,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            const e = new Error(`Kubernetes API call timed out after ${this.timeoutMs} ms`);
            ac.abort(e);
            reject(e);
          }, this.timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** HTTP status of a failed call, or undefined (network error, timeout). */
export function statusOf(e: unknown): number | undefined {
  return httpStatusOf(e);
}
