/**
 * Which ENIConfig this node uses (custom networking, `AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG`),
 * decided from the node's labels and annotations and the ENIConfig objects
 * (`crd.k8s.amazonaws.com/v1alpha1`, cluster-scoped). Pure: facts in, an
 * {@link EniConfigSelection} out; the I/O edge that reads and watches them is ./source.ts.
 *
 * Precedence, as amazon-vpc-cni-k8s documents and implements it (its README
 * `ENI_CONFIG_ANNOTATION_DEF` / `ENI_CONFIG_LABEL_DEF`, pkg/eniconfig):
 * 1. the label `vpc.amazonaws.com/externalEniConfig` (an ENIConfig managed out of band);
 * 2. the annotation named by `ENI_CONFIG_ANNOTATION_DEF` (default `k8s.amazonaws.com/eniConfig`);
 * 3. the label named by `ENI_CONFIG_LABEL_DEF` (default `k8s.amazonaws.com/eniConfig`;
 *    `topology.kubernetes.io/zone` gives one ENIConfig per zone);
 * 4. otherwise the ENIConfig named `default`.
 *
 * The ENIConfig's `spec.subnet` (upstream's single subnet) and our list extension
 * `spec.subnets` give the subnets, deduplicated, `spec.subnet` first; `spec.securityGroups`
 * the security groups (none: the primary ENI's). Ids must look like EC2 ids (`subnet-`
 * and `sg-` followed by lower-case alphanumerics; EC2's own are 8 or 17 hex digits). Anything unreadable is `unknown`, never "use
 * the node's subnet".
 */
import type { EniConfigSelection } from '../controller/eni-lifecycle/placement-types.js';

/** The label that, when present, names the ENIConfig before anything else (upstream's out-of-band management). */
export const EXTERNAL_ENI_CONFIG_LABEL = 'vpc.amazonaws.com/externalEniConfig';
/** The ENIConfig used when the node names none. */
export const DEFAULT_ENI_CONFIG = 'default';
/** Most security groups one ENI may have (EC2 quota "security groups per network interface", at most 16). */
export const MAX_SECURITY_GROUPS = 16;

/** EC2 ids are the prefix and 8 or 17 hex digits; lower-case alphanumerics are accepted (EC2 itself refuses an unknown id). */
const SUBNET_ID = /^subnet-[0-9a-z]{1,32}$/;
const SG_ID = /^sg-[0-9a-z]{1,32}$/;

/** Which node keys name the ENIConfig (ENI_CONFIG_LABEL_DEF, ENI_CONFIG_ANNOTATION_DEF). */
export interface SelectionKeys {
  labelDef: string;
  annotationDef: string;
}

/** The node as last read: its labels and annotations, or why it cannot be read. */
export type NodeFacts =
  { labels: Readonly<Record<string, string>>; annotations: Readonly<Record<string, string>> } | { unreadable: string };

/** The ENIConfig objects as last listed (name → object as the API returned it), or why they cannot be read. */
export type EniConfigFacts = { byName: ReadonlyMap<string, unknown> } | { unreadable: string };

/** Which ENIConfig name the node selects, and what selected it (e.g. `label k8s.amazonaws.com/eniConfig=us-west-2a`). */
export function selectedName(
  keys: SelectionKeys,
  node: { labels: Readonly<Record<string, string>>; annotations: Readonly<Record<string, string>> },
): { name: string; selectedBy: string } {
  const ext = node.labels[EXTERNAL_ENI_CONFIG_LABEL];
  if (ext !== undefined) return { name: ext, selectedBy: `label ${EXTERNAL_ENI_CONFIG_LABEL}=${ext}` };
  const ann = node.annotations[keys.annotationDef];
  if (ann !== undefined) return { name: ann, selectedBy: `annotation ${keys.annotationDef}=${ann}` };
  const lab = node.labels[keys.labelDef];
  if (lab !== undefined) return { name: lab, selectedBy: `label ${keys.labelDef}=${lab}` };
  return {
    name: DEFAULT_ENI_CONFIG,
    selectedBy: `default (the node has no annotation ${keys.annotationDef} and no label ${keys.labelDef})`,
  };
}

/** The usable part of an ENIConfig, or why it is not usable. */
export type EniConfigSpecCheck =
  { ok: true; subnetIds: string[]; securityGroupIds: string[] } | { ok: false; reason: string };

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * Validates an ENIConfig object's `spec`: `subnet` (string) and/or `subnets` (list of
 * strings) naming at least one subnet, every id `subnet-<alphanumerics>`; `securityGroups`
 * (optional list) of `sg-<alphanumerics>`, at most {@link MAX_SECURITY_GROUPS}.
 * @returns the subnets (deduplicated, `spec.subnet` first) and security groups, or the
 *          first problem in operator words (naming the field and the value).
 */
