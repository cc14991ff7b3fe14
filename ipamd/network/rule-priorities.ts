/**
 * Priorities of the IPv4 policy routing rules of eni-ipam (ip-rule(8): lower runs first;
 * 0 = local, 32766 = main, 32767 = default). Pod rules follow docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 4 and are
 * the same numbers the CNI plugin uses (cni-plugin/pod-rules.ts).
 *
 * | prio | rule | written by |
 * |---|---|---|
 * | 512  | `to <pod ip> lookup main` (traffic to a pod goes to its host veth) | plugin |
 * | 1024 | `to <VPC or SNAT-excluded CIDR> goto 1026`, one per CIDR | ipamd, unless external SNAT |
 * | 1025 | `lookup main` (anything else leaves through the primary ENI, where it is SNATed) | ipamd, unless external SNAT |
 * | 1026 | `nop` (target of the gotos) | ipamd, unless external SNAT |
 * | 1535 | `from <ENI primary ip> lookup <device+1>` | ipamd, per secondary ENI |
 * | 1536 | `from <pod ip> lookup <device+1>` (pod on a secondary ENI) | plugin |
 */

/** `to <pod ip> lookup main`. */
export const TO_POD_PRIORITY = 512;
/** `to <VPC CIDR> goto` {@link VPC_GOTO_TARGET_PRIORITY}: VPC-bound traffic skips the main lookup below. */
export const VPC_GOTO_PRIORITY = 1024;
/** `lookup main`: traffic leaving the VPC uses the main table (primary ENI) and gets SNATed. */
export const NON_VPC_MAIN_PRIORITY = 1025;
/** `nop`, the target of the {@link VPC_GOTO_PRIORITY} rules. */
export const VPC_GOTO_TARGET_PRIORITY = 1026;
/**
 * `from <ENI primary ip> lookup <device+1>`: host traffic sourced from a secondary ENI's
 * own address (and replies to connections made to it) leaves through that ENI. Just
 * before the pod rules; after the non-VPC rule, so such traffic to outside the VPC is
 * SNATed through the primary ENI like pod traffic.
 */
export const ENI_PRIMARY_IP_PRIORITY = 1535;
/** `from <pod ip> lookup <device+1>`. */
export const FROM_POD_PRIORITY = 1536;
