/**
 * Discovery documents of the stand-in, in the legacy (non-aggregated) JSON form that
 * kubectl and client libraries fall back to: `GET /version`, `/api`, `/apis`, `/api/v1`
 * (the crd.k8s.amazonaws.com group's documents are in eniconfig.ts).
 * Shapes follow https://kubernetes.io/docs/reference/using-api/api-concepts/ and the
 * meta/v1 APIVersions, APIGroupList and APIResourceList types.
 */

/** Kubernetes version the stand-in claims (`GET /version`). */
export const STANDIN_VERSION = {
  major: '1',
  minor: '30',
  gitVersion: 'v1.30.0-standin',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2024-01-01T00:00:00Z',
  goVersion: 'go1.22.0',
  compiler: 'gc',
  platform: 'linux/amd64',
};

/** `GET /api`: the core group's versions; `serverAddress` is host:port. */
export function apiVersions(serverAddress: string): Record<string, unknown> {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

/** `GET /apis`: the named groups (crd.k8s.amazonaws.com for ENIConfig; eniconfig.ts). */
export { API_GROUP_LIST } from './eniconfig.js';

const VERBS = ['get', 'list', 'watch'];

/** `GET /api/v1`: the resources served and their verbs (pods read-only; events, node status and taints writable). */
export const CORE_V1_RESOURCES = {
  kind: 'APIResourceList',
  groupVersion: 'v1',
  resources: [
    {
      name: 'events',
      singularName: 'event',
      namespaced: true,
      kind: 'Event',
      verbs: ['create', 'get', 'list', 'patch', 'watch'],
      shortNames: ['ev'],
    },
    {
      name: 'namespaces',
      singularName: 'namespace',
      namespaced: false,
      kind: 'Namespace',
      verbs: VERBS,
      shortNames: ['ns'],
    },
    {
      name: 'nodes',
      singularName: 'node',
      namespaced: false,
      kind: 'Node',
      verbs: [...VERBS, 'patch'],
      shortNames: ['no'],
    },
    { name: 'nodes/status', singularName: '', namespaced: false, kind: 'Node', verbs: ['get', 'patch'] },
    {
      name: 'pods',
      singularName: 'pod',
      namespaced: true,
      kind: 'Pod',
      verbs: VERBS,
      shortNames: ['po'],
      categories: ['all'],
    },
  ],
};
