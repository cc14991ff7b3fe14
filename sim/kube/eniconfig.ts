/**
 * The `ENIConfig` custom resource as the stand-in serves it: group `crd.k8s.amazonaws.com`,
 * version `v1alpha1`, plural `eniconfigs`, cluster-scoped, kind `ENIConfig` — the CRD
 * amazon-vpc-cni-k8s installs (its chart's `customresourcedefinition.yaml`), with the schema
 * of this repository's chart (charts/eni-ipam/templates/eniconfig-crd.yaml): `spec.subnet`
 * (string), `spec.securityGroups` ([]string), and eni-ipam's extension `spec.subnets`
 * ([]string, several subnets for one ENIConfig); at least one of `subnet` / `subnets`.
 * Discovery documents follow the meta/v1 APIGroup and APIResourceList types.
 */
import type { KubeObject } from './objects.js';

/** API group of ENIConfig. */
export const ENICONFIG_GROUP = 'crd.k8s.amazonaws.com';
/** Served version. */
export const ENICONFIG_VERSION = 'v1alpha1';
/** `apiVersion` of ENIConfig objects. */
export const ENICONFIG_API_VERSION = `${ENICONFIG_GROUP}/${ENICONFIG_VERSION}`;

/** The spec fields (all optional on input; see {@link validateEniConfig}). */
export interface EniConfigSpec {
  subnet?: string;
  subnets?: string[];
  securityGroups?: string[];
}

/** `GET /apis/crd.k8s.amazonaws.com`: the group with its one version. */
export const ENICONFIG_API_GROUP = {
  kind: 'APIGroup',
  apiVersion: 'v1',
  name: ENICONFIG_GROUP,
  versions: [{ groupVersion: ENICONFIG_API_VERSION, version: ENICONFIG_VERSION }],
  preferredVersion: { groupVersion: ENICONFIG_API_VERSION, version: ENICONFIG_VERSION },
};

/** `GET /apis`: the named groups the stand-in serves. */
export const API_GROUP_LIST = {
  kind: 'APIGroupList',
  apiVersion: 'v1',
  groups: [
    {
      name: ENICONFIG_GROUP,
      versions: ENICONFIG_API_GROUP.versions,
      preferredVersion: ENICONFIG_API_GROUP.preferredVersion,
    },
  ],
};

/** `GET /apis/crd.k8s.amazonaws.com/v1alpha1`: the eniconfigs resource and its verbs. */
export const ENICONFIG_RESOURCES = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: ENICONFIG_API_VERSION,
  resources: [
    {
      name: 'eniconfigs',
      singularName: 'eniconfig',
      namespaced: false,
      kind: 'ENIConfig',
      verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
    },
  ],
};

const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/**
 * Checks an ENIConfig body against the CRD schema (module docstring). Returns the
 * 422 message naming the offending field, or undefined when valid.
 */
export function validateEniConfig(o: KubeObject): string | undefined {
  const name = o.metadata.name;
  const bad = (field: string, what: string) => `ENIConfig.${ENICONFIG_GROUP} "${name}" is invalid: ${field}: ${what}`;
  const spec = o.spec as Record<string, unknown> | undefined;
  if (spec === undefined || spec === null || typeof spec !== 'object' || Array.isArray(spec))
    return bad('spec', 'Required value: an object with subnet or subnets');
  if (spec.subnet !== undefined && typeof spec.subnet !== 'string')
    return bad('spec.subnet', `Invalid value: "${typeof spec.subnet}": spec.subnet in body must be of type string`);
  if (spec.subnets !== undefined && !isStringArray(spec.subnets))
    return bad('spec.subnets', 'Invalid value: spec.subnets in body must be an array of strings');
  if (spec.securityGroups !== undefined && !isStringArray(spec.securityGroups))
    return bad('spec.securityGroups', 'Invalid value: spec.securityGroups in body must be an array of strings');
  if (spec.subnet === undefined && spec.subnets === undefined)
    return bad('spec', 'Invalid value: one of spec.subnet or spec.subnets is required');
  return undefined;
}

/** A new ENIConfig object for the stand-in's helpers (metadata is completed by the store). */
export function buildEniConfig(name: string, spec: EniConfigSpec, labels?: Record<string, string>): KubeObject {
  return {
    apiVersion: ENICONFIG_API_VERSION,
    kind: 'ENIConfig',
    metadata: { name, uid: '', resourceVersion: '', creationTimestamp: '', ...(labels ? { labels } : {}) },
    spec: { ...spec },
  };
}
