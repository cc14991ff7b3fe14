/**
 * In-memory object store of the Kubernetes API stand-in: pods, nodes, events, namespaces,
 * ENIConfigs (crd.k8s.amazonaws.com/v1alpha1) and EndpointSlices (discovery.k8s.io/v1), one global
 * resourceVersion counter (a decimal string that only grows, as etcd's revision), a
 * bounded history of watch events so a watch can resume from a resourceVersion, and
 * watch subscribers. Follows the resourceVersion rules in
 * https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions.
 */
import {
  buildNamespace,
  buildNode,
  buildPod,
  newUid,
  nowTimestamp,
  type KubeObject,
  type PodSpecInput,
} from './objects.js';

/** Resources the stand-in serves. */
export type Resource = 'pods' | 'nodes' | 'events' | 'namespaces' | 'eniconfigs' | 'endpointslices';

/** Namespaced resources (the others are cluster-scoped). */
export const NAMESPACED: ReadonlySet<Resource> = new Set(['pods', 'events', 'endpointslices']);

/** Namespaces every cluster starts with. */
const INITIAL_NAMESPACES = ['default', 'kube-node-lease', 'kube-public', 'kube-system'];

/** One watch event as streamed (`object` is the object's state after the change). */
export interface StoreEvent {
  rv: number;
  resource: Resource;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: KubeObject;
  /** The object before a MODIFIED change (watch filters turn a change into ADDED/DELETED with it). */
  previous?: KubeObject;
}

/** A subscriber to new events. */
export type StoreListener = (e: StoreEvent) => void;

/** Keys objects by `namespace/name` (cluster-scoped: `/name`). */
export function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

/** The store; `historyLimit` bounds the retained events (default 1000). */
export class KubeStore {
  private rv = 1;
  private readonly objects: Record<Resource, Map<string, KubeObject>> = {
    pods: new Map(),
    nodes: new Map(),
    events: new Map(),
    namespaces: new Map(),
    eniconfigs: new Map(),
    endpointslices: new Map(),
  };
  private readonly history: StoreEvent[] = [];
  /** resourceVersion of the newest event dropped from history (0: none dropped). */
  private compactedRv = 0;
  private readonly listeners = new Set<StoreListener>();

  constructor(private readonly historyLimit = 1000) {
    for (const ns of INITIAL_NAMESPACES) this.ensureNamespace(ns);
  }

  /** Creates namespace `name` (ADDED) unless it exists. */
  ensureNamespace(name: string): void {
    const key = objectKey(undefined, name);
    if (this.objects.namespaces.has(key)) return;
    const rv = this.rv + 1;
    this.commit('namespaces', key, buildNamespace(name, newUid(), String(rv), nowTimestamp()), 'ADDED', rv);
  }

  /**
   * Stores `obj` as a new object of `resource` (uid, resourceVersion, creationTimestamp
   * filled in) and returns it. @throws Error('AlreadyExists') when the name is taken.
   */
  create(resource: Resource, obj: KubeObject): KubeObject {
    const key = objectKey(obj.metadata.namespace, obj.metadata.name);
    if (this.objects[resource].has(key)) throw new Error('AlreadyExists');
    if (obj.metadata.namespace) this.ensureNamespace(obj.metadata.namespace);
    const rv = this.rv + 1;
    const stored = {
      ...obj,
      metadata: { ...obj.metadata, uid: newUid(), resourceVersion: String(rv), creationTimestamp: nowTimestamp() },
    } as KubeObject;
    this.commit(resource, key, stored, 'ADDED', rv);
    return stored;
  }

  /** Replaces an existing object with `obj` (MODIFIED, new resourceVersion; uid and creationTimestamp kept). */
  replace(resource: Resource, obj: KubeObject): KubeObject {
    const key = objectKey(obj.metadata.namespace, obj.metadata.name);
    const old = this.objects[resource].get(key);
    if (!old) throw new Error('NotFound');
    const rv = this.rv + 1;
    const stored = {
      ...obj,
      metadata: {
        ...obj.metadata,
        uid: old.metadata.uid,
        creationTimestamp: old.metadata.creationTimestamp,
        resourceVersion: String(rv),
      },
    } as KubeObject;
    this.commit(resource, key, stored, 'MODIFIED', rv);
    return stored;
  }

