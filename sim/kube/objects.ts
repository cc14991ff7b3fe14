/**
 * JSON shapes of the core/v1 objects the Kubernetes API stand-in serves: Pod, Node,
 * their lists, and the meta/v1 Status used for errors. Field names and nesting follow
 * the Kubernetes API reference (https://kubernetes.io/docs/reference/kubernetes-api/),
 * trimmed to what pod IP bookkeeping needs.
 */
import { randomUUID } from 'node:crypto';

/** What a test says about a pod; everything else is filled in with defaults. */
export interface PodSpecInput {
  namespace: string;
  name: string;
  uid?: string;
  nodeName: string;
  podIP?: string;
  /** Pod phase: Pending, Running, Succeeded, Failed, Unknown (default Running). */
  phase?: string;
  hostNetwork?: boolean;
  /** Container runtime ID of the pod's container, without the `containerd://` scheme. */
  containerID?: string;
}

/** A stored object: plain JSON with `metadata`. */
export type KubeObject = Record<string, unknown> & { metadata: ObjectMeta };

/** meta/v1 ObjectMeta as served (subset). */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  creationTimestamp: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Spec generation (custom resources: 1 on create, +1 per spec change). */
  generation?: number;
}

/** Builds a core/v1 Pod from `p`, stamped with `resourceVersion` and `created` (ISO 8601, seconds). */
export function buildPod(p: PodSpecInput, uid: string, resourceVersion: string, created: string): KubeObject {
  const phase = p.phase ?? 'Running';
  const status: Record<string, unknown> = { phase };
  if (p.podIP) {
    status.podIP = p.podIP;
    status.podIPs = [{ ip: p.podIP }];
  }
  if (p.containerID) {
    status.containerStatuses = [
      {
        name: 'app',
        containerID: `containerd://${p.containerID}`,
        image: 'registry.k8s.io/pause:3.9',
        imageID: '',
        ready: phase === 'Running',
        restartCount: 0,
        started: phase === 'Running',
        state: phase === 'Running' ? { running: { startedAt: created } } : { waiting: { reason: 'ContainerCreating' } },
      },
    ];
  }
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name: p.name, namespace: p.namespace, uid, resourceVersion, creationTimestamp: created, labels: {} },
    spec: {
      nodeName: p.nodeName,
      hostNetwork: p.hostNetwork ?? false,
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.9' }],
    },
    status,
  };
}

/**
 * Builds a core/v1 Node named `name` with a Ready=True condition. `containerRuntimeVersion`
 * is `status.nodeInfo.containerRuntimeVersion` as kubelet reports it: `<CRI runtime_name>://<runtime_version>`
 * (default `containerd://1.6`).
 */
export function buildNode(
  name: string,
  uid: string,
  resourceVersion: string,
  created: string,
  containerRuntimeVersion = 'containerd://1.6',
): KubeObject {
  return {
    kind: 'Node',
    apiVersion: 'v1',
    metadata: { name, uid, resourceVersion, creationTimestamp: created, labels: { 'kubernetes.io/hostname': name } },
    spec: {},
    status: {
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'KubeletReady',
          message: 'kubelet is posting ready status',
          lastHeartbeatTime: created,
          lastTransitionTime: created,
        },
      ],
      addresses: [{ type: 'Hostname', address: name }],
      capacity: { cpu: '2', memory: '8Gi', pods: '110', 'ephemeral-storage': '20Gi' },
      allocatable: { cpu: '2', memory: '8Gi', pods: '110', 'ephemeral-storage': '20Gi' },
      nodeInfo: {
        kubeletVersion: 'v1.30.0-standin',
        containerRuntimeVersion,
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
    },
  };
}

/** A core/v1 Namespace, phase Active. */
export function buildNamespace(name: string, uid: string, resourceVersion: string, created: string): KubeObject {
  return {
    kind: 'Namespace',
    apiVersion: 'v1',
    metadata: {
      name,
      uid,
      resourceVersion,
      creationTimestamp: created,
      labels: { 'kubernetes.io/metadata.name': name },
    },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  };
}

/** Kind of each resource's objects. */
export const KIND_OF = {
  pods: 'Pod',
  nodes: 'Node',
  events: 'Event',
  namespaces: 'Namespace',
  eniconfigs: 'ENIConfig',
  endpointslices: 'EndpointSlice',
} as const;

/** `apiVersion` of each resource's objects (core/v1 unless a custom resource). */
export const API_VERSION_OF = {
  pods: 'v1',
  nodes: 'v1',
  events: 'v1',
  namespaces: 'v1',
  eniconfigs: 'crd.k8s.amazonaws.com/v1alpha1',
  endpointslices: 'discovery.k8s.io/v1',
} as const;

/** A list object (`PodList`, `ENIConfigList`) of `apiVersion` (default `v1`) at `resourceVersion`. */
export function buildList(
  kind: string,
  items: KubeObject[],
  resourceVersion: string,
  apiVersion = 'v1',
): Record<string, unknown> {
  return { kind, apiVersion, metadata: { resourceVersion }, items };
}

/** meta/v1 Status for an error (`reason` as in the API: NotFound, Expired, BadRequest...). */
export function buildStatus(
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

/** A fresh object UID (RFC 4122 v4, as the API server assigns). */
export function newUid(): string {
  return randomUUID();
}

/** RFC 3339 timestamp with second precision, like `metadata.creationTimestamp`. */
export function nowTimestamp(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}
