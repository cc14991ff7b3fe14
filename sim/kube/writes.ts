/**
 * The stand-in's writes: POST (create) of Events and ENIConfigs, PATCH of Events, of a
 * Node (taints, labels, annotations...), of a Node's status subresource and of an
 * ENIConfig (merge patch only: the API server refuses strategic merge patch on custom
 * resources), PUT (update) and DELETE of an ENIConfig. ENIConfig bodies are checked
 * against the CRD schema (eniconfig.ts, 422 Invalid otherwise). Content types and
 * semantics follow https://kubernetes.io/docs/reference/using-api/api-concepts/ and
 * patch.ts. Anything else is answered 405.
 */
import { validateEniConfig } from './eniconfig.js';
import { API_VERSION_OF, KIND_OF, type KubeObject } from './objects.js';
import { mergePatch, strategicMergePatch } from './patch.js';
import type { KubeStore, Resource } from './store.js';

/** The outcome: an object to answer with `code`, or an error Status's code/reason/message. */
export type WriteResult = { code: number; object: KubeObject } | { code: number; reason: string; message: string };

/** What a write targets. */
export interface WriteTarget {
  resource: Resource;
  namespace?: string;
  name?: string;
  subresource?: 'status';
}

/** Resources that accept POST (create). */
const CREATABLE: ReadonlySet<Resource> = new Set(['events', 'eniconfigs', 'endpointslices']);

/** Resources that accept PATCH. */
const PATCHABLE: ReadonlySet<Resource> = new Set(['events', 'nodes', 'eniconfigs']);

/** Resources that accept PUT (update) and DELETE. */
const REPLACEABLE: ReadonlySet<Resource> = new Set(['eniconfigs', 'endpointslices']);

/** Schema check of a custom resource body (undefined = valid or not a custom resource). */
function invalid(resource: Resource, o: KubeObject): WriteResult | undefined {
  const msg = resource === 'eniconfigs' ? validateEniConfig(o) : undefined;
  return msg ? { code: 422, reason: 'Invalid', message: msg } : undefined;
}

/**
 * Sets `metadata.generation` of a custom resource as the API server does: 1 on create,
 * +1 when `spec` changes, unchanged otherwise (metadata-only writes). Other kinds: untouched.
 */
function withGeneration(resource: Resource, old: KubeObject | undefined, next: KubeObject): KubeObject {
  if (resource !== 'eniconfigs') return next;
  const before = old?.metadata.generation ?? 0;
  const changed = !old || JSON.stringify(old.spec) !== JSON.stringify(next.spec);
  return { ...next, metadata: { ...next.metadata, generation: changed ? before + 1 : before } };
}

function conflict(t: WriteTarget): WriteResult {
  return {
    code: 409,
    reason: 'Conflict',
    message: `Operation cannot be fulfilled on ${t.resource} "${t.name}": the object has been modified; please apply your changes to the latest version and try again`,
  };
}

/** Creates an object from `body` (parsed JSON) in the target collection. */
export function applyCreate(store: KubeStore, t: WriteTarget, body: unknown): WriteResult {
  if (!CREATABLE.has(t.resource) || t.name !== undefined)
    return { code: 405, reason: 'MethodNotAllowed', message: `create is not supported on ${t.resource}` };
  const o = body as Partial<KubeObject> | null;
  const meta = o?.metadata;
  if (!o || typeof o !== 'object' || !meta || typeof meta.name !== 'string' || meta.name === '') {
    return {
      code: 422,
      reason: 'Invalid',
      message: `${KIND_OF[t.resource]} is invalid: metadata.name: Required value`,
    };
  }
  if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== t.namespace) {
    return {
      code: 400,
      reason: 'BadRequest',
      message: `the namespace of the provided object (${meta.namespace}) does not match the namespace sent on the request (${t.namespace})`,
    };
  }
  const { namespace: _ns, ...clusterMeta } = meta;
  const obj = {
    ...o,
    kind: KIND_OF[t.resource],
    apiVersion: API_VERSION_OF[t.resource],
    metadata: t.namespace !== undefined ? { ...meta, namespace: t.namespace } : clusterMeta,
  } as KubeObject;
  const bad = invalid(t.resource, obj);
  if (bad) return bad;
  try {
    const created = store.create(t.resource, withGeneration(t.resource, undefined, obj));
    return { code: 201, object: created };
  } catch {
    return { code: 409, reason: 'AlreadyExists', message: `${t.resource} "${meta.name}" already exists` };
  }
}

