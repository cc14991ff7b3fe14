/**
 * KubeApiStandIn: a small Kubernetes API server on loopback HTTP for tests and demos
 * (no kube-apiserver can be installed here). Read-only core/v1 pods and nodes with list,
 * get and watch, field selectors, resourceVersion and 410 Gone semantics, and failure
 * injection for outage tests. No authentication: any bearer token is accepted.
 * Paths and semantics follow https://kubernetes.io/docs/reference/using-api/api-concepts/.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { API_GROUP_LIST, CORE_V1_RESOURCES, STANDIN_VERSION, apiVersions } from './discovery.js';
import { writeKubeconfigFile } from './kubeconfig.js';
import { buildList, type PodSpecInput } from './objects.js';
import { FieldSelectorError, matchesFields, parseFieldSelector } from './selectors.js';
import { KubeStore, type Resource } from './store.js';
import { tableFor, wantsTable } from './table.js';
import { sendStatus, serveWatch, type OpenWatch } from './watch-stream.js';

/** Failure injection: 'timeout' accepts requests and never answers; 'error500' answers 500. */
export type KubeFailureMode = 'none' | 'timeout' | 'error500';

/** A parsed resource path. */
interface Route {
  resource: Resource;
  namespace?: string;
  name?: string;
  watch: boolean;
}

/** Parses `/api/v1[/watch]/...` into a Route, or undefined for unknown paths. */
function parseRoute(pathname: string): Route | undefined {
  const parts = pathname.split('/').filter((s) => s.length > 0);
  if (parts[0] !== 'api' || parts[1] !== 'v1') return undefined;
  let rest = parts.slice(2);
  const watch = rest[0] === 'watch';
  if (watch) rest = rest.slice(1);
  if (rest[0] === 'pods' && rest.length === 1) return { resource: 'pods', watch };
  if (rest[0] === 'nodes' && rest.length <= 2) return { resource: 'nodes', name: rest[1], watch };
  if (rest[0] === 'namespaces' && rest.length >= 3 && rest.length <= 4 && rest[2] === 'pods') return { resource: 'pods', namespace: rest[1], name: rest[3], watch };
  return undefined;
}

/** The stand-in server. Create, `start()`, use `url`, `stop()`. */
export class KubeApiStandIn {
  /** Every request received, in order (`path` includes the query string; `at` is epoch ms). */
  readonly requests: Array<{ method: string; path: string; at: number }> = [];
  private readonly store: KubeStore;
  private readonly server: Server;
  private readonly host: string;
  private readonly wantedPort: number;
  private readonly bookmarkIntervalMs: number;
  private failure: KubeFailureMode = 'none';
  private readonly watches = new Map<ServerResponse, OpenWatch>();
  private boundUrl = '';

  /**
   * @param o.host listen address (default 127.0.0.1); o.port (default 0: any free port);
   *   o.historyLimit watch events retained for resuming (default 1000);
   *   o.bookmarkIntervalMs interval of BOOKMARK events on watches that allow them (default 5000 ms).
   */
  constructor(o: { host?: string; port?: number; historyLimit?: number; bookmarkIntervalMs?: number } = {}) {
    this.host = o.host ?? '127.0.0.1';
    this.wantedPort = o.port ?? 0;
    this.bookmarkIntervalMs = o.bookmarkIntervalMs ?? 5000;
    this.store = new KubeStore(o.historyLimit ?? 1000);
    this.server = createServer((req, res) => this.handle(req, res));
  }

  /** Base URL, e.g. http://127.0.0.1:41234 (empty before `start()`). */
  get url(): string {
    return this.boundUrl;
  }

