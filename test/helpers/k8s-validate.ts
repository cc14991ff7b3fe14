/**
 * Offline validation of rendered Kubernetes objects against the Kubernetes OpenAPI,
 * in two passes, both from npm packages generated from the Kubernetes OpenAPI spec:
 *
 * 1. kubernetes-models (and @kubernetes-models/prometheus-operator for PodMonitor /
 *    ServiceMonitor): the OpenAPI schema compiled to ajv validators: types, required
 *    fields, formats (int32, int-or-string...), enums. These schemas allow unknown
 *    fields, as the OpenAPI document does.
 * 2. Unknown fields refused (what `kubectl --validate=strict` and kubeconform -strict
 *    do): every object is walked against @kubernetes/client-node's typed models
 *    (each model's `attributeTypeMap`, generated from the same OpenAPI): a key that is
 *    not a field of its model is an error naming its path. Applies to built-in kinds;
 *    the Prometheus Operator kinds get pass 1 only (client-node has no models for CRDs).
 *
 * `validateObject(obj)` resolves to the list of errors (empty when valid), each
 * `<kind>/<name> <path>: <message>`.
 */
import * as k8s from '@kubernetes/client-node';

type Model = { attributeTypeMap: { name: string; baseName: string; type: string }[] };
const models = k8s as unknown as Record<string, Model | undefined>;

/** kubernetes-models module of an apiVersion/kind, e.g. apps/v1 DaemonSet → kubernetes-models/apps/v1/DaemonSet. */
function modelsModule(apiVersion: string, kind: string): string {
  if (apiVersion.startsWith('monitoring.coreos.com/'))
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/** client-node class name of an apiVersion/kind: apps/v1 DaemonSet → V1DaemonSet. */
function clientNodeModel(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop()!;
  return `${version[0]!.toUpperCase()}${version.slice(1)}${kind}`;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Walks `value` against client-node type `type`, pushing errors for unknown fields and wrong JSON types. */
function walk(value: unknown, type: string, at: string, errors: string[]): void {
  if (value === null || value === undefined || type === 'any') return;
  const arr = /^Array<(.+)>$/.exec(type);
  if (arr) {
    if (!Array.isArray(value)) {
      errors.push(`${at}: expected an array (${type}), got ${typeof value}`);
      return;
    }
    value.forEach((v, i) => walk(v, arr[1]!, `${at}[${i}]`, errors));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (!isPlainObject(value)) {
      errors.push(`${at}: expected a map, got ${Array.isArray(value) ? 'array' : typeof value}`);
      return;
    }
    for (const [k, v] of Object.entries(value)) walk(v, map[1]!, `${at}.${k}`, errors);
    return;
  }
  const primitive: Record<string, (v: unknown) => boolean> = {
    string: (v) => typeof v === 'string',
    Date: (v) => typeof v === 'string',
    number: (v) => typeof v === 'number',
    boolean: (v) => typeof v === 'boolean',
    IntOrString: (v) => typeof v === 'string' || typeof v === 'number',
  };
  if (primitive[type]) {
    if (!primitive[type]!(value)) errors.push(`${at}: expected ${type}, got ${typeof value}`);
    return;
  }
  const model = models[type];
  if (!model?.attributeTypeMap) {
    if (typeof value !== 'string') errors.push(`${at}: expected ${type} (a string), got ${typeof value}`);
    return;
  }
  if (!isPlainObject(value)) {
    errors.push(`${at}: expected an object (${type}), got ${Array.isArray(value) ? 'array' : typeof value}`);
    return;
  }
  const fields = new Map(model.attributeTypeMap.map((a) => [a.baseName, a.type]));
  for (const [k, v] of Object.entries(value)) {
    const t = fields.get(k);
    if (t === undefined) errors.push(`${at}.${k}: unknown field (not in ${type})`);
    else walk(v, t, `${at}.${k}`, errors);
  }
}

/**
 * Validates one rendered object (parsed YAML). @returns the errors, empty when valid.
 * An apiVersion/kind neither package knows is itself an error.
 */
export async function validateObject(obj: Record<string, unknown>): Promise<string[]> {
  const apiVersion = String(obj.apiVersion ?? '');
  const kind = String(obj.kind ?? '');
  const name = `${kind}/${String((obj.metadata as { name?: unknown } | undefined)?.name ?? '?')}`;
  const errors: string[] = [];
  let Ctor: new (o: unknown) => { validate(): void };
  try {
    const mod = (await import(modelsModule(apiVersion, kind))) as Record<
      string,
      new (o: unknown) => { validate(): void }
    >;
    Ctor = mod[kind]!;
    if (!Ctor) throw new Error('no class');
  } catch {
    return [`${name}: no schema for apiVersion ${apiVersion} kind ${kind}`];
  }
  try {
    new Ctor(obj).validate();
  } catch (e) {
    errors.push(`${name} ${(e as Error).message}`);
  }
  if (!apiVersion.startsWith('monitoring.coreos.com/')) {
    const type = clientNodeModel(apiVersion, kind);
    if (!models[type]?.attributeTypeMap) return [...errors, `${name}: no typed model ${type}`];
    const walkErrors: string[] = [];
    walk(obj, type, '', walkErrors);
    errors.push(...walkErrors.map((e) => `${name} ${e.replace(/^\./, '')}`));
  }
  return errors;
}
