/**
 * Setting the scene on a real API server as admin, in the terms ipamd's tests use: pods
 * bound to a node with the status a kubelet would report (created, then their status
 * subresource patched), Nodes with a runtime version, labels and annotations, ENIConfigs.
 * Everything made is remembered and deleted by `cleanup()` (namespaces stay: without a
 * controller manager nothing would finalize their deletion, and the server goes with the run).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { EniConfigSpec, PodSpecInput } from '../../sim/kube/index.js';
import { kubeHttp, type KubeAnswer, type KubeHttp } from './kube-http.js';
import type { ApiServerInfo } from './apiserver.js';

let seq = 0;

/** A name unique to this process and call: `<prefix>-<pid>-<n>` (a shared server's tests never collide). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${process.pid}-${seq++}`;
}

/** The scene setter; see the module docstring. */
export interface RealKube {
  api: KubeHttp;
  /** Creates `ns` and its `default` ServiceAccount (pods need it; no controller manager makes it). Idempotent. */
  ensureNamespace(ns: string): Promise<void>;
  /** Creates a pod bound to `p.nodeName` or updates its status (phase default Running, podIP, containerID). */
  upsertPod(p: PodSpecInput): Promise<KubeAnswer>;
  /** Deletes a pod at once (grace period 0, as `kubectl delete --force --grace-period=0`). */
  deletePod(namespace: string, name: string): Promise<void>;
  /** Creates Node `name` (labels, annotations) and sets status.nodeInfo.containerRuntimeVersion. */
  registerNode(
    name: string,
    o?: { labels?: Record<string, string>; annotations?: Record<string, string>; runtimeVersion?: string },
  ): Promise<void>;
  /** Merge-patches a Node's labels / annotations (null removes a key), as kubectl label / annotate. */
  setNodeMetadata(
    name: string,
    m: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> },
  ): Promise<void>;
  /** Creates or replaces the ENIConfig `name`. @returns the API's answer (422 for a spec the CRD refuses). */
  upsertEniConfig(name: string, spec: EniConfigSpec): Promise<KubeAnswer>;
  /** Deletes the ENIConfig `name`. */
  deleteEniConfig(name: string): Promise<void>;
  /** GET `path` (404 → undefined). */
  get(path: string): Promise<KubeAnswer['body'] | undefined>;
  /** Deletes every pod, Node and ENIConfig made through this object (best effort; never throws). */
  cleanup(): Promise<void>;
}

const ok = (r: KubeAnswer, what: string): KubeAnswer => {
  assert.ok(r.status >= 200 && r.status < 300, `${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 400)}`);
  return r;
};

const MERGE = 'application/merge-patch+json';

