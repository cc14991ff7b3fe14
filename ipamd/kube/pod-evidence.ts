/**
 * The pod fields ipamd's restore logic needs, taken from a core/v1 Pod
 * (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/).
 */
import type { V1Pod } from './client.js';

/** A pod bound to this node as the Kubernetes API sees it. */
export interface KubePod {
  namespace: string;
  name: string;
  /** metadata.uid */
  uid: string;
  /** status.podIP (absent until the sandbox has an address) */
  podIP?: string;
  /** spec.hostNetwork: such pods use the node's IP, never one from the pool. */
  hostNetwork: boolean;
  /** status.phase: Pending, Running, Succeeded, Failed, Unknown */
  phase?: string;
}

/** Key of a pod in caches: `namespace/name`. */
export function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Converts a V1Pod; undefined when it lacks a name or namespace. */
export function toKubePod(p: V1Pod): KubePod | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace) return undefined;
  const out: KubePod = {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    hostNetwork: p.spec?.hostNetwork === true,
  };
  if (p.status?.podIP) out.podIP = p.status.podIP;
  if (p.status?.phase) out.phase = p.status.phase;
  return out;
}
