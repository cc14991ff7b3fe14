/**
 * The watch half of the stand-in: streams newline-delimited JSON watch events
 * (`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`) on one HTTP
 * response, as https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
 * describes: synthetic ADDED events for the current objects when `resourceVersion` is
 * unset or "0", otherwise every change after it from the bounded history (410 Gone when
 * that history was already compacted), then live changes, until `timeoutSeconds`.
 */
import type { ServerResponse } from 'node:http';
import { matchesLabels, type LabelRequirement } from './label-selectors.js';
import { API_VERSION_OF, buildStatus, KIND_OF, type KubeObject } from './objects.js';
import { matchesFields, type FieldTerm } from './selectors.js';
import type { KubeStore, Resource, StoreEvent } from './store.js';

/** What one watch request asks for. */
export interface WatchRequest {
  resource: Resource;
  /** Only objects in this namespace (namespaced list paths). */
  namespace?: string;
  terms: FieldTerm[];
  /**
   * Label requirements (`labelSelector`); default none. As the API server does for
   * filtered watches, a change that makes an object start matching the selectors is sent
   * as ADDED, one that makes it stop matching as DELETED (with the object's new state).
   */
  labels?: LabelRequirement[];
  /** The `resourceVersion` query parameter ('' when absent). */
  resourceVersion: string;
  /** `timeoutSeconds` (s); undefined: until the client or the stand-in ends it. */
  timeoutSeconds?: number;
  allowBookmarks: boolean;
  /** Interval between BOOKMARK events (ms) when `allowBookmarks`. */
  bookmarkIntervalMs: number;
  /**
   * How each ADDED/MODIFIED/DELETED object is sent: e.g. as a one-row meta.k8s.io Table when
   * the client asked for tables (kubectl get -w), so every row carries all its columns.
   */
  transform?: (o: KubeObject) => unknown;
}

/** Sends a JSON error (meta/v1 Status) with `code`. */
export function sendStatus(res: ServerResponse, code: number, reason: string, message: string): void {
  const body = JSON.stringify(buildStatus(code, reason, message));
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

/** Controls of one open watch stream. */
export interface OpenWatch {
  /** Ends the stream cleanly (idempotent). */
  end(): void;
  /** Sends an ERROR event carrying a 410 Expired Status, then ends the stream (what the API server does when a watcher falls behind compaction). */
  expire(): void;
}

/**
 * Serves one watch on `res` from `store`. `onEnd` runs once when the stream ends for
 * any reason. Returns the stream's controls (no-ops when it was answered with an error).
 */
export function serveWatch(store: KubeStore, w: WatchRequest, res: ServerResponse, onEnd: () => void): OpenWatch {
  let initial: StoreEvent[] | KubeObject[];
  if (w.resourceVersion === '' || w.resourceVersion === '0') {
    initial = store.list(w.resource);
  } else {
    const since = Number(w.resourceVersion);
    if (!Number.isInteger(since) || since < 0) {
      sendStatus(res, 400, 'BadRequest', `invalid resourceVersion "${w.resourceVersion}"`);
      onEnd();
      return { end: () => {}, expire: () => {} };
    }
    const evs = store.eventsSince(w.resource, since);
    if (evs === 'gone') {
      // As kube-apiserver: the watch is accepted (200), then one ERROR event 410 Expired ends it
      // (its cacher and etcd3 watcher both answer a too-old resourceVersion so).
      const body = JSON.stringify({
        type: 'ERROR',
        object: buildStatus(410, 'Expired', 'The resourceVersion for the provided watch is too old.'),
      });
      res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
      res.end(`${body}\n`);
      onEnd();
      return { end: () => {}, expire: () => {} };
    }
    initial = evs;
  }
  const matches = (o: KubeObject) =>
    (w.namespace === undefined || o.metadata.namespace === w.namespace) &&
    matchesFields(w.resource, w.terms, o) &&
    matchesLabels(w.labels ?? [], o);
  const send = (type: string, object: unknown) => res.write(JSON.stringify({ type, object }) + '\n');
  const write = (type: string, object: KubeObject) => send(type, w.transform ? w.transform(object) : object);

  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Transfer-Encoding': 'chunked',
    'Cache-Control': 'no-cache, private',
  });
  res.flushHeaders(); // the client learns the watch is established before any event
  /** Sends a change as the filtered watch sees it (see {@link WatchRequest.labels}). */
  const writeEvent = (e: StoreEvent) => {
    const now = matches(e.object);
    const before = e.previous ? matches(e.previous) : now;
    if (e.type !== 'MODIFIED' || (now && before)) {
      if (now) write(e.type, e.object);
    } else if (now) write('ADDED', e.object);
    else if (before) write('DELETED', e.object);
  };
  for (const x of initial) {
    if ('rv' in x) writeEvent(x as StoreEvent);
    else if (matches(x as KubeObject)) write('ADDED', x);
  }
  const unsubscribe = store.subscribe((e) => {
    if (e.resource === w.resource) writeEvent(e);
  });
  const kind = KIND_OF[w.resource];
  const bookmark = w.allowBookmarks
    ? setInterval(
        () =>
          send('BOOKMARK', {
            kind,
            apiVersion: API_VERSION_OF[w.resource],
            metadata: { resourceVersion: String(store.resourceVersion) },
          }),
        w.bookmarkIntervalMs,
      )
    : undefined;
  const timeout = w.timeoutSeconds !== undefined ? setTimeout(() => end(), w.timeoutSeconds * 1000) : undefined;
  let ended = false;
  const cleanup = () => {
    if (ended) return;
    ended = true;
    unsubscribe();
    if (bookmark) clearInterval(bookmark);
    if (timeout) clearTimeout(timeout);
    onEnd();
  };
  const end = () => {
    if (!res.writableEnded) res.end();
    cleanup();
  };
  res.on('close', cleanup);
  const expire = () => {
    if (ended) return;
    send('ERROR', buildStatus(410, 'Expired', `too old resource version (compacted at ${store.resourceVersion})`));
    end();
  };
  return { end, expire };
}