export function checkEniConfigSpec(obj: unknown): EniConfigSpecCheck {
  const spec = isObj(obj) ? obj.spec : undefined;
  if (!isObj(spec)) return { ok: false, reason: 'it has no spec' };
  const subnets: string[] = [];
  if (spec.subnet !== undefined && spec.subnet !== '') {
    if (typeof spec.subnet !== 'string') return { ok: false, reason: 'spec.subnet is not a string' };
    subnets.push(spec.subnet);
  }
  if (spec.subnets !== undefined) {
    if (!Array.isArray(spec.subnets)) return { ok: false, reason: 'spec.subnets is not a list' };
    for (const s of spec.subnets) {
      if (typeof s !== 'string') return { ok: false, reason: `spec.subnets holds a non-string (${JSON.stringify(s)})` };
      subnets.push(s);
    }
  }
  if (subnets.length === 0) return { ok: false, reason: 'it names no subnet (spec.subnet or spec.subnets)' };
  const badSubnet = subnets.find((s) => !SUBNET_ID.test(s));
  if (badSubnet !== undefined)
    return {
      ok: false,
      reason: `subnet id ${JSON.stringify(badSubnet)} is malformed (expected subnet- and lower-case alphanumerics, e.g. subnet-0a1b2c3d4e5f67890)`,
    };
  const sgs: string[] = [];
  if (spec.securityGroups !== undefined && spec.securityGroups !== null) {
    if (!Array.isArray(spec.securityGroups)) return { ok: false, reason: 'spec.securityGroups is not a list' };
    for (const g of spec.securityGroups) {
      if (typeof g !== 'string' || !SG_ID.test(g))
        return {
          ok: false,
          reason: `security group id ${JSON.stringify(g)} is malformed (expected sg- and lower-case alphanumerics, e.g. sg-0a1b2c3d4e5f67890)`,
        };
      if (!sgs.includes(g)) sgs.push(g);
    }
  }
  if (sgs.length > MAX_SECURITY_GROUPS)
    return {
      ok: false,
      reason: `it lists ${sgs.length} security groups (an ENI takes at most ${MAX_SECURITY_GROUPS})`,
    };
  return { ok: true, subnetIds: [...new Set(subnets)], securityGroupIds: sgs };
}

/**
 * The node's ENIConfig selection (see the module docstring). `off` is never returned: the
 * caller answers `off` when custom networking is off.
 * - node unreadable → `unknown` (nothing known selects anything);
 * - ENIConfigs unreadable → `unknown`, naming the selected one;
 * - the selected name is empty or no such object → `missing`;
 * - the object fails {@link checkEniConfigSpec} → `invalid`;
 * - else `ok`.
 */
export function selectEniConfig(keys: SelectionKeys, node: NodeFacts, configs: EniConfigFacts): EniConfigSelection {
  if ('unreadable' in node)
    return {
      state: 'unknown',
      selectedBy: `the node's annotation ${keys.annotationDef} or label ${keys.labelDef}`,
      reason: `the node cannot be read: ${node.unreadable}`,
    };
  const { name, selectedBy } = selectedName(keys, node);
  if (name === '') return { state: 'missing', name, selectedBy, reason: `${selectedBy.split('=')[0]} is empty` };
  if ('unreadable' in configs)
    return { state: 'unknown', name, selectedBy, reason: `ENIConfigs cannot be read: ${configs.unreadable}` };
  const obj = configs.byName.get(name);
  if (obj === undefined)
    return { state: 'missing', name, selectedBy, reason: `ENIConfig "${name}" (${selectedBy}) does not exist` };
  const spec = checkEniConfigSpec(obj);
  if (!spec.ok)
    return {
      state: 'invalid',
      name,
      selectedBy,
      reason: `ENIConfig "${name}" (${selectedBy}) is invalid: ${spec.reason}`,
    };
  return { state: 'ok', name, selectedBy, subnetIds: spec.subnetIds, securityGroupIds: spec.securityGroupIds };
}

/**
 * Why no ENI may be created under `s`, naming the ENIConfig and what selected it, or
 * undefined when `s` allows creations (`ok` or `off`).
 */
export function selectionRefusal(s: EniConfigSelection): string | undefined {
  if (s.state === 'ok' || s.state === 'off') return undefined;
  const what = s.name !== undefined ? `ENIConfig "${s.name}" (${s.selectedBy})` : `the ENIConfig (${s.selectedBy})`;
  const lead =
    s.state === 'missing'
      ? `custom networking: ${what} is missing`
      : s.state === 'invalid'
        ? `custom networking: ${what} is invalid`
        : `custom networking: ${what} is not known yet`;
  return `${lead}: ${s.reason}; no ENI is created until it is fixed`;
}

/** Why the ENIConfig forbids creating ENIs, as the pool controller and the node condition classify it. */
export type EniConfigBlock = {
  kind: 'eniconfig_missing' | 'eniconfig_invalid' | 'eniconfig_unknown';
  reason: string;
};

/** {@link selectionRefusal} with its kind, or undefined when `s` allows creations. */
export function selectionBlock(s: EniConfigSelection): EniConfigBlock | undefined {
  const reason = selectionRefusal(s);
  if (reason === undefined || s.state === 'ok' || s.state === 'off') return undefined;
  return { kind: `eniconfig_${s.state}`, reason };
}
