/**
 * The NodePort connection-mark facts (docs/design.md#nodeport-and-the-connection-mark), in
 * one small file so they can move with the other rule priorities:
 *
 * | what | value | why |
 * |---|---|---|
 * | mark bit | `AWS_VPC_K8S_CNI_CONNMARK`, default 0x80 | amazon-vpc-cni-k8s's default; clear of kube-proxy (0x4000, 0x8000) and Calico (0xffff0000) |
 * | `fwmark <mark>/<mark> lookup main` | prio 1023 | before our 1024 `to <VPC CIDR> goto 1026` rules (a marked reply to a VPC client must not jump to the pod's ENI table at 1536), after the plugin's 512 `to <pod> lookup main` |
 *
 * amazon-vpc-cni-k8s puts its fwmark rule at 1024 with nothing else there; ours holds the
 * VPC gotos (netfacts/routing.ts), and rules of equal priority run in insertion order, so
 * ours goes one earlier.
 */

/** Default connection mark (AWS_VPC_K8S_CNI_CONNMARK unset), as amazon-vpc-cni-k8s. */
export const DEFAULT_CONNMARK = 0x80;
/** Priority of `fwmark <mark>/<mark> lookup main`. */
export const CONNMARK_RULE_PRIORITY = 1023;
/** iptables comment on the mangle rules (the same words as amazon-vpc-cni-k8s, so operators' tooling finds them). */
export const CONNMARK_COMMENT = 'AWS, primary ENI';
/** A mark as iptables and iproute2 print it (`0x80`). */
export function markHex(mark: number): string {
  return `0x${mark.toString(16)}`;
}
