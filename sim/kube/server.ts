/**
 * KubeApiStandIn: a small Kubernetes API server on loopback HTTP for tests and demos
 * (no kube-apiserver can be installed here). core/v1 pods, nodes, events and namespaces
 * and the ENIConfig custom resource (crd.k8s.amazonaws.com/v1alpha1 eniconfigs,
 * eniconfig.ts) with list, get and watch (as Tables too, for kubectl), field and label
 * selectors, resourceVersion and 410 Gone semantics; Events can be created and patched,
 * a Node patched (taints, labels, annotations) and its status subresource patched
 * (conditions), ENIConfigs created, updated, patched and deleted (writes.ts, patch.ts);
 * and failure injection for outage tests. No authentication: any bearer token is accepted.
 * Paths and semantics follow https://kubernetes.io/docs/reference/using-api/api-concepts/.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { API_GROUP_LIST, CORE_V1_RESOURCES, STANDIN_VERSION, apiVersions } from './discovery.js';
import { writeKubeconfigFile } from './kubeconfig.js';
import { buildEniConfig, ENICONFIG_API_GROUP, ENICONFIG_RESOURCES, type EniConfigSpec } from './eniconfig.js';
import { LabelSelectorError, matchesLabels, parseLabelSelector } from './label-selectors.js';
import { API_VERSION_OF, buildList, KIND_OF, type KubeObject, type PodSpecInput } from './objects.js';
import { OPENAPI_V3_ENICONFIG, OPENAPI_V3_ENICONFIG_PATH, OPENAPI_V3_ROOT } from './openapi.js';
import { parseRoute, type Route } from './routes.js';
import { FieldSelectorError, matchesFields, parseFieldSelector } from './selectors.js';
import { KubeStore, type Resource } from './store.js';
import { tableFor, wantsTable } from './table.js';
import { sendStatus, serveWatch, type OpenWatch } from './watch-stream.js';
import { applyCreate, applyDelete, applyPatch, applyUpdate, type WriteResult } from './writes.js';

/** Failure injection: 'timeout' accepts requests and never answers; 'error500' answers 500. */
export type KubeFailureMode = 'none' | 'timeout' | 'error500';

