/**
 * Resource paths of the stand-in
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-uris):
 * core `/api/v1[/watch]/<resource>[/<name>]`, `/api/v1[/watch]/namespaces/<ns>/<resource>[/<name>]`,
 * `/api/v1/nodes/<name>/status`, and the ENIConfig custom resource
 * `/apis/crd.k8s.amazonaws.com/v1alpha1[/watch]/eniconfigs[/<name>]` (cluster-scoped), and
 * EndpointSlices `/apis/discovery.k8s.io/v1[/watch][/namespaces/<ns>]/endpointslices[/<name>]`
 * (what the cooldown evidence lists and watches, cluster-wide).
 */
import { ENICONFIG_GROUP, ENICONFIG_VERSION } from './eniconfig.js';
import { NAMESPACED, type Resource } from './store.js';

/** A parsed resource path. */
export interface Route {
  resource: Resource;
  namespace?: string;
  name?: string;
  watch: boolean;
  subresource?: 'status';
}

const CORE = new Set<string>(['pods', 'nodes', 'events', 'namespaces']);
const CUSTOM = new Set<string>(['eniconfigs']);
const DISCOVERY = new Set<string>(['endpointslices']);

/** Parses a request path into a Route, or undefined for unknown paths. */
export function parseRoute(pathname: string): Route | undefined {
  const parts = pathname
    .split('/')
    .filter((s) => s.length > 0)
    .map(decodeURIComponent);
  let known: Set<string>;
  let rest: string[];
  if (parts[0] === 'api' && parts[1] === 'v1') {
    known = CORE;
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts[1] === ENICONFIG_GROUP && parts[2] === ENICONFIG_VERSION) {
    known = CUSTOM;
    rest = parts.slice(3);
  } else if (parts[0] === 'apis' && parts[1] === 'discovery.k8s.io' && parts[2] === 'v1') {
    known = DISCOVERY;
    rest = parts.slice(3);
  } else return undefined;
  const isResource = (s: string | undefined): s is Resource => s !== undefined && known.has(s);
  const watch = rest[0] === 'watch';
  if (watch) rest = rest.slice(1);
  const [a, b, c, d] = rest;
  if (rest.length === 1 && isResource(a)) return { resource: a, watch };
  if (rest.length === 2 && isResource(a) && !NAMESPACED.has(a)) return { resource: a, name: b, watch };
  if (rest.length === 3 && a === 'nodes' && c === 'status' && !watch && known === CORE)
    return { resource: 'nodes', name: b, watch, subresource: 'status' };
  if (a === 'namespaces' && (rest.length === 3 || rest.length === 4) && isResource(c) && NAMESPACED.has(c))
    return { resource: c, namespace: b, name: d, watch };
  return undefined;
}
