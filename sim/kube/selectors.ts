/**
 * Field selectors for the stand-in (`fieldSelector=spec.nodeName=node-1,metadata.name!=x`):
 * comma-separated terms combined with AND, operators `=`, `==` and `!=`, as in
 * https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/.
 */
import type { KubeObject } from './objects.js';
import type { Resource } from './store.js';

const involved = (o: KubeObject, f: string): string =>
  String((o.involvedObject as Record<string, unknown> | undefined)?.[f] ?? '');

/** One parsed term. */
export interface FieldTerm {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** The fields each resource supports, with how to read them from a stored object. */
const FIELDS: Record<Resource, Record<string, (o: KubeObject) => string>> = {
  pods: {
    'metadata.name': (o) => o.metadata.name,
    'metadata.namespace': (o) => o.metadata.namespace ?? '',
    'spec.nodeName': (o) => String((o.spec as { nodeName?: string }).nodeName ?? ''),
    'spec.hostNetwork': (o) => String((o.spec as { hostNetwork?: boolean }).hostNetwork ?? false),
    'status.phase': (o) => String((o.status as { phase?: string }).phase ?? ''),
    'status.podIP': (o) => String((o.status as { podIP?: string }).podIP ?? ''),
  },
  nodes: {
    'metadata.name': (o) => o.metadata.name,
    'spec.unschedulable': () => 'false',
  },
  // The event fields kubectl describe and `kubectl events --for` select on (core/v1 Event field labels).
  events: {
    'metadata.name': (o) => o.metadata.name,
    'metadata.namespace': (o) => o.metadata.namespace ?? '',
    'involvedObject.kind': (o) => involved(o, 'kind'),
    'involvedObject.name': (o) => involved(o, 'name'),
    'involvedObject.namespace': (o) => involved(o, 'namespace'),
    'involvedObject.uid': (o) => involved(o, 'uid'),
    'involvedObject.apiVersion': (o) => involved(o, 'apiVersion'),
    'involvedObject.fieldPath': (o) => involved(o, 'fieldPath'),
    'involvedObject.resourceVersion': (o) => involved(o, 'resourceVersion'),
    reason: (o) => String(o.reason ?? ''),
    type: (o) => String(o.type ?? ''),
    source: (o) => String((o.source as { component?: string } | undefined)?.component ?? ''),
    reportingComponent: (o) => String(o.reportingComponent ?? ''),
  },
  namespaces: {
    'metadata.name': (o) => o.metadata.name,
    'status.phase': () => 'Active',
  },
  // custom resources support metadata.name (and metadata.namespace when namespaced)
  eniconfigs: {
    'metadata.name': (o) => o.metadata.name,
  },
  endpointslices: {
    'metadata.name': (o) => o.metadata.name,
    'metadata.namespace': (o) => o.metadata.namespace ?? '',
  },
};

/** Error for a selector the real API would also reject (HTTP 400). */
export class FieldSelectorError extends Error {}

/**
 * Parses `selector` (may be empty) for `resource`.
 * @throws FieldSelectorError for malformed terms or unsupported field labels.
 */
export function parseFieldSelector(resource: Resource, selector: string | null): FieldTerm[] {
  if (!selector) return [];
  return selector
    .split(',')
    .filter((s) => s.length > 0)
    .map((term) => {
      const m = /^([^!=]+)(!=|==|=)(.*)$/.exec(term);
      if (!m) throw new FieldSelectorError(`invalid field selector term "${term}"`);
      const field = m[1]!.trim();
      if (!FIELDS[resource][field]) throw new FieldSelectorError(`field label not supported: ${field}`);
      return { field, op: m[2] === '!=' ? '!=' : '=', value: m[3]!.trim() };
    });
}

/** True when `obj` satisfies every term. */
export function matchesFields(resource: Resource, terms: FieldTerm[], obj: KubeObject): boolean {
  return terms.every((t) => {
    const v = FIELDS[resource][t.field]!(obj);
    return t.op === '=' ? v === t.value : v !== t.value;
  });
}
