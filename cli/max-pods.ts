/**
 * Max pods per node as EKS computes it (amazon-vpc-cni-k8s's misc/eni-max-pods.txt and the
 * EKS AMI's max-pods-calculator; AWS EKS docs "Amazon EKS recommended maximum Pods for
 * each Amazon EC2 instance type"), over ./instance-limits.ts:
 *
 *   ENIs × (IPv4 addresses per ENI − 1) + 2
 *
 * (each ENI's primary IP is not for pods; +2 for the host-network pods aws-node and
 * kube-proxy). With prefix delegation each slot holds a /28, so × 16, on Nitro types only
 * (hypervisor nitro, or bare metal, as amazon-vpc-cni-k8s decides). With custom networking
 * (ENIConfig) the primary ENI serves no pod: one ENI fewer. Then EKS's cap by vCPUs: 110
 * up to 30 vCPUs, 250 above (the calculator's ceilings), unless turned off; then an
 * operator's own cap. Pure once the table is loaded.
 */
import { closest } from 'fastest-levenshtein';
import { CliError, EXIT } from './errors.js';
import { REFRESH_HINT, type InstanceLimits, type InstanceTable } from './instance-limits.js';

/** EKS's ceilings: at most 30 vCPUs → 110 pods, more → 250. */
export const EKS_CAP = { lowVcpus: 30, low: 110, high: 250 } as const;

/** Inputs of {@link maxPods}. */
export interface MaxPodsInput {
  instanceType: string;
  prefixDelegation?: boolean;
  customNetworking?: boolean;
  /** Apply EKS's vCPU-based cap (default true). */
  eksCap?: boolean;
  /** Upper bound applied last (e.g. 110, or the flag's text `"110"`); undefined = none. */
  cap?: number | string;
}

/** The answer and how it was reached. */
export interface MaxPodsResult {
  instanceType: string;
  maxEnis: number;
  ipv4PerEni: number;
  vcpus: number | null;
  /** ENIs that serve pods (one fewer with custom networking). */
  podEnis: number;
  /** Addresses per slot: 1, or 16 with prefix delegation on a Nitro type. */
  perSlot: number;
  /** Before any cap. */
  formula: number;
  /** EKS's cap for this type's vCPUs, or null when turned off. */
  eksCap: number | null;
  maxPods: number;
  /** The arithmetic, e.g. `3 × (10 − 1) × 16 + 2 = 434, EKS cap 110 (2 vCPUs ≤ 30)`. */
  explain: string;
}

/** EKS's cap for `vcpus`. */
export function eksCapFor(vcpus: number): number {
  return vcpus > EKS_CAP.lowVcpus ? EKS_CAP.high : EKS_CAP.low;
}

/** The table row of `instanceType`. @throws CliError (usage) naming the closest listed type and how to refresh. */
export function lookupType(table: InstanceTable, instanceType: string): InstanceLimits {
  const info = table.types.get(instanceType);
  if (info) return info;
  const near = closest(instanceType, [...table.types.keys()]);
  throw new CliError(
    `unknown instance type "${instanceType}": not among the ${table.types.size} types of the table (${table.source}); the closest listed one is ${near}. A newer type? ${REFRESH_HINT}`,
    EXIT.usage,
  );
}

/**
 * Computes max pods for an instance type.
 * @throws CliError (usage, 2) for a type not in the table (naming the closest one and how
 *         to refresh it; never a guess), a cap that is not a whole number ≥ 1, or EKS's cap
 *         asked for a type whose vCPUs the table lacks.
 */
export function maxPods(table: InstanceTable, i: MaxPodsInput): MaxPodsResult {
  const info = lookupType(table, i.instanceType);
  const cap = i.cap === undefined ? undefined : /^[0-9]+$/.test(String(i.cap)) ? Number(i.cap) : NaN;
  if (cap !== undefined && !(cap >= 1))
    throw new CliError(`--max-pods-cap "${i.cap}" is invalid: expected a whole number >= 1`, EXIT.usage);
  const podEnis = Math.max(info.maxEnis - (i.customNetworking ? 1 : 0), 0);
  const nitro = info.hypervisor === 'nitro' || info.bareMetal;
  const perSlot = i.prefixDelegation && nitro ? 16 : 1;
  const formula = podEnis * (info.ipv4PerEni - 1) * perSlot + 2;
  const notes = [`${podEnis} × (${info.ipv4PerEni} − 1)${perSlot > 1 ? ' × 16' : ''} + 2 = ${formula}`];
  if (i.prefixDelegation && !nitro) notes.push(`no prefix delegation on a ${info.hypervisor} type: secondary IPs`);
  let eksCap: number | null = null;
  let result = formula;
  if (i.eksCap !== false) {
    if (info.vcpus === null)
      throw new CliError(
        `the table lists no vCPUs for ${info.instanceType}, so EKS's cap (110 up to 30 vCPUs, 250 above) cannot be applied: pass --no-eks-cap for the uncapped ${formula}, or --max-pods-cap N`,
        EXIT.usage,
      );
    eksCap = eksCapFor(info.vcpus);
    if (eksCap < result) {
      result = eksCap;
      notes.push(`EKS cap ${eksCap} (${info.vcpus} vCPUs ${info.vcpus > EKS_CAP.lowVcpus ? '>' : '≤'} 30)`);
    }
  }
  if (cap !== undefined && cap < result) {
    result = cap;
    notes.push(`capped at ${cap}`);
  }
  return {
    instanceType: info.instanceType,
    maxEnis: info.maxEnis,
    ipv4PerEni: info.ipv4PerEni,
    vcpus: info.vcpus,
    podEnis,
    perSlot,
    formula,
    eksCap,
    maxPods: result,
    explain: notes.join(', '),
  };
}
