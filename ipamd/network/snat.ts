/**
 * SNAT of pod traffic leaving the VPC (docs/design.md#7-host-networking): chain `AWS-SNAT-CHAIN-0` in the nat
 * table, jumped to from POSTROUTING, holding one `RETURN` per VPC CIDR and per
 * `AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS` entry, then
 * `SNAT --to-source <node primary ip>` for destinations that are not local, with the port
 * selection of AWS_VPC_K8S_CNI_RANDOMIZESNAT: `prng` (default) `--random-fully`,
 * `hashrandom` `--random`, `none` neither (iptables-extensions(8), SNAT; as amazon-vpc-cni-k8s).
 * The chain and comment names match amazon-vpc-cni-k8s, so operators' tooling finds them.
 * The chain's contents are replaced in one `iptables-restore --noflush` commit (no moment
 * without rules); the POSTROUTING jump is added once (`-C` before `-A`).
 * With `AWS_VPC_K8S_CNI_EXTERNALSNAT=true` the jump and the chain are removed instead.
 */
import type { Iptables } from './iptables.js';

/** The chain name (as in amazon-vpc-cni-k8s). */
export const SNAT_CHAIN = 'AWS-SNAT-CHAIN-0';
/** The POSTROUTING rule that jumps to {@link SNAT_CHAIN}. */
export const SNAT_JUMP: string[] = ['-m', 'comment', '--comment', 'AWS SNAT CHAIN', '-j', SNAT_CHAIN];

/** What the SNAT rules depend on. */
export interface SnatSpec {
  /** Primary private IPv4 of the node (the primary ENI's), dotted quad. */
  nodeIp: string;
  /** VPC IPv4 CIDRs (`10.0.0.0/16`...): traffic to them keeps the pod's address. */
  vpcCidrs: string[];
  /** AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS: more CIDRs reached without SNAT. */
  excludeCidrs: string[];
  /** AWS_VPC_K8S_CNI_EXTERNALSNAT: true → no SNAT rules on this node at all. */
  externalSnat: boolean;
  /** AWS_VPC_K8S_CNI_RANDOMIZESNAT (default `prng`). */
  randomize?: SnatRandomize;
}

/** AWS_VPC_K8S_CNI_RANDOMIZESNAT values. */
export type SnatRandomize = 'none' | 'hashrandom' | 'prng';

const RANDOM_FLAG: Record<SnatRandomize, string> = { none: '', hashrandom: ' --random', prng: ' --random-fully' };

/** iptables-restore text that (re)fills {@link SNAT_CHAIN} for `spec` (chain declared, so it is flushed first). */
export function snatChainRestore(spec: SnatSpec): string {
  const cidrs = [...new Set([...spec.vpcCidrs, ...spec.excludeCidrs])];
  const lines = ['*nat', `:${SNAT_CHAIN} - [0:0]`];
  for (const c of cidrs)
    lines.push(`-A ${SNAT_CHAIN} -d ${c} -m comment --comment "AWS SNAT CHAIN, VPC or excluded CIDR" -j RETURN`);
  lines.push(
    `-A ${SNAT_CHAIN} -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source ${spec.nodeIp}${RANDOM_FLAG[spec.randomize ?? 'prng']}`,
  );
  lines.push('COMMIT', '');
  return lines.join('\n');
}

/**
 * Installs (or, with `externalSnat`, removes) the SNAT rules. Re-run safe; a changed
 * CIDR list or node IP replaces the chain contents in one commit.
 * @throws CommandError when iptables fails (lock wait exceeded, missing SNAT/addrtype support...).
 */
export async function applySnat(ipt: Iptables, spec: SnatSpec): Promise<void> {
  if (spec.externalSnat) {
    await removeSnat(ipt);
    return;
  }
  await ipt.restoreNoflush(snatChainRestore(spec));
  await ipt.ensureRule('nat', 'POSTROUTING', SNAT_JUMP);
}

/** Removes the POSTROUTING jump (every copy) and the chain. Re-run safe. @throws CommandError */
export async function removeSnat(ipt: Iptables): Promise<void> {
  if (!(await ipt.chainExists('nat', SNAT_CHAIN))) return;
  await ipt.deleteRule('nat', 'POSTROUTING', SNAT_JUMP);
  await ipt.deleteChain('nat', SNAT_CHAIN);
}
