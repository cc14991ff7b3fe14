/**
 * ENI ownership rules (docs/design.md#eni-ownership), pure: the tags and description that
 * mark an ENI as created by eni-ipam (the amazon-vpc-cni-k8s keys, so existing tooling
 * recognises them), who may manage it, and how to read an EC2 failure's outcome.
 */
import { Ec2Error, type Ec2Eni } from '../cloud/ec2.js';
import { THROTTLE_CODES } from '../cloud/retry.js';

/** Tag keys (compatible with amazon-vpc-cni-k8s, so existing tooling recognises our ENIs). */
export const TAG_INSTANCE_ID = 'node.k8s.amazonaws.com/instance_id';
export const TAG_CREATED_AT = 'node.k8s.amazonaws.com/createdAt';
export const TAG_NO_MANAGE = 'node.k8s.amazonaws.com/no_manage';
export const TAG_CLUSTER_NAME = 'cluster.k8s.amazonaws.com/name';
/** Description prefix of the ENIs we create (`aws-K8S-<instance id>`). */
export const ENI_DESCRIPTION_PREFIX = 'aws-K8S-';

/** True if ipamd may manage this ENI: ours (tagged with our instance id) and not `no_manage=true`. */
export function isOurEni(eni: Ec2Eni, instanceId: string): boolean {
  return eni.tags[TAG_INSTANCE_ID] === instanceId && eni.tags[TAG_NO_MANAGE] !== 'true';
}

/** The `createdAt` tag of an ENI in ms since the epoch, or undefined when missing or malformed. */
export function eniCreatedAtMs(eni: Ec2Eni): number | undefined {
  const t = Date.parse(eni.tags[TAG_CREATED_AT] ?? '');
  return Number.isFinite(t) ? t : undefined;
}

/**
 * True when an EC2 failure proves the request was not executed (a 4xx answer or
 * throttling). False for server errors, timeouts and connection errors: the call may
 * have taken effect, so the caller must check EC2 before trusting either outcome.
 * False too for a call that was retried and then got a 4xx: an earlier attempt (a 5xx or
 * timeout) may have done it, and the 4xx may be its consequence (an Unassign repeated
 * after it happened: `InvalidParameterValue`, not assigned; a Detach repeated:
 * `InvalidAttachmentID.NotFound`). Only a describe settles those.
 */
export function failedForSure(e: unknown): boolean {
  if (!(e instanceof Ec2Error)) return false;
  if (e.attempts > 1) return false;
  const kind = (e as Ec2Error & { kind?: string }).kind;
  if (kind === 'client' || kind === 'throttle') return true;
  if (kind === 'server' || kind === 'transport') return false;
  if (THROTTLE_CODES.has(e.code)) return true; // refused before anything was done (EC2 answers 503)
  return e.httpStatus !== undefined && e.httpStatus >= 400 && e.httpStatus < 500;
}

/**
 * True when a failed UnassignPrivateIpAddresses proves the addresses (or /28 prefixes) are
 * all still on the ENI: the call was surely not executed ({@link failedForSure}) and EC2
 * did not refuse it because of the addresses themselves. `InvalidParameterValue` is what
 * EC2 answers when some of them are not assigned to the ENI (any more): the datastore is
 * behind EC2, and only a describe may say which ones are left.
 */
export function unassignRefusedKeepingAddresses(e: unknown): boolean {
  return failedForSure(e) && !(e instanceof Ec2Error && e.code === 'InvalidParameterValue');
}
