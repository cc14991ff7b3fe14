/**
 * ENI ownership rules (docs/design.md#eni-ownership), pure: the tags and description that
 * mark an ENI as created by eni-ipam (the amazon-vpc-cni-k8s keys, so existing tooling
 * recognises them), and who may manage it. (How to read an EC2 failure's outcome: cloud/ec2-outcome.ts.)
 */
import type { Ec2Eni } from '../../cloud/ec2-port.js';

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
