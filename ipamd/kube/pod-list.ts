/**
 * One bounded LIST of the pods bound to a node: `GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`
 * through @kubernetes/client-node's CoreV1Api, aborted after a deadline. All-or-nothing:
 * resolves with the complete list or rejects with KubeUnavailableError.
 * API semantics: https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks
 * (no `limit` is sent, so the server answers with one complete list).
 */
import { CoreV1Api, Observable, type KubeConfig, type ObservableMiddleware } from './client.js';
import { KubeUnavailableError, describeApiCall, httpStatusOf } from './errors.js';
import { kubeIdentity } from './config.js';
import { podKey, toKubePod, type KubePod } from './pod-evidence.js';

/** A complete list and the resourceVersion to start a watch from. */
export interface PodListResult {
  pods: Map<string, KubePod>;
  resourceVersion: string;
}

/**
 * Lists pods with `spec.nodeName=nodeName` within `timeoutMs` (ms).
 * `signal` (optional) aborts early (e.g. on stop()).
 * @throws KubeUnavailableError on timeout, refused connection, any non-2xx answer, or abort;
 *   its message is one line: `list pods (spec.nodeName=<node>) [as <identity>]: HTTP 403 Forbidden: …`.
 */
export async function listNodePods(
  kc: KubeConfig,
  nodeName: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<PodListResult> {
  const api = kc.makeApiClient(CoreV1Api);
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onOuterAbort = () => ac.abort(new KubeUnavailableError('pod list aborted'));
  signal?.addEventListener('abort', onOuterAbort, { once: true });
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const e = new KubeUnavailableError(`pod list timed out after ${timeoutMs} ms`);
      ac.abort(e);
      reject(e);
    }, timeoutMs);
    ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true });
  });
  try {
    // Per-request middleware that attaches the abort signal to the underlying fetch.
    const abortMiddleware: ObservableMiddleware = {
      pre: (ctx) => {
        ctx.setSignal(ac.signal);
        return new Observable(Promise.resolve(ctx));
      },
      post: (rsp) => new Observable(Promise.resolve(rsp)),
    };
    const req = api.listPodForAllNamespaces(
      { fieldSelector: `spec.nodeName=${nodeName}` },
      { middleware: [abortMiddleware], middlewareMergeStrategy: 'append' },
    );
    req.catch(() => {}); // the deadline may win; the late rejection is expected
    const list = await Promise.race([req, deadline]);
    const pods = new Map<string, KubePod>();
    for (const p of list.items) {
      const k = toKubePod(p);
      if (k) pods.set(podKey(k.namespace, k.name), k);
    }
    return { pods, resourceVersion: list.metadata?.resourceVersion ?? '' };
  } catch (e) {
    if (e instanceof KubeUnavailableError) throw e;
    const call = { verb: 'list', resource: `pods (spec.nodeName=${nodeName})`, identity: kubeIdentity(kc) };
    throw new KubeUnavailableError(describeApiCall(call, e), { cause: e, statusCode: httpStatusOf(e) });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onOuterAbort);
    if (!ac.signal.aborted) ac.abort(new KubeUnavailableError('pod list finished'));
  }
}
