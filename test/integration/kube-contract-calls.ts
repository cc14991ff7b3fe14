/**
 * The contract of the Kubernetes calls ipamd makes, as one script run against a backend
 * (sim/kube, or the real kube-apiserver): each step sends what ipamd sends (paths,
 * query parameters, content types, bodies as ipamd/restore, ipamd/observability and
 * ipamd/eniconfig build them) and records the answer reduced to what a client can rely
 * on (status, kind, reason, event types, names, what a patch left). kube-contract.test.ts
 * runs it on both and compares the records key by key.
 */
import type { KubeAnswer, KubeHttp, WatchReader } from '../../kit/cluster/kube-http.js';
import type { EniConfigSpec, PodSpecInput } from '../../sim/kube/index.js';
import { waitFor } from '../../kit/wait.js';

/** What a backend must do to set the scene (as admin, outside ipamd's calls). */
export interface ContractBackend {
  name: string;
  api: KubeHttp;
  registerNode(name: string): Promise<void>;
  upsertPod(p: PodSpecInput): Promise<void>;
  deletePod(namespace: string, name: string): Promise<void>;
  upsertEniConfig(name: string, spec: EniConfigSpec): Promise<void>;
  /** Makes the ENIConfig CRD served (it starts absent). */
  installEniConfigCrd(): Promise<void>;
  /** Compacts the history (etcd compaction / the stand-in's compact()). */
  compact(): Promise<void>;
}

/** One record per step. */
export type ContractRecord = Record<string, unknown>;

const MERGE = 'application/merge-patch+json';
const STRATEGIC = 'application/strategic-merge-patch+json';
const CRD_PATH = '/apis/crd.k8s.amazonaws.com/v1alpha1/eniconfigs';

/** status, and kind / reason / code when the body is a Status. */
function head(a: KubeAnswer): Record<string, unknown> {
  const b = typeof a.body === 'object' && a.body ? a.body : {};
  return {
    status: a.status,
    json: a.contentType.startsWith('application/json'),
    kind: b.kind,
    ...(b.kind === 'Status' ? { reason: b.reason, code: b.code } : {}),
  };
}

/** A watch's events as `TYPE name` (ERROR: `ERROR <code> <reason>`), its HTTP status, and whether each object had kind and a numeric resourceVersion. */
function events(w: WatchReader): Record<string, unknown> {
  return {
    status: w.status,
    events: w.events.map((e) => {
      // A body that is not an event (a Status answering the request itself) is recorded as such.
      const x = e as unknown as { kind?: string; code?: number; reason?: string };
      if (!e.object) return `${x.kind} ${x.code} ${x.reason}`;
      return e.type === 'ERROR'
        ? `ERROR ${e.object.code} ${e.object.reason}`
        : `${e.type} ${e.object.metadata?.name ?? ''}`;
    }),
    wellFormed: w.events.every(
      (e) => !e.object || e.type === 'ERROR' || (e.object.kind && /^\d+$/.test(e.object.metadata?.resourceVersion)),
    ),
  };
}

/** Events of a watch opened on `path`, after `act`, until `until` holds (or the server ends it). */
async function watchDuring(
  api: KubeHttp,
  path: string,
  act: () => Promise<void>,
  until: (w: WatchReader) => boolean,
): Promise<WatchReader> {
  const w = await api.watch(path);
  await act();
  let ended = false;
  void w.ended.then(() => (ended = true));
  await waitFor(`watch ${path}`, () => ended || until(w), 15_000);
  w.close();
  return w;
}

const last = (w: WatchReader, what: string): boolean =>
  w.events.some((e) => `${e.type} ${e.object.metadata?.name}` === what);

