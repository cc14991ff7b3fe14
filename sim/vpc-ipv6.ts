/**
 * IPv6 CIDR blocks of the simulated VPC and its subnets (AWS VPC User Guide, "IPv6 CIDR
 * blocks", "Add an IPv6 CIDR block to your VPC", "Subnet CIDR blocks"): an
 * Amazon-provided VPC block is a /56 (quota: 5 IPv6 blocks per VPC), a subnet has at most
 * one IPv6 block, a /64 of one of the VPC's blocks, overlapping no other subnet's. Pure
 * functions over {@link SimState}; errors are plain `Error`s (set-up calls, not EC2 actions).
 */
import {
  SUBNET_IPV6_PREFIX_LENGTH,
  VPC_IPV6_PREFIX_LENGTH,
  bigIntToIpv6,
  ipv6CidrInside,
  ipv6CidrsOverlap,
  ipv6SubBlock,
  parseIpv6Cidr,
  type Ipv6Cidr,
} from './ipv6-cidr.js';
import type { SimState } from './types.js';

/** Default quota of IPv6 CIDR blocks per VPC. */
export const MAX_VPC_IPV6_CIDR_BLOCKS = 5;

/** The block the sim hands out when a test asks for "an Amazon-provided /56" (documentation-style GUA). */
export const DEFAULT_VPC_IPV6_CIDR = '2600:1f14:abc:de00::/56';

/**
 * Associates an IPv6 /56 with the VPC and returns it normalised. Without `cidr`, the next
 * /56 after the VPC's last IPv6 block (or {@link DEFAULT_VPC_IPV6_CIDR}) stands for an
 * Amazon-provided one.
 * @throws Error when `cidr` is not an IPv6 /56, overlaps a block of the VPC, or the VPC
 * already has {@link MAX_VPC_IPV6_CIDR_BLOCKS}.
 */
export function addVpcIpv6Cidr(state: SimState, cidr?: string): string {
  const blocks = state.vpcIpv6Cidrs ?? [];
  if (blocks.length >= MAX_VPC_IPV6_CIDR_BLOCKS)
    throw new Error(
      `VPC ${state.vpcId} already has ${blocks.length} IPv6 CIDR blocks (quota ${MAX_VPC_IPV6_CIDR_BLOCKS})`,
    );
  let c: Ipv6Cidr;
  if (cidr === undefined) {
    const last = blocks.length ? parseIpv6Cidr(blocks[blocks.length - 1]!) : undefined;
    c = parseIpv6Cidr(
      last ? `${bigIntToIpv6(last.base + last.size)}/${VPC_IPV6_PREFIX_LENGTH}` : DEFAULT_VPC_IPV6_CIDR,
    );
  } else {
    try {
      c = parseIpv6Cidr(cidr);
    } catch {
      throw new Error(`VPC IPv6 CIDR '${cidr}' is not an IPv6 CIDR such as ${DEFAULT_VPC_IPV6_CIDR}`);
    }
  }
  if (c.prefixLength !== VPC_IPV6_PREFIX_LENGTH)
    throw new Error(`VPC IPv6 CIDR ${c.cidr}: an Amazon-provided block is a /${VPC_IPV6_PREFIX_LENGTH}`);
  for (const b of blocks)
    if (ipv6CidrsOverlap(c, parseIpv6Cidr(b))) throw new Error(`VPC IPv6 CIDR ${c.cidr} overlaps the VPC's block ${b}`);
  state.vpcIpv6Cidrs = [...blocks, c.cidr];
  return c.cidr;
}

/**
 * The IPv6 /64 a new subnet gets: `want` checked (a /64 inside one of the VPC's IPv6
 * blocks, overlapping no subnet's), or for `true` the lowest free /64 of the VPC's blocks.
 * @throws Error when the VPC has no IPv6 block, or `want` is malformed, not a /64, outside
 * the VPC's blocks or taken; or when every /64 is taken.
 */
export function pickSubnetIpv6Cidr(state: SimState, want: string | true): string {
  const vpcBlocks = (state.vpcIpv6Cidrs ?? []).map((b) => parseIpv6Cidr(b));
  if (vpcBlocks.length === 0)
    throw new Error(`VPC ${state.vpcId} has no IPv6 CIDR block: associate one first (addVpcIpv6Cidr)`);
  const taken = [...state.subnets.values()].flatMap((s) => (s.ipv6 ? [parseIpv6Cidr(s.ipv6.cidr)] : []));
  if (want === true) {
    for (const vb of vpcBlocks) {
      const n = 1n << BigInt(SUBNET_IPV6_PREFIX_LENGTH - vb.prefixLength);
      for (let i = 0n; i < n; i++) {
        const c = parseIpv6Cidr(ipv6SubBlock(vb, SUBNET_IPV6_PREFIX_LENGTH, i));
        if (!taken.some((t) => ipv6CidrsOverlap(c, t))) return c.cidr;
      }
    }
    throw new Error(`every /64 of the VPC's IPv6 blocks is taken`);
  }
  let c: Ipv6Cidr;
  try {
    c = parseIpv6Cidr(want);
  } catch {
    throw new Error(`subnet IPv6 CIDR '${want}' is not an IPv6 CIDR`);
  }
  if (c.prefixLength !== SUBNET_IPV6_PREFIX_LENGTH)
    throw new Error(`subnet IPv6 CIDR ${c.cidr}: a subnet's IPv6 block is a /${SUBNET_IPV6_PREFIX_LENGTH}`);
  if (!vpcBlocks.some((vb) => ipv6CidrInside(c, vb)))
    throw new Error(`subnet IPv6 CIDR ${c.cidr} is not inside a VPC IPv6 block (${state.vpcIpv6Cidrs!.join(', ')})`);
  const clash = [...state.subnets.values()].find((s) => s.ipv6 && ipv6CidrsOverlap(c, parseIpv6Cidr(s.ipv6.cidr)));
  if (clash) throw new Error(`subnet IPv6 CIDR ${c.cidr} overlaps ${clash.subnetId} (${clash.ipv6!.cidr})`);
  return c.cidr;
}

/**
 * Association id of a VPC's `index`-th IPv6 block, stable for the sim's life and disjoint
 * from the IPv4 ones: `vpc-cidr-assoc-` + hex derived from the VPC id, `6` and the index.
 */
export function ipv6VpcAssociationId(vpcId: string, index: number): string {
  return `vpc-cidr-assoc-${vpcId.slice(-15)}6${index.toString(16)}`.slice(0, 32);
}

/** Association id of a subnet's IPv6 block: `subnet-cidr-assoc-` + the subnet id's hex. */
export function ipv6SubnetAssociationId(subnetId: string): string {
  return `subnet-cidr-assoc-${subnetId.slice('subnet-'.length)}`;
}