/** Largest request body accepted (bytes). */
const MAX_BODY = 1 << 20;

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
  private eniConfigCrd: boolean;
  private readonly watches = new Map<ServerResponse, OpenWatch>();
  private boundUrl = '';

  /**
   * @param o.host listen address (default 127.0.0.1); o.port (default 0: any free port);
   *   o.historyLimit watch events retained for resuming (default 1000);
   *   o.bookmarkIntervalMs interval of BOOKMARK events on watches that allow them (default 5000 ms);
   *   o.eniConfigCrd whether the ENIConfig CRD is installed (default true; false: its paths answer 404,
   *   as a real API server without the CRD does).
   */
  constructor(
    o: {
      host?: string;
      port?: number;
      historyLimit?: number;
      bookmarkIntervalMs?: number;
      eniConfigCrd?: boolean;
    } = {},
  ) {
    this.eniConfigCrd = o.eniConfigCrd ?? true;
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

  /**
   * Creates (ADDED) or replaces (MODIFIED, same uid) the ENIConfig `name` with `spec`
   * (`subnet`, `subnets`, `securityGroups`), as `kubectl apply` would.
   * @throws Error with the API's 422 message when the spec breaks the CRD schema.
   */
  upsertEniConfig(name: string, spec: EniConfigSpec, labels?: Record<string, string>): void {
    const old = this.store.get('eniconfigs', undefined, name);
    const obj = buildEniConfig(name, spec, labels);
    const r = old
      ? applyUpdate(
          this.store,
          { resource: 'eniconfigs', name },
          { ...obj, metadata: { name, ...(labels ? { labels } : {}) } },
        )
      : applyCreate(
          this.store,
          { resource: 'eniconfigs' },
          { ...obj, metadata: { name, ...(labels ? { labels } : {}) } },
        );
    if (!('object' in r)) throw new Error(r.message);
  }

  /** Deletes the ENIConfig `name` (DELETED); returns false when it did not exist. */
  deleteEniConfig(name: string): boolean {
    return this.store.delete('eniconfigs', undefined, name);
  }

  /**
   * Merges `labels` and `annotations` into node `name`'s metadata (a value of `null`
   * removes the key), as `kubectl label` / `kubectl annotate` do: one MODIFIED event for
   * node watchers. @throws Error when the node does not exist.
   */
  setNodeMetadata(
    name: string,
    m: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> },
  ): void {
    const r = applyPatch(this.store, { resource: 'nodes', name }, 'application/merge-patch+json', { metadata: m });
    if (!('object' in r)) throw new Error(r.message);
  }

  /** Installs (true) or removes (false) the ENIConfig CRD: without it every ENIConfig path answers 404. */
  setEniConfigCrd(installed: boolean): void {
    this.eniConfigCrd = installed;
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
    if (!this.eniConfigCrd && u.pathname.startsWith('/apis/crd.k8s.amazonaws.com')) {
      // As kube-apiserver for a group it does not serve: a plain-text 404, not a Status.
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
      return void res.end('404 page not found\n');
    }
    const json = (body: unknown, code = 200) => {
      const s = JSON.stringify(body);
      res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
      res.end(s);
    };
    if (req.method === 'POST' || req.method === 'PATCH' || req.method === 'PUT')
      return this.write(req, res, u.pathname, json);
    if (req.method === 'DELETE') {
      const route = parseRoute(u.pathname);
      if (!route || route.watch)
        return sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
      const r = applyDelete(this.store, route);
      if ('object' in r) return json(r.object, r.code);
      return sendStatus(res, r.code, r.reason, r.message);
    }
    if (req.method !== 'GET')
      return sendStatus(
        res,
        405,
        'MethodNotAllowed',
        `the server does not allow this method on the requested resource (${req.method})`,
      );
    switch (u.pathname.replace(/\/+$/, '')) {
      case '/version':
        return json(STANDIN_VERSION);
      case '/api':
        return json(apiVersions(this.boundUrl.replace(/^http:\/\//, '')));
      case '/apis':
        return json(API_GROUP_LIST);
      case '/api/v1':
        return json(CORE_V1_RESOURCES);
      case '/apis/crd.k8s.amazonaws.com':
        return json(ENICONFIG_API_GROUP);
      case '/apis/crd.k8s.amazonaws.com/v1alpha1':
        return json(ENICONFIG_RESOURCES);
      case '/openapi/v3':
        return json(OPENAPI_V3_ROOT);
      case OPENAPI_V3_ENICONFIG_PATH:
        return json(OPENAPI_V3_ENICONFIG);
      case '/healthz':
      case '/readyz':
      case '/livez': {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        return void res.end('ok');
      }
    }
    const route = parseRoute(u.pathname);
    if (!route) return sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    this.serveResource(route, u.searchParams, req, res, json);
  }

  /** POST (create) and PATCH: reads the JSON body (at most 1 MiB) and applies it (writes.ts). */
  private write(
    req: IncomingMessage,
    res: ServerResponse,
    pathname: string,
    json: (b: unknown, code?: number) => void,
  ): void {
    const route = parseRoute(pathname);
    if (!route || route.watch)
      return sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        sendStatus(res, 413, 'RequestEntityTooLarge', `request body larger than ${MAX_BODY} bytes`);
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (res.writableEnded) return;
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        return sendStatus(res, 400, 'BadRequest', `request body is not JSON: ${(e as Error).message}`);
      }
      const r: WriteResult =
        req.method === 'POST'
          ? applyCreate(this.store, route, body)
          : req.method === 'PUT'
            ? applyUpdate(this.store, route, body)
            : applyPatch(this.store, route, String(req.headers['content-type'] ?? ''), body);
      if ('object' in r) return json(r.object, r.code);
      sendStatus(res, r.code, r.reason, r.message);
    });
  }

  /** A stored object (a copy), e.g. a Node to check its conditions and taints; undefined when absent. */
  getObject(resource: Resource, namespace: string | undefined, name: string): KubeObject | undefined {
    const o = this.store.get(resource, namespace, name);
    return o ? structuredClone(o) : undefined;
  }

  /** Every stored object of `resource` (copies), e.g. the Events ipamd wrote. */
  listObjects(resource: Resource): KubeObject[] {
    return this.store.list(resource).map((o) => structuredClone(o));
  }

  private serveResource(
    route: Route,
    q: URLSearchParams,
    req: IncomingMessage,
    res: ServerResponse,
    json: (b: unknown) => void,
  ): void {
    let terms;
    let labels;
    try {
      terms = parseFieldSelector(route.resource, q.get('fieldSelector'));
      labels = parseLabelSelector(q.get('labelSelector'));
    } catch (e) {
      if (e instanceof FieldSelectorError || e instanceof LabelSelectorError)
        return sendStatus(res, 400, 'BadRequest', e.message);
      throw e;
    }
    if (route.name !== undefined) terms.push({ field: 'metadata.name', op: '=' as const, value: route.name });
    const watch = route.watch || q.get('watch') === 'true' || q.get('watch') === '1';
    if (watch) {
      const t = q.get('timeoutSeconds');
      const table = wantsTable(req);
      const includeObject = q.get('includeObject');
      const open = serveWatch(
        this.store,
        {
          resource: route.resource,
          namespace: route.namespace,
          terms,
          labels,
          resourceVersion: q.get('resourceVersion') ?? '',
          timeoutSeconds: t !== null && Number(t) > 0 ? Number(t) : undefined,
          allowBookmarks: q.get('allowWatchBookmarks') === 'true',
          bookmarkIntervalMs: this.bookmarkIntervalMs,
          ...(table
            ? { transform: (o: KubeObject) => tableFor(route.resource, [o], o.metadata.resourceVersion, includeObject) }
            : {}),
        },
        res,
        () => this.watches.delete(res),
      );
      if (!res.writableEnded) this.watches.set(res, open);
      return;
    }
    const kind = KIND_OF[route.resource];
    if (route.name !== undefined) {
      const obj = this.store.get(route.resource, route.namespace, route.name);
      if (!obj) return sendStatus(res, 404, 'NotFound', `${route.resource} "${route.name}" not found`);
      return json(
        wantsTable(req) ? tableFor(route.resource, [obj], obj.metadata.resourceVersion, q.get('includeObject')) : obj,
      );
    }
    const rv = String(this.store.resourceVersion);
    const items = this.store
      .list(route.resource)
      .filter(
        (o) =>
          (route.namespace === undefined || o.metadata.namespace === route.namespace) &&
          matchesFields(route.resource, terms, o) &&
          matchesLabels(labels, o),
      );
    json(
      wantsTable(req)
        ? tableFor(route.resource, items, rv, q.get('includeObject'))
        : buildList(`${kind}List`, items, rv, API_VERSION_OF[route.resource]),
    );
  }
}
