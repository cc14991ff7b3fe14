/**
 * IPv6 CIDR arithmetic for the simulated cloud, through ipaddr.js: addresses as 128-bit
 * `bigint`s, CIDRs normalised to their network address in RFC 5952 compressed form
 * (`2600:1f14:abc:de00::/56`), as EC2 prints them. Pure; errors are plain `Error`s.
 *
 * The sizes EC2 uses (AWS VPC User Guide, "IPv6 CIDR blocks" and "Subnet CIDR blocks";
 * AWS EC2 User Guide, "Assign prefixes to network interfaces"): a VPC IPv6 block is a
 * /56 (Amazon-provided), a subnet's is a /64 carved from it, and a delegated IPv6 prefix
 * on an ENI is a /80 carved from the subnet's /64.
 */
import ipaddr from 'ipaddr.js';

/** Prefix length of an Amazon-provided VPC IPv6 block. */
export const VPC_IPV6_PREFIX_LENGTH = 56;
/** Prefix length of a subnet's IPv6 block. */
export const SUBNET_IPV6_PREFIX_LENGTH = 64;
/** Prefix length of an IPv6 prefix delegated to an ENI. */
export const ENI_IPV6_PREFIX_LENGTH = 80;

/** A parsed IPv6 CIDR: network address, length, size (addresses) and normalised text. */
export interface Ipv6Cidr {
  base: bigint;
  prefixLength: number;
  size: bigint;
  cidr: string;
}

/** Parses an IPv6 address to a 128-bit integer. @throws Error when not IPv6. */
export function ipv6ToBigInt(ip: string): bigint {
  if (!ipaddr.IPv6.isValid(ip)) throw new Error(`'${ip}' is not an IPv6 address`);
  let n = 0n;
  for (const b of ipaddr.IPv6.parse(ip).toByteArray()) n = (n << 8n) | BigInt(b);
  return n;
}

/** Formats a 128-bit integer as a compressed IPv6 address (RFC 5952). */
export function bigIntToIpv6(n: bigint): string {
  const bytes: number[] = [];
  for (let i = 15; i >= 0; i--) bytes.push(Number((n >> BigInt(i * 8)) & 0xffn));
  return ipaddr.fromByteArray(bytes).toString();
}

/** Parses and normalises an IPv6 CIDR (host bits cleared). @throws Error on anything else. */
export function parseIpv6Cidr(cidr: string): Ipv6Cidr {
  if (!ipaddr.IPv6.isValidCIDR(cidr)) throw new Error(`'${cidr}' is not an IPv6 CIDR`);
  const [addr, prefixLength] = ipaddr.IPv6.parseCIDR(cidr);
  const size = 1n << BigInt(128 - prefixLength);
  const base = ipv6ToBigInt(addr.toString()) & ~(size - 1n);
  return { base, prefixLength, size, cidr: `${bigIntToIpv6(base)}/${prefixLength}` };
}

/** Whether `inner` lies wholly inside `outer`. */
export function ipv6CidrInside(inner: Ipv6Cidr, outer: Ipv6Cidr): boolean {
  return inner.base >= outer.base && inner.base + inner.size <= outer.base + outer.size;
}

/** Whether two IPv6 CIDRs share an address. */
export function ipv6CidrsOverlap(a: Ipv6Cidr, b: Ipv6Cidr): boolean {
  return a.base < b.base + b.size && b.base < a.base + a.size;
}

/**
 * The `index`-th block of length `prefixLength` inside `outer` (e.g. the 3rd /64 of a /56).
 * @throws Error when the block length is shorter than the outer one or the index is out of range.
 */
export function ipv6SubBlock(outer: Ipv6Cidr, prefixLength: number, index: bigint): string {
  if (prefixLength < outer.prefixLength) throw new Error(`/${prefixLength} does not fit in ${outer.cidr}`);
  const count = 1n << BigInt(prefixLength - outer.prefixLength);
  if (index < 0n || index >= count) throw new Error(`${outer.cidr} has no /${prefixLength} number ${index}`);
  const size = 1n << BigInt(128 - prefixLength);
  return `${bigIntToIpv6(outer.base + index * size)}/${prefixLength}`;
}

/** Whether `ip` is an IPv6 address inside `cidr` (false for anything unparsable). */
export function ipv6CidrContains(cidr: string, ip: string): boolean {
  try {
    const c = parseIpv6Cidr(cidr);
    const n = ipv6ToBigInt(ip);
    return n >= c.base && n < c.base + c.size;
  } catch {
    return false;
  }
}
