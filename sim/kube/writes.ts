/**
 * The stand-in's writes: POST (create) of Events, PATCH of Events, of a Node (taints,
 * labels...) and of a Node's status subresource. Content types and semantics follow
 * https://kubernetes.io/docs/reference/using-api/api-concepts/ and patch.ts. Anything
 * else is answered 405 by the caller.
 */
import { KIND_OF, type KubeObject } from './objects.js';
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
const CREATABLE: ReadonlySet<Resource> = new Set(['events']);

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
  if (meta.namespace !== undefined && meta.namespace !== t.namespace) {
    return {
      code: 400,
      reason: 'BadRequest',
      message: `the namespace of the provided object (${meta.namespace}) does not match the namespace sent on the request (${t.namespace})`,
    };
  }
  try {
    const created = store.create(t.resource, {
      ...o,
      kind: KIND_OF[t.resource],
      apiVersion: 'v1',
      metadata: { ...meta, namespace: t.namespace },
    } as KubeObject);
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
  if (t.name === undefined || !(t.resource === 'events' || t.resource === 'nodes'))
    return { code: 405, reason: 'MethodNotAllowed', message: `patch is not supported on ${t.resource}` };
  const type = contentType.split(';')[0]!.trim();
  const merge =
    type === 'application/merge-patch+json'
      ? mergePatch
      : type === 'application/strategic-merge-patch+json'
        ? strategicMergePatch
        : undefined;
  if (!merge)
    return {
      code: 415,
      reason: 'UnsupportedMediaType',
      message: `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json (got "${type}")`,
    };
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return { code: 400, reason: 'BadRequest', message: 'the patch must be a JSON object' };
  const old = store.get(t.resource, t.namespace, t.name);
  if (!old) return { code: 404, reason: 'NotFound', message: `${t.resource} "${t.name}" not found` };
  const p = body as { metadata?: { resourceVersion?: string }; status?: unknown };
  const wantRv = p.metadata?.resourceVersion;
  if (wantRv !== undefined && wantRv !== old.metadata.resourceVersion) {
    return {
      code: 409,
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on ${t.resource} "${t.name}": the object has been modified; please apply your changes to the latest version and try again`,
    };
  }
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
  return { code: 200, object: store.replace(t.resource, next as KubeObject) };
}