/** Runs ipamd's calls on `b` with node `node` and namespace `ns` (both made here). */
export async function runContract(b: ContractBackend, node: string, ns: string): Promise<ContractRecord> {
  const r: ContractRecord = {};
  const { api } = b;
  // ENIConfigs before the CRD exists (eniconfig/source.ts lists them whether or not custom networking is on).
  r['eniconfigs list, no CRD'] = head(await api.call('GET', CRD_PATH));
  await b.registerNode(node);
  await b.upsertPod({ namespace: ns, name: 'a', nodeName: node, podIP: '10.0.1.10', containerID: 'c1' });
  await b.upsertPod({ namespace: ns, name: 'elsewhere', nodeName: `${node}-x`, podIP: '10.0.1.11' });
  // Restore: the pods bound to this node (kube-source-list.ts), then a watch from the list's resourceVersion.
  const sel = `fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}`;
  const list = await api.call('GET', `/api/v1/pods?${sel}`);
  r['pods list by node'] = {
    ...head(list),
    apiVersion: list.body.apiVersion,
    rvNumeric: /^\d+$/.test(list.body.metadata?.resourceVersion),
    names: list.body.items?.map((p: { metadata: { name: string } }) => p.metadata.name),
    podIP: list.body.items?.[0]?.status?.podIP,
  };
  r['pods list, unknown field selector'] = head(await api.call('GET', '/api/v1/pods?fieldSelector=spec.bogus%3Dx'));
  const rv = String(list.body.metadata.resourceVersion);
  const watchPath = `/api/v1/pods?watch=true&${sel}&resourceVersion=${rv}&allowWatchBookmarks=true&timeoutSeconds=30`;
  const w = await watchDuring(
    api,
    watchPath,
    async () => {
      await b.upsertPod({ namespace: ns, name: 'b', nodeName: node, podIP: '10.0.1.12' });
      await b.upsertPod({ namespace: ns, name: 'other-node', nodeName: `${node}-x`, podIP: '10.0.1.13' });
      await b.deletePod(ns, 'b');
    },
    (x) => last(x, 'DELETED b'),
  );
  // Which events a pod's life gives differs by how it was written; what a watcher needs: first ADDED, last DELETED, no other node.
  const ev = events(w).events as string[];
  r['pods watch by node'] = {
    status: w.status,
    first: ev[0],
    last: ev.at(-1),
    otherNode: ev.some((e) => e.endsWith('other-node')),
  };
  // A watch the server ends (timeoutSeconds): a clean end, no error event.
  const short = await watchDuring(
    api,
    `/api/v1/pods?watch=true&${sel}&timeoutSeconds=1`,
    async () => undefined,
    () => false,
  );
  r['pods watch, timeoutSeconds=1'] = {
    status: short.status,
    errors: short.events.filter((e) => e.type === 'ERROR').length,
  };
  // A resourceVersion older than the history: expired.
  await b.upsertPod({ namespace: ns, name: 'c', nodeName: `${node}-x`, podIP: '10.0.1.14' });
  await b.compact();
  const gone = await watchDuring(
    api,
    `/api/v1/pods?watch=true&${sel}&resourceVersion=${rv}`,
    async () => undefined,
    (x) => x.events.length > 0,
  );
  r['pods watch from a compacted resourceVersion'] = events(gone);
  return {
    ...r,
    ...(await nodeCalls(b, node)),
    ...(await eventCalls(b, node, ns)),
    ...(await eniConfigCalls(b, node)),
    ...(await endpointSliceCalls(b, ns)),
  };
}

/** readNode, node status condition (strategic merge), taints (merge with resourceVersion: 409 when stale), node list/watch by name. */
async function nodeCalls(b: ContractBackend, node: string): Promise<ContractRecord> {
  const r: ContractRecord = {};
  const { api } = b;
  r['node get'] = head(await api.call('GET', `/api/v1/nodes/${node}`));
  r['node get, absent'] = head(await api.call('GET', `/api/v1/nodes/${node}-absent`));
  const cond = (status: string) => ({
    type: 'eni-ipam.io/IPAllocatable',
    status,
    reason: 'Test',
    message: 'contract',
    lastHeartbeatTime: '2026-01-01T00:00:00Z',
    lastTransitionTime: '2026-01-01T00:00:00Z',
  });
  const ready = {
    type: 'Ready',
    status: 'False',
    reason: 'KubeletNotReady',
    message: 'x',
    lastHeartbeatTime: '2026-01-01T00:00:00Z',
    lastTransitionTime: '2026-01-01T00:00:00Z',
  };
  await api.call('PATCH', `/api/v1/nodes/${node}/status`, { status: { conditions: [ready] } }, STRATEGIC);
  const p1 = await api.call(
    'PATCH',
    `/api/v1/nodes/${node}/status`,
    { status: { conditions: [cond('True')] } },
    STRATEGIC,
  );
  const p2 = await api.call(
    'PATCH',
    `/api/v1/nodes/${node}/status`,
    { status: { conditions: [cond('False')] } },
    STRATEGIC,
  );
  const conditions = (p2.body.status?.conditions ?? []) as Array<{ type: string; status: string }>;
  r['node status condition patch'] = {
    ...head(p1),
    after: conditions.map((c) => `${c.type}=${c.status}`).sort(),
  };
  r['node status patch, merge-patch content type'] = head(
    await api.call('PATCH', `/api/v1/nodes/${node}/status`, { status: { conditions: [cond('True')] } }, MERGE),
  );
  const cur = await api.call('GET', `/api/v1/nodes/${node}`);
  const taint = { key: 'eni-ipam.io/no-ip-available', effect: 'NoSchedule' };
  const rv = String(cur.body.metadata.resourceVersion);
  const t1 = await api.call(
    'PATCH',
    `/api/v1/nodes/${node}`,
    { metadata: { resourceVersion: rv }, spec: { taints: [taint] } },
    MERGE,
  );
  r['node taint patch'] = { ...head(t1), taints: t1.body.spec?.taints?.map((t: { key: string }) => t.key) };
  r['node taint patch, stale resourceVersion'] = head(
    await api.call(
      'PATCH',
      `/api/v1/nodes/${node}`,
      { metadata: { resourceVersion: rv }, spec: { taints: [] } },
      MERGE,
    ),
  );
  const byName = `fieldSelector=${encodeURIComponent(`metadata.name=${node}`)}`;
  const nl = await api.call('GET', `/api/v1/nodes?${byName}`);
  r['node list by name'] = {
    ...head(nl),
    names: nl.body.items?.map((n: { metadata: { name: string } }) => n.metadata.name),
  };
  return r;
}

