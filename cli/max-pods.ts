/**
 * Max pods per node, amazon-vpc-cni-k8s's formula (its misc/eni-max-pods.txt and
 * max-pods calculator; AWS EKS docs "Amazon EKS recommended maximum Pods for each
 * Amazon EC2 instance type"), over our instance limits table (ipamd/cloud/instance-types.ts,
 * DescribeInstanceTypes figures):
 *
 *   ENIs × (IPv4 addresses per ENI − 1) + 2
 *
 * (each ENI's primary IP is not for pods; +2 for the host-network pods aws-node and
 * kube-proxy). With prefix delegation each slot holds a /28, so × 16. With custom
 * networking (ENIConfig) the primary ENI serves no pod: one ENI fewer. An optional cap
 * (kubelet's 110, say) is applied last. Pure.
 */
import { closest } from 'fastest-levenshtein';
import { INSTANCE_TYPES, instanceTypeInfo } from '../ipamd/cloud/instance-types.js';
import { CliError, EXIT } from './errors.js';

/** Inputs of {@link maxPods}. */
export interface MaxPodsInput {
  instanceType: string;
  prefixDelegation?: boolean;
  customNetworking?: boolean;
  /** Upper bound applied last (e.g. 110, or the flag's text `"110"`); undefined = none. */
  cap?: number | string;
}

/** The answer and how it was reached. */
export interface MaxPodsResult {
  instanceType: string;
  maxEnis: number;
  ipv4PerEni: number;
  /** ENIs that serve pods (one fewer with custom networking). */
  podEnis: number;
  /** Addresses per slot: 1, or 16 with prefix delegation. */
  perSlot: number;
  /** Before the cap. */
  formula: number;
  maxPods: number;
  /** The arithmetic, e.g. `3 × (10 − 1) + 2 = 29`. */
  explain: string;
}

/**
 * Computes max pods for an instance type.
 * @throws CliError (usage, 2) for a type not in the table, naming the closest known one;
 *         or a cap that is not a whole number ≥ 1.
 */
export function maxPods(i: MaxPodsInput): MaxPodsResult {
  const info = instanceTypeInfo(i.instanceType);
  if (!info) {
    const near = closest(i.instanceType, [...INSTANCE_TYPES.keys()]);
    throw new CliError(
      `unknown instance type "${i.instanceType}": the closest known one is ${near} (${INSTANCE_TYPES.size} types known)`,
      EXIT.usage,
    );
  }
  const cap = i.cap === undefined ? undefined : /^[0-9]+$/.test(String(i.cap)) ? Number(i.cap) : NaN;
  if (cap !== undefined && !(cap >= 1))
    throw new CliError(`--max-pods-cap "${i.cap}" is invalid: expected a whole number >= 1`, EXIT.usage);
  const podEnis = Math.max(info.maxEnis - (i.customNetworking ? 1 : 0), 0);
  const perSlot = i.prefixDelegation ? 16 : 1;
  const formula = podEnis * (info.ipv4PerEni - 1) * perSlot + 2;
  const maxPods = cap !== undefined ? Math.min(formula, cap) : formula;
  const explain = `${podEnis} × (${info.ipv4PerEni} − 1)${perSlot > 1 ? ' × 16' : ''} + 2 = ${formula}${maxPods < formula ? `, capped at ${maxPods}` : ''}`;
  return {
    instanceType: info.instanceType,
    maxEnis: info.maxEnis,
    ipv4PerEni: info.ipv4PerEni,
    podEnis,
    perSlot,
    formula,
    maxPods,
    explain,
  };
}
