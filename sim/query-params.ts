/**
 * Reading EC2 Query API parameters (AWS EC2 API Reference, "Query requests"): flat form
 * fields where lists are numbered from 1 (`NetworkInterfaceId.1`, `Filter.1.Name`,
 * `Filter.1.Value.1`, `Tag.1.Key`). Every reader throws an EC2-style error on bad input.
 */
import { Ec2ApiError, invalidParameter, missingParameter } from './ec2-errors.js';

/** Raw form parameters of one request. */
export type QueryParams = Record<string, string>;

/** Parses an `application/x-www-form-urlencoded` body. Later duplicates win. */
export function parseForm(body: string): QueryParams {
  const out: QueryParams = {};
  for (const [k, v] of new URLSearchParams(body)) out[k] = v;
  return out;
}

/** An optional string parameter. */
export function optString(p: QueryParams, name: string): string | undefined {
  return p[name];
}

/** A required, non-empty string parameter. @throws Ec2ApiError MissingParameter */
export function reqString(p: QueryParams, name: string): string {
  const v = p[name];
  if (v === undefined || v === '') throw missingParameter(name);
  return v;
}

/** An optional integer in [min, max]. @throws Ec2ApiError InvalidParameterValue */
export function optInt(p: QueryParams, name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = p[name];
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v)) throw invalidParameter(`Invalid value '${v}' for ${name}: must be an integer`);
  const n = Number(v);
  if (n < min || n > max) throw invalidParameter(`Invalid value '${v}' for ${name}: must be between ${min} and ${max}`);
  return n;
}

/** A required integer in [min, max]. @throws Ec2ApiError MissingParameter / InvalidParameterValue */
export function reqInt(p: QueryParams, name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const n = optInt(p, name, min, max);
  if (n === undefined) throw missingParameter(name);
  return n;
}

/** An optional boolean (`true`/`false`). @throws Ec2ApiError InvalidParameterValue */
export function optBool(p: QueryParams, name: string): boolean | undefined {
  const v = p[name];
  if (v === undefined) return undefined;
  if (v !== 'true' && v !== 'false') throw invalidParameter(`Invalid value '${v}' for ${name}: must be true or false`);
  return v === 'true';
}

/** Indices N present as `<prefix>.N...`, ascending. */
function indices(p: QueryParams, prefix: string): number[] {
  const re = new RegExp(`^${prefix.replace(/\./g, '\\.')}\\.(\\d+)(?:\\.|$)`);
  const set = new Set<number>();
  for (const k of Object.keys(p)) {
    const m = re.exec(k);
    if (m) set.add(Number(m[1]));
  }
  return [...set].sort((a, b) => a - b);
}

/** A numbered list `<prefix>.1`, `<prefix>.2`, … in index order. */
export function list(p: QueryParams, prefix: string): string[] {
  return indices(p, prefix)
    .map((i) => p[`${prefix}.${i}`])
    .filter((v): v is string => v !== undefined);
}

/** One EC2 filter. */
export interface Filter {
  name: string;
  values: string[];
}

/** `Filter.N.Name` + `Filter.N.Value.M`. @throws Ec2ApiError InvalidParameterValue when a filter has no name. */
export function filters(p: QueryParams): Filter[] {
  return indices(p, 'Filter').map((i) => {
    const name = p[`Filter.${i}.Name`];
    if (!name) throw invalidParameter(`Filter.${i}.Name is required`);
    return { name, values: list(p, `Filter.${i}.Value`) };
  });
}

/** `<prefix>.N.Key` / `<prefix>.N.Value` pairs. @throws Ec2ApiError InvalidParameterValue on a missing key. */
export function tags(p: QueryParams, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const i of indices(p, prefix)) {
    const key = p[`${prefix}.${i}.Key`];
    if (!key) throw invalidParameter(`${prefix}.${i}.Key is required`);
    if (key.startsWith('aws:')) throw invalidParameter(`Tag keys starting with 'aws:' are reserved for internal use`);
    out[key] = p[`${prefix}.${i}.Value`] ?? '';
  }
  return out;
}

/** Tags from `TagSpecification.N` entries whose ResourceType is `resourceType`. @throws Ec2ApiError InvalidParameterValue */
export function tagSpecifications(p: QueryParams, resourceType: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const i of indices(p, 'TagSpecification')) {
    const rt = p[`TagSpecification.${i}.ResourceType`];
    if (!rt) throw missingParameter(`TagSpecification.${i}.ResourceType`);
    if (rt !== resourceType)
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `'${rt}' is not a valid taggable resource type for this operation.`,
      );
    Object.assign(out, tags(p, `TagSpecification.${i}.Tag`));
  }
  return out;
}
