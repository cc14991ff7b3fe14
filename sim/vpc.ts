/**
 * VPC CIDR blocks and subnet placement rules of the simulated cloud (AWS VPC User Guide,
 * "VPC CIDR blocks" and "Add or remove a CIDR block from your VPC"): a VPC has a primary
 * IPv4 block and up to four secondary ones (default quota: 5 in all), each /16–/28, none
 * overlapping; a VPC whose primary block is in one RFC 1918 range cannot add a block from
 * another RFC 1918 range (100.64.0.0/10, the shared address space used for custom
 * networking, is always allowed); a subnet lies inside one of the VPC's blocks and
 * overlaps no other subnet. Availability zones are `<region><letter>` (e.g. `us-west-2b`).
 * Pure functions over {@link SimState}; errors are plain `Error`s (these are set-up calls,
 * not EC2 actions).
 */
import { parseIpv4Cidr } from './address-pool.js';
import { vpcCidrBlocks, type SimState } from './types.js';

/** Default quota of IPv4 CIDR blocks per VPC (primary included). */
export const MAX_VPC_CIDR_BLOCKS = 5;

const RFC1918 = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'].map((c) => parseIpv4Cidr(c));

type Range = { base: number; size: number };

function inside(inner: Range, outer: Range): boolean {
  return inner.base >= outer.base && inner.base + inner.size <= outer.base + outer.size;
}

function overlaps(a: Range, b: Range): boolean {
  return a.base < b.base + b.size && b.base < a.base + a.size;
}

function rfc1918Range(c: Range): number {
  return RFC1918.findIndex((r) => inside(c, r));
}

/**
 * Associates a secondary IPv4 CIDR block with the VPC and returns it normalised.
 * @throws Error when `cidr` is not an IPv4 CIDR of /16–/28, overlaps a block of the VPC,
 * comes from another RFC 1918 range than the primary block, or the VPC already has
 * {@link MAX_VPC_CIDR_BLOCKS} blocks.
 */
export function addVpcCidr(state: SimState, cidr: string): string {
  let c: ReturnType<typeof parseIpv4Cidr>;
  try {
    c = parseIpv4Cidr(cidr);
  } catch {
    throw new Error(`VPC CIDR '${cidr}' is not an IPv4 CIDR such as 100.64.0.0/16`);
  }
  if (c.prefixLength < 16 || c.prefixLength > 28) throw new Error(`VPC CIDR ${cidr}: prefix length must be /16 to /28`);
  const blocks = vpcCidrBlocks(state);
  if (blocks.length >= MAX_VPC_CIDR_BLOCKS)
    throw new Error(`VPC ${state.vpcId} already has ${blocks.length} CIDR blocks (quota ${MAX_VPC_CIDR_BLOCKS})`);
  for (const b of blocks)
    if (overlaps(c, parseIpv4Cidr(b))) throw new Error(`VPC CIDR ${c.cidr} overlaps the VPC's block ${b}`);
  const primaryRange = rfc1918Range(parseIpv4Cidr(state.vpcCidr));
  const range = rfc1918Range(c);
  if (range >= 0 && primaryRange !== range)
    throw new Error(
      `VPC CIDR ${c.cidr} is in ${RFC1918[range]!.cidr} but the primary block ${state.vpcCidr} is not: AWS refuses that combination`,
    );
  state.secondaryVpcCidrs = [...(state.secondaryVpcCidrs ?? []), c.cidr];
  return c.cidr;
}

/**
 * Checks that a new subnet CIDR lies inside one of the VPC's blocks and overlaps no
 * existing subnet; returns the normalised CIDR.
 * @throws Error naming the CIDR and the VPC blocks or the overlapped subnet.
 */
export function checkSubnetCidr(state: SimState, cidr: string): string {
  let c: ReturnType<typeof parseIpv4Cidr>;
  try {
    c = parseIpv4Cidr(cidr);
  } catch {
    throw new Error(`subnet CIDR '${cidr}' is not an IPv4 CIDR such as 10.0.0.0/24`);
  }
  const blocks = vpcCidrBlocks(state);
  if (!blocks.some((b) => inside(c, parseIpv4Cidr(b))))
    throw new Error(`subnet ${cidr} is not inside a VPC CIDR block (${blocks.join(', ')})`);
  for (const s of state.subnets.values())
    if (overlaps(c, parseIpv4Cidr(s.cidr))) throw new Error(`subnet ${cidr} overlaps ${s.subnetId} (${s.cidr})`);
  return c.cidr;
}

/**
 * Checks an availability zone name against the region: `<region><letter>`.
 * @throws Error naming the zone and the accepted form.
 */
export function checkAvailabilityZone(region: string, zone: string): string {
  if (!zone.startsWith(region) || !/^[a-z]$/.test(zone.slice(region.length)))
    throw new Error(`availability zone '${zone}' is not a zone of ${region} (expected ${region}a, ${region}b, ...)`);
  return zone;
}

/**
 * The zone id EC2 reports for a zone name (`AvailabilityZoneId`), e.g. `us-west-2b` →
 * `usw2-az2` (real accounts map names to ids per account; the sim uses the letter order).
 */
export function availabilityZoneId(region: string, zone: string): string {
  const [area = '', dir = '', n = ''] = region.split('-');
  const letter = zone.slice(region.length);
  return `${area}${dir.charAt(0)}${n}-az${letter ? letter.charCodeAt(0) - 96 : 1}`;
}
