/**
 * What a failed grow pass means (grow-executor.ts), pure: its kind for metrics and the
 * node condition, the one-line error for status output, and whether the refill is
 * blocked (it cannot succeed by waiting: every candidate subnet full, or EC2 refusing to
 * attach another ENI at the instance's limit) rather than transient.
 */
import { Ec2Error } from '../../cloud/ec2-port.js';
import type { EniLimits } from '../../pool/grow-limits.js';
import { SUBNET_FULL_CODES } from '../eni-lifecycle/subnet-placement.js';

/** EC2 code meaning the instance cannot take another ENI. */
export const ATTACH_LIMIT = 'AttachmentLimitExceeded';

/** Kind of a grow failure: the subnet is full, an ENI limit binds, EC2 throttled, or another EC2/network error. */
export type GrowFailureKind = 'subnet_full' | 'eni_limit' | 'throttled' | 'ec2_error';

/** Result of {@link classifyGrowFailure}. */
export interface GrowFailure {
  kind: GrowFailureKind;
  /** Why the refill cannot succeed, when it cannot; undefined for a transient failure. */
  blocked?: string;
  /** The error for status output: `blocked`, else the first error's action and code (or message). */
  message: string;
}

/**
 * Classifies the errors of one grow pass (at least one). `stuckReason`: the reason the
 * caller already found when full subnets left nothing to stand in for them (it blocks the
 * refill); `limits` names the instance type's ENI limit in an attach refusal.
 */
export function classifyGrowFailure(errors: Error[], limits: EniLimits | undefined, stuckReason?: string): GrowFailure {
  const subnetFull = errors.find((e): e is Ec2Error => e instanceof Ec2Error && SUBNET_FULL_CODES.has(e.code));
  const attachLimit = errors.find((e): e is Ec2Error => e instanceof Ec2Error && e.code === ATTACH_LIMIT);
  let blocked = stuckReason;
  if (blocked === undefined && attachLimit)
    blocked =
      `EC2 refused to attach another ENI (${ATTACH_LIMIT}): the instance is at its ENI limit` +
      `${limits ? ` (instance type ${limits.instanceType} allows ${limits.instanceMaxEnis})` : ''}`;
  const kind: GrowFailureKind = subnetFull
    ? 'subnet_full'
    : attachLimit
      ? 'eni_limit'
      : errors.some((e) => e instanceof Ec2Error && e.kind === 'throttle')
        ? 'throttled'
        : 'ec2_error';
  const first = errors[0]!;
  const message = blocked ?? (first instanceof Ec2Error ? `${first.action} failed with ${first.code}` : first.message);
  return { kind, ...(blocked !== undefined ? { blocked } : {}), message };
}
