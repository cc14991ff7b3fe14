/**
 * Field selectors for the stand-in (`fieldSelector=spec.nodeName=node-1,metadata.name!=x`):
 * comma-separated terms combined with AND, operators `=`, `==` and `!=`, as in
 * https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/.
 */
import type { KubeObject } from './objects.js';

/** One parsed term. */
export interface FieldTerm {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** The fields each resource supports, with how to read them from a stored object. */
const FIELDS: Record<'pods' | 'nodes', Record<string, (o: KubeObject) => string>> = {
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
};

/** Error for a selector the real API would also reject (HTTP 400). */
export class FieldSelectorError extends Error {}

/**
 * Parses `selector` (may be empty) for `resource`.
 * @throws FieldSelectorError for malformed terms or unsupported field labels.
 */
export function parseFieldSelector(resource: 'pods' | 'nodes', selector: string | null): FieldTerm[] {
  if (!selector) return [];
  return selector.split(',').filter((s) => s.length > 0).map((term) => {
    const m = /^([^!=]+)(!=|==|=)(.*)$/.exec(term);
    if (!m) throw new FieldSelectorError(`invalid field selector term "${term}"`);
    const field = m[1]!.trim();
    if (!FIELDS[resource][field]) throw new FieldSelectorError(`field label not supported: ${field}`);
    return { field, op: m[2] === '!=' ? '!=' : '=', value: m[3]!.trim() };
  });
}

/** True when `obj` satisfies every term. */
export function matchesFields(resource: 'pods' | 'nodes', terms: FieldTerm[], obj: KubeObject): boolean {
  return terms.every((t) => {
    const v = FIELDS[resource][t.field]!(obj);
    return t.op === '=' ? v === t.value : v !== t.value;
  });
}