/** Events as ipamd writes them (kube-writes.ts): create, then a merge patch of count/lastTimestamp/message. */
async function eventCalls(b: ContractBackend, node: string, ns: string): Promise<ContractRecord> {
  const r: ContractRecord = {};
  const { api } = b;
  const body = (name: string) => ({
    metadata: { name, namespace: ns },
    involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'a', namespace: ns },
    reason: 'FailedIPAllocation',
    message: 'no IP',
    type: 'Warning',
    count: 1,
    firstTimestamp: '2026-01-01T00:00:00Z',
    lastTimestamp: '2026-01-01T00:00:00Z',
    source: { component: 'eni-ipamd', host: node },
    reportingComponent: 'eni-ipamd',
    reportingInstance: node,
  });
  const made = await api.call('POST', `/api/v1/namespaces/${ns}/events`, body('a.1'));
  r['event create'] = { ...head(made), name: made.body.metadata?.name, count: made.body.count };
  const patched = await api.call(
    'PATCH',
    `/api/v1/namespaces/${ns}/events/a.1`,
    { count: 2, lastTimestamp: '2026-01-01T00:00:05Z', message: 'no IP again' },
    MERGE,
  );
  r['event patch'] = { ...head(patched), count: patched.body.count, message: patched.body.message };
  r['event create, same name'] = head(await api.call('POST', `/api/v1/namespaces/${ns}/events`, body('a.1')));
  r['event patch, absent'] = head(await api.call('PATCH', `/api/v1/namespaces/${ns}/events/nope`, { count: 2 }, MERGE));
  return r;
}

/** ENIConfigs once the CRD is served: list, watch, a spec the schema refuses; the node's labels seen by a node watch. */
async function eniConfigCalls(b: ContractBackend, node: string): Promise<ContractRecord> {
  const r: ContractRecord = {};
  const { api } = b;
  await b.installEniConfigCrd();
  const list = await api.call('GET', CRD_PATH);
  r['eniconfigs list'] = {
    ...head(list),
    apiVersion: list.body.apiVersion,
    rvNumeric: /^\d+$/.test(list.body.metadata?.resourceVersion),
  };
  const name = `${node}-cfg`;
  const w = await watchDuring(
    api,
    `${CRD_PATH}?watch=true&resourceVersion=${list.body.metadata.resourceVersion}&timeoutSeconds=30`,
    async () => {
      await b.upsertEniConfig(name, { subnet: 'subnet-0aaaaaaaaaaaaaaa1', securityGroups: ['sg-0aaaaaaaaaaaaaaa1'] });
      await b.upsertEniConfig(name, { subnet: 'subnet-0bbbbbbbbbbbbbbb1' });
    },
    (x) => x.events.length >= 2,
  );
  r['eniconfigs watch'] = events(w);
  const bad = await api.call('POST', CRD_PATH, {
    apiVersion: 'crd.k8s.amazonaws.com/v1alpha1',
    kind: 'ENIConfig',
    metadata: { name: `${node}-bad` },
    spec: { subnet: 42 },
  });
  r['eniconfig create, spec the schema refuses'] = head(bad);
  return r;
}

/**
 * EndpointSlices cluster-wide, as the cooldown evidence reads them (ipamd/kube/endpointslice-watch.ts):
 * a list with a page limit, then a watch from its resourceVersion that sees a slice created
 * in a namespace and changed (its address removed).
 */
async function endpointSliceCalls(b: ContractBackend, ns: string): Promise<ContractRecord> {
  const r: ContractRecord = {};
  const { api } = b;
  const path = '/apis/discovery.k8s.io/v1/endpointslices';
  const list = await api.call('GET', `${path}?limit=500`);
  r['endpointslices list'] = {
    ...head(list),
    apiVersion: list.body.apiVersion,
    rvNumeric: /^\d+$/.test(list.body.metadata?.resourceVersion),
    continue: list.body.metadata?.continue ?? '',
  };
  const slice = (addresses: string[], resourceVersion?: string) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'svc-a',
      labels: { 'kubernetes.io/service-name': 'svc' },
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    addressType: 'IPv4',
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
    ports: [],
  });
  const nsPath = `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
  const ours = (e: WatchReader['events'][number]): boolean => e.object?.metadata?.name === 'svc-a';
  const w = await watchDuring(
    api,
    `${path}?watch=true&resourceVersion=${list.body.metadata.resourceVersion}&timeoutSeconds=30`,
    async () => {
      const made = await api.call('POST', nsPath, slice(['10.0.1.10']));
      r['endpointslice create'] = head(made);
      const rv = String(made.body.metadata?.resourceVersion);
      r['endpointslice update'] = head(await api.call('PUT', `${nsPath}/svc-a`, slice([], rv)));
    },
    (x) => x.events.filter(ours).length >= 2,
  );
  // Only svc-a's: the real server keeps default/kubernetes's slice itself.
  r['endpointslices watch'] = events({ ...w, events: w.events.filter(ours) } as WatchReader);
  return r;
}