/**
 * Patches an existing object. `contentType`: merge-patch or strategic-merge-patch JSON;
 * the status subresource changes only `status`, the main resource everything but `status`.
 */
export function applyPatch(store: KubeStore, t: WriteTarget, contentType: string, body: unknown): WriteResult {
  if (t.name === undefined || !PATCHABLE.has(t.resource))
    return { code: 405, reason: 'MethodNotAllowed', message: `patch is not supported on ${t.resource}` };
  const type = contentType.split(';')[0]!.trim();
  const custom = t.resource === 'eniconfigs';
  const merge =
    type === 'application/merge-patch+json'
      ? mergePatch
      : type === 'application/strategic-merge-patch+json' && !custom
        ? strategicMergePatch
        : undefined;
  if (!merge)
    return {
      code: 415,
      reason: 'UnsupportedMediaType',
      message: `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json${custom ? '' : ', application/strategic-merge-patch+json'} (got "${type}")`,
    };
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return { code: 400, reason: 'BadRequest', message: 'the patch must be a JSON object' };
  const old = store.get(t.resource, t.namespace, t.name);
  if (!old) return { code: 404, reason: 'NotFound', message: `${t.resource} "${t.name}" not found` };
  const p = body as { metadata?: { resourceVersion?: string }; status?: unknown };
  const wantRv = p.metadata?.resourceVersion;
  if (wantRv !== undefined && wantRv !== old.metadata.resourceVersion) return conflict(t);
  const merged = merge(old, body) as KubeObject;
  // The status subresource takes only status; the main resource ignores status (as the API does for nodes).
  const next =
    t.subresource === 'status'
      ? { ...old, status: merged.status }
      : t.resource === 'nodes'
        ? { ...merged, status: old.status }
        : merged;
  next.metadata = {
    ...next.metadata,
    name: old.metadata.name,
    ...(old.metadata.namespace ? { namespace: old.metadata.namespace } : {}),
  };
  const bad = invalid(t.resource, next as KubeObject);
  if (bad) return bad;
  return { code: 200, object: store.replace(t.resource, withGeneration(t.resource, old, next as KubeObject)) };
}

/**
 * PUT: replaces an existing object with `body` (its `metadata.resourceVersion`, when
 * given, must equal the stored one: else 409 Conflict; the name must match the path).
 */
export function applyUpdate(store: KubeStore, t: WriteTarget, body: unknown): WriteResult {
  if (t.name === undefined || !REPLACEABLE.has(t.resource))
    return { code: 405, reason: 'MethodNotAllowed', message: `update is not supported on ${t.resource}` };
  const o = body as Partial<KubeObject> | null;
  if (!o || typeof o !== 'object' || Array.isArray(o) || !o.metadata || typeof o.metadata !== 'object')
    return { code: 400, reason: 'BadRequest', message: 'the body must be an object with metadata' };
  if (o.metadata.name !== t.name)
    return {
      code: 400,
      reason: 'BadRequest',
      message: `the name of the object (${String(o.metadata.name)}) does not match the name on the URL (${t.name})`,
    };
  const old = store.get(t.resource, t.namespace, t.name);
  if (!old) return { code: 404, reason: 'NotFound', message: `${t.resource} "${t.name}" not found` };
  const wantRv = o.metadata.resourceVersion;
  if (wantRv !== undefined && wantRv !== '' && wantRv !== old.metadata.resourceVersion) return conflict(t);
  const { namespace: _ns, ...meta } = o.metadata;
  const next = {
    ...o,
    kind: KIND_OF[t.resource],
    apiVersion: API_VERSION_OF[t.resource],
    // A namespaced object (an EndpointSlice) keeps the namespace of its URL.
    metadata: t.namespace !== undefined ? { ...meta, namespace: t.namespace } : meta,
  } as KubeObject;
  const bad = invalid(t.resource, next);
  if (bad) return bad;
  return { code: 200, object: store.replace(t.resource, withGeneration(t.resource, old, next)) };
}

/** DELETE: removes an object and answers with its last state (a custom resource without finalizers). */
export function applyDelete(store: KubeStore, t: WriteTarget): WriteResult {
  if (t.name === undefined || !REPLACEABLE.has(t.resource))
    return { code: 405, reason: 'MethodNotAllowed', message: `delete is not supported on ${t.resource}` };
  const old = store.get(t.resource, t.namespace, t.name);
  if (!old || !store.delete(t.resource, t.namespace, t.name))
    return { code: 404, reason: 'NotFound', message: `${t.resource} "${t.name}" not found` };
  return { code: 200, object: old };
}