  /** The current resourceVersion (the newest change, or 1 for an empty store). */
  get resourceVersion(): number {
    return this.rv;
  }

  /** Objects of `resource`, sorted by namespace then name. */
  list(resource: Resource): KubeObject[] {
    return [...this.objects[resource].entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o);
  }

  /** One object, or undefined. */
  get(resource: Resource, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects[resource].get(objectKey(namespace, name));
  }

  /** Creates or replaces a pod (keeps its uid and creationTimestamp unless `p.uid` changes it). */
  upsertPod(p: PodSpecInput): KubeObject {
    this.ensureNamespace(p.namespace);
    const key = objectKey(p.namespace, p.name);
    const old = this.objects.pods.get(key);
    const uid = p.uid ?? old?.metadata.uid ?? newUid();
    const created = old && old.metadata.uid === uid ? old.metadata.creationTimestamp : nowTimestamp();
    const rv = this.rv + 1;
    const pod = buildPod(p, uid, String(rv), created);
    this.commit('pods', key, pod, old ? 'MODIFIED' : 'ADDED', rv);
    return pod;
  }

  /**
   * Creates a node if it does not exist (a no-op otherwise), or, given `containerRuntimeVersion`,
   * creates it or replaces its runtime version (MODIFIED, same uid, labels, annotations and spec kept).
   */
  upsertNode(name: string, containerRuntimeVersion?: string): void {
    const key = objectKey(undefined, name);
    const old = this.objects.nodes.get(key);
    if (old && containerRuntimeVersion === undefined) return;
    const rv = this.rv + 1;
    const node = buildNode(
      name,
      old?.metadata.uid ?? newUid(),
      String(rv),
      old?.metadata.creationTimestamp ?? nowTimestamp(),
      containerRuntimeVersion,
    );
    // a runtime version change keeps what was set on the node (labels, annotations, taints)
    if (old) {
      node.metadata = { ...node.metadata, labels: { ...old.metadata.labels } };
      if (old.metadata.annotations) node.metadata.annotations = { ...old.metadata.annotations };
      node.spec = old.spec;
    }
    this.commit('nodes', key, node, old ? 'MODIFIED' : 'ADDED', rv);
  }

  /** Deletes an object; returns false when it did not exist. */
  delete(resource: Resource, namespace: string | undefined, name: string): boolean {
    const key = objectKey(namespace, name);
    const old = this.objects[resource].get(key);
    if (!old) return false;
    const rv = this.rv + 1;
    const last = { ...old, metadata: { ...old.metadata, resourceVersion: String(rv) } };
    this.commit(resource, key, last, 'DELETED', rv);
    return true;
  }

  /**
   * Events of `resource` newer than `sinceRv`, or 'gone' when some of them were already
   * dropped from the bounded history (the API answers 410 Gone then).
   */
  eventsSince(resource: Resource, sinceRv: number): StoreEvent[] | 'gone' {
    if (sinceRv < this.compactedRv) return 'gone';
    return this.history.filter((e) => e.rv > sinceRv && e.resource === resource);
  }

  /** Drops the whole event history, as an etcd compaction does: resuming a watch from any older resourceVersion then gets 410 Gone. */
  compact(): void {
    this.history.length = 0;
    this.compactedRv = this.rv;
  }

  /** Subscribes to new events; returns the unsubscribe function. */
  subscribe(fn: StoreListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private commit(resource: Resource, key: string, obj: KubeObject, type: StoreEvent['type'], rv: number): void {
    const previous = type === 'MODIFIED' ? this.objects[resource].get(key) : undefined;
    this.rv = rv;
    if (type === 'DELETED') this.objects[resource].delete(key);
    else this.objects[resource].set(key, obj);
    const e: StoreEvent = { rv, resource, type, object: obj, ...(previous ? { previous } : {}) };
    this.history.push(e);
    while (this.history.length > this.historyLimit) this.compactedRv = this.history.shift()!.rv;
    for (const fn of this.listeners) fn(e);
  }
}