  /** Listens on host:port. @throws the listen error (e.g. EADDRINUSE). */
  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.wantedPort, this.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const a = this.server.address() as AddressInfo;
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    this.boundUrl = `http://${host}:${a.port}`;
  }

  /** Closes the listener and every open connection (hung requests and watches included). */
  async stop(): Promise<void> {
    for (const res of this.watches.keys()) res.destroy();
    this.watches.clear();
    if (!this.server.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** Writes a kubeconfig for `url` to `path` (usable by kubectl and @kubernetes/client-node). */
  async writeKubeconfig(path: string): Promise<void> {
    if (!this.boundUrl) throw new Error('KubeApiStandIn: start() before writeKubeconfig()');
    await writeKubeconfigFile(path, this.boundUrl);
  }

  /** Creates (watch event ADDED) or replaces (MODIFIED) a pod. */
  upsertPod(pod: PodSpecInput): void {
    this.store.upsertPod(pod);
  }

  /** Deletes a pod (watch event DELETED); a no-op when it does not exist. */
  deletePod(namespace: string, name: string): void {
    this.store.delete('pods', namespace, name);
  }

  /**
   * Creates a node (watch event ADDED); a no-op when it exists, unless `containerRuntimeVersion`
   * (`status.nodeInfo.containerRuntimeVersion`, e.g. `containerd://1.6.20~ds1`) is given: then it
   * is set (MODIFIED when the node exists).
   */
  upsertNode(name: string, containerRuntimeVersion?: string): void {
    this.store.upsertNode(name, containerRuntimeVersion);
  }

  /** Sets the failure mode; any mode but 'none' also cuts every open watch (connection reset). */
  setFailure(mode: KubeFailureMode): void {
    this.failure = mode;
    if (mode === 'none') return;
    for (const res of this.watches.keys()) res.destroy();
    this.watches.clear();
  }

  /**
   * Compacts the event history (as etcd compaction does) and ends every open watch with an
   * ERROR event carrying 410 Expired: clients must list again; a watch resumed from any
   * older resourceVersion is answered 410 Gone.
   */
  compact(): void {
    this.store.compact();
    for (const w of [...this.watches.values()]) w.expire();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = req.url ?? '/';
    this.requests.push({ method: req.method ?? 'GET', path, at: Date.now() });
    if (this.failure === 'timeout') return; // accepted, never answered
    if (this.failure === 'error500') return sendStatus(res, 500, 'InternalError', 'stand-in: injected failure');
    const u = new URL(path, 'http://standin');
    if (req.method !== 'GET') return sendStatus(res, 405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${req.method})`);
    const json = (body: unknown) => {
      const s = JSON.stringify(body);
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
      res.end(s);
    };
    switch (u.pathname.replace(/\/+$/, '')) {
      case '/version': return json(STANDIN_VERSION);
      case '/api': return json(apiVersions(this.boundUrl.replace(/^http:\/\//, '')));
      case '/apis': return json(API_GROUP_LIST);
      case '/api/v1': return json(CORE_V1_RESOURCES);
      case '/healthz': case '/readyz': case '/livez': {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        return void res.end('ok');
      }
    }
    const route = parseRoute(u.pathname);
    if (!route) return sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    this.serveResource(route, u.searchParams, req, res, json);
  }

  private serveResource(route: Route, q: URLSearchParams, req: IncomingMessage, res: ServerResponse, json: (b: unknown) => void): void {
    let terms;
    try {
      terms = parseFieldSelector(route.resource, q.get('fieldSelector'));
    } catch (e) {
      if (e instanceof FieldSelectorError) return sendStatus(res, 400, 'BadRequest', e.message);
      throw e;
    }
    if (route.name !== undefined) terms.push({ field: 'metadata.name', op: '=' as const, value: route.name });
    const watch = route.watch || q.get('watch') === 'true' || q.get('watch') === '1';
    if (watch) {
      const t = q.get('timeoutSeconds');
      const open = serveWatch(this.store, {
        resource: route.resource,
        namespace: route.namespace,
        terms,
        resourceVersion: q.get('resourceVersion') ?? '',
        timeoutSeconds: t !== null && Number(t) > 0 ? Number(t) : undefined,
        allowBookmarks: q.get('allowWatchBookmarks') === 'true',
        bookmarkIntervalMs: this.bookmarkIntervalMs,
      }, res, () => this.watches.delete(res));
      if (!res.writableEnded) this.watches.set(res, open);
      return;
    }
    const kind = route.resource === 'pods' ? 'Pod' : 'Node';
    if (route.name !== undefined) {
      const obj = this.store.get(route.resource, route.namespace, route.name);
      if (!obj) return sendStatus(res, 404, 'NotFound', `${route.resource} "${route.name}" not found`);
      return json(wantsTable(req) ? tableFor(route.resource, [obj], obj.metadata.resourceVersion, q.get('includeObject')) : obj);
    }
    const rv = String(this.store.resourceVersion);
    const items = this.store.list(route.resource).filter((o) => (route.namespace === undefined || o.metadata.namespace === route.namespace) && matchesFields(route.resource, terms, o));
    json(wantsTable(req) ? tableFor(route.resource, items, rv, q.get('includeObject')) : buildList(`${kind}List`, items, rv));
  }
}