/** A {@link RealKube} as admin on `s`. */
export function realKube(s: ApiServerInfo): RealKube {
  const api = kubeHttp(s.adminKubeconfig);
  const made = new Set<string>();
  const podStatus = (p: PodSpecInput, startedAt: string): Record<string, unknown> => {
    const phase = p.phase ?? 'Running';
    return {
      phase,
      ...(p.podIP ? { podIP: p.podIP, podIPs: [{ ip: p.podIP }] } : {}),
      ...(p.containerID
        ? {
            containerStatuses: [
              {
                name: 'app',
                containerID: `containerd://${p.containerID}`,
                image: 'registry.k8s.io/pause:3.10',
                imageID: '',
                ready: phase === 'Running',
                restartCount: 0,
                started: phase === 'Running',
                state: phase === 'Running' ? { running: { startedAt } } : { waiting: { reason: 'ContainerCreating' } },
              },
            ],
          }
        : {}),
    };
  };
  const k: RealKube = {
    api,
    async ensureNamespace(ns) {
      const a = await api.call('POST', '/api/v1/namespaces', { metadata: { name: ns } });
      if (a.status !== 409) ok(a, `create namespace ${ns}`);
      const b = await api.call('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: 'default' } });
      if (b.status !== 409) ok(b, `create ${ns}/default ServiceAccount`);
    },
    async upsertPod(p) {
      const path = `/api/v1/namespaces/${p.namespace}/pods`;
      if (p.uid) throw new Error('a real API server assigns uids: upsertPod takes none');
      let cur = await api.call('GET', `${path}/${p.name}`);
      if (cur.status === 404) {
        await k.ensureNamespace(p.namespace);
        const spec = {
          nodeName: p.nodeName,
          hostNetwork: p.hostNetwork ?? false,
          containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
        };
        cur = ok(await api.call('POST', path, { metadata: { name: p.name }, spec }), `create pod ${p.name}`);
        made.add(`${path}/${p.name}`);
      }
      const startedAt = String(cur.body.metadata.creationTimestamp);
      return ok(
        await api.call('PATCH', `${path}/${p.name}/status`, { status: podStatus(p, startedAt) }, MERGE),
        `pod ${p.name} status`,
      );
    },
    async deletePod(namespace, name) {
      const path = `/api/v1/namespaces/${namespace}/pods/${name}`;
      ok(await api.call('DELETE', `${path}?gracePeriodSeconds=0`), `delete pod ${name}`);
      made.delete(path);
    },
    async registerNode(name, o = {}) {
      const metadata = { name, labels: { 'kubernetes.io/hostname': name, ...o.labels }, annotations: o.annotations };
      ok(await api.call('POST', '/api/v1/nodes', { metadata }), `create node ${name}`);
      made.add(`/api/v1/nodes/${name}`);
      const nodeInfo = { containerRuntimeVersion: o.runtimeVersion ?? 'containerd://2.4.2' };
      ok(
        await api.call('PATCH', `/api/v1/nodes/${name}/status`, { status: { nodeInfo } }, MERGE),
        `node ${name} status`,
      );
    },
    async setNodeMetadata(name, m) {
      ok(await api.call('PATCH', `/api/v1/nodes/${name}`, { metadata: m }, MERGE), `patch node ${name}`);
    },
    async upsertEniConfig(name, spec) {
      const path = `/apis/crd.k8s.amazonaws.com/v1alpha1/eniconfigs`;
      const body = { apiVersion: 'crd.k8s.amazonaws.com/v1alpha1', kind: 'ENIConfig', metadata: { name }, spec };
      const cur = await api.call('GET', `${path}/${name}`);
      made.add(`${path}/${name}`);
      if (cur.status === 404) return api.call('POST', path, body);
      const rv = String(cur.body.metadata.resourceVersion);
      return api.call('PUT', `${path}/${name}`, { ...body, metadata: { name, resourceVersion: rv } });
    },
    async deleteEniConfig(name) {
      const path = `/apis/crd.k8s.amazonaws.com/v1alpha1/eniconfigs/${name}`;
      ok(await api.call('DELETE', path), `delete ENIConfig ${name}`);
      made.delete(path);
    },
    async get(path) {
      const r = await api.call('GET', path);
      return r.status === 404 ? undefined : ok(r, `GET ${path}`).body;
    },
    async cleanup() {
      // Best effort and never throws: a throwing after-hook would skip the hooks after it
      // (ipamd left running keeps the test process alive); the server goes with the run.
      for (const path of [...made].reverse())
        await api
          .call('DELETE', path.includes('/pods/') ? `${path}?gracePeriodSeconds=0` : path)
          .catch(() => undefined);
      made.clear();
    },
  };
  return k;
}

/** One audit.k8s.io/v1 Event of the server's audit log (the fields tests read). */
export interface AuditEntry {
  verb: string;
  requestURI: string;
  user: { username: string };
  responseStatus?: { code: number };
  /** RFC 3339 with microseconds. */
  requestReceivedTimestamp: string;
}

/** The audit log's entries so far that `match` accepts (the log is JSON lines). */
export function auditEntries(s: ApiServerInfo, match: (e: AuditEntry) => boolean): AuditEntry[] {
  return readFileSync(s.auditLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEntry)
    .filter(match);
}

/**
 * Fails (assert) when `user` got a 403 since `sinceMs` (epoch ms) on a request whose URI
 * `concerns`: a verb ipamd needs that the chart's ClusterRole does not grant.
 */
export function assertNoForbidden(
  s: ApiServerInfo,
  user: string,
  sinceMs: number,
  concerns: (uri: string) => boolean,
): void {
  const forbidden = auditEntries(
    s,
    (a) =>
      a.user.username === user &&
      a.responseStatus?.code === 403 &&
      Date.parse(a.requestReceivedTimestamp) >= sinceMs - 1000 &&
      concerns(a.requestURI),
  );
  assert.deepEqual(
    forbidden.map((a) => `${a.verb} ${a.requestURI}`),
    [],
    `${user} was refused what it called: its ClusterRole lacks a verb`,
  );
}
