/**
 * One WATCH of the pods bound to a node, from a resourceVersion, with
 * @kubernetes/client-node's Watch (`GET /api/v1/pods?watch=true&fieldSelector=spec.nodeName=<node>`,
 * https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
 * Adds a deadline for the response headers, which Watch itself lacks: a watch that is
 * not answered within `timeoutMs` is torn down by destroying its HTTP agent.
 */
import { Watch, type V1Pod } from './client.js';
import type { AgentTrackingKubeConfig } from './config.js';
import { KubeUnavailableError, describeApiCall, httpStatusOf } from './errors.js';
import { kubeIdentity } from './config.js';

/** How a watch ended: the server closed it cleanly, the resourceVersion expired (410: relist), or an error. */
export type WatchEnd = { kind: 'closed' } | { kind: 'expired' } | { kind: 'error'; error: KubeUnavailableError };

/** Callbacks of one watch. */
export interface WatchHandlers {
  /** The response arrived (HTTP 200): the watch is healthy from now on. */
  onEstablished(): void;
  /** An ADDED/MODIFIED/DELETED event's pod, or a BOOKMARK's resourceVersion. */
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK', pod: V1Pod): void;
}

/** A running watch: `done` settles once (never rejects); `cancel()` tears it down. */
export interface RunningWatch {
  done: Promise<WatchEnd>;
  cancel(): void;
}

/** Destroys an http(s).Agent-like object's sockets, if it has `destroy()`. */
function destroyAgent(agent: unknown): void {
  const a = agent as { destroy?: () => void } | undefined;
  if (a && typeof a.destroy === 'function') a.destroy();
}

/**
 * Starts a watch of pods with `spec.nodeName=nodeName` after `resourceVersion`.
 * `timeoutMs` (ms) bounds the wait for the response; `serverTimeoutSeconds` (s) asks the
 * server to end the stream (the caller then resumes from the last resourceVersion).
 */
export function watchNodePods(
  kc: AgentTrackingKubeConfig,
  o: { nodeName: string; resourceVersion: string; timeoutMs: number; serverTimeoutSeconds: number },
  h: WatchHandlers,
): RunningWatch {
  let agent: unknown;
  let controller: AbortController | undefined;
  let settled = false;
  let resolveDone!: (e: WatchEnd) => void;
  const done = new Promise<WatchEnd>((r) => (resolveDone = r));
  const finish = (e: WatchEnd) => {
    if (settled) return;
    settled = true;
    clearTimeout(deadline);
    controller?.abort();
    destroyAgent(agent);
    resolveDone(e);
  };
  const deadline = setTimeout(
    () => finish({ kind: 'error', error: new KubeUnavailableError(`pod watch not answered within ${o.timeoutMs} ms`) }),
    o.timeoutMs,
  );

  kc.onAgent = (a) => (agent = a);
  const what = `watch pods (spec.nodeName=${o.nodeName})`;
  const call = () => ({ verb: 'watch', resource: `pods (spec.nodeName=${o.nodeName})`, identity: kubeIdentity(kc) });
  const params = {
    fieldSelector: `spec.nodeName=${o.nodeName}`,
    resourceVersion: o.resourceVersion,
    allowWatchBookmarks: true,
    timeoutSeconds: o.serverTimeoutSeconds,
  };
  new Watch(kc)
    .watch(
      '/api/v1/pods',
      params,
      (type: string, obj: unknown) => {
        if (settled) return;
        if (type === 'ERROR') {
          const st = obj as { code?: number; message?: string };
          if (st.code === 410) return finish({ kind: 'expired' });
          return finish({
            kind: 'error',
            error: new KubeUnavailableError(
              `${what}: ERROR event${st.code !== undefined ? ` HTTP ${st.code}` : ''}: ${st.message ?? JSON.stringify(obj)}`,
              { statusCode: st.code },
            ),
          });
        }
        if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' || type === 'BOOKMARK')
          h.onEvent(type, obj as V1Pod);
      },
      (err: unknown) => {
        if (!err) return finish({ kind: 'closed' });
        if (httpStatusOf(err) === 410) return finish({ kind: 'expired' });
        finish({
          kind: 'error',
          error: new KubeUnavailableError(describeApiCall(call(), err), { cause: err, statusCode: httpStatusOf(err) }),
        });
      },
    )
    .then((c) => {
      controller = c;
      if (settled) return c.abort();
      clearTimeout(deadline);
      h.onEstablished();
    })
    .catch((err: unknown) =>
      finish({
        kind: 'error',
        error: new KubeUnavailableError(describeApiCall(call(), err), { cause: err, statusCode: httpStatusOf(err) }),
      }),
    );
  return { done, cancel: () => finish({ kind: 'closed' }) };
}
