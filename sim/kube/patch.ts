/**
 * PATCH bodies as the API server applies them, for the stand-in's resources:
 * - `application/merge-patch+json`: RFC 7386 JSON merge patch (objects merge, `null`
 *   deletes, arrays are replaced);
 * - `application/strategic-merge-patch+json`: the same, except the lists Kubernetes
 *   declares with a patch merge key merge item by item: `status.conditions` of a Node
 *   (key `type`), `status.addresses` (key `type`) — as kubectl and client libraries rely on
 *   to change one condition (https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/).
 *   `spec.taints` has no merge key: it is replaced whole, as the real API does.
 * - `application/json-patch+json` (RFC 6902) is refused with 415 by the caller.
 * A patch that carries `metadata.resourceVersion` is a precondition: it must equal the
 * stored one (else 409 Conflict), as optimistic concurrency requires.
 */

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const isObj = (v: unknown): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7386 merge of `patch` into `target` (returns a new value). */
export function mergePatch(target: unknown, patch: unknown): Json {
  if (!isObj(patch)) return patch as Json;
  const out: Record<string, Json> = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Lists merged by key under strategic merge patch: path → merge key. */
const MERGE_KEYS: Record<string, string> = { 'status.conditions': 'type', 'status.addresses': 'type' };

/** Strategic merge of `patch` into `target` (the subset described in the module docstring). */
export function strategicMergePatch(target: unknown, patch: unknown, path = ''): Json {
  if (!isObj(patch)) return patch as Json;
  const out: Record<string, Json> = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue; // directives ($patch, $retainKeys...) are not needed here
    const p = path ? `${path}.${k}` : k;
    const key = MERGE_KEYS[p];
    if (v === null) delete out[k];
    else if (key && Array.isArray(v)) out[k] = mergeList(Array.isArray(out[k]) ? (out[k] as Json[]) : [], v, key);
    else out[k] = strategicMergePatch(out[k], v, p);
  }
  return out;
}

function mergeList(current: Json[], patch: Json[], key: string): Json[] {
  const out = [...current];
  for (const item of patch) {
    if (!isObj(item)) continue;
    const i = out.findIndex((x) => isObj(x) && x[key] === item[key]);
    if (item.$patch === 'delete') {
      if (i >= 0) out.splice(i, 1);
    } else if (i >= 0) out[i] = mergePatch(out[i], item);
    else out.push(item);
  }
  return out;
}
