/**
 * IPv6 bookkeeping of one subnet's /64 (AWS VPC User Guide, "Subnet CIDR blocks": the
 * first four and the last IPv6 address of a subnet block are reserved; AWS EC2 User Guide,
 * "Assign prefixes to network interfaces": an IPv6 prefix is a /80 of the subnet's block).
 * Addresses are handed out lowest first from the first /80; /80 prefixes lowest first
 * among the /80s that hold no address in use and no reserved one (so the first and the
 * last /80 are never delegated). EC2 picks at random; the sim is deterministic.
 */
import { Ec2ApiError, invalidParameter } from './ec2-errors.js';
import {
  ENI_IPV6_PREFIX_LENGTH,
  SUBNET_IPV6_PREFIX_LENGTH,
  bigIntToIpv6,
  ipv6ToBigInt,
  parseIpv6Cidr,
  type Ipv6Cidr,
} from './ipv6-cidr.js';

const BLOCK_BITS = BigInt(128 - ENI_IPV6_PREFIX_LENGTH);
/** Number of /80 blocks in a /64. */
const BLOCKS = 1 << (ENI_IPV6_PREFIX_LENGTH - SUBNET_IPV6_PREFIX_LENGTH);

/** Used IPv6 addresses and /80 prefixes of one subnet. Offsets are relative to the /64's base. */
export class SubnetIpv6Addresses {
  /** The subnet's /64, normalised. */
  readonly cidr: string;
  private readonly block: Ipv6Cidr;
  private readonly usedAddrs = new Set<bigint>();
  /** /80 block index → number of used addresses in it. */
  private readonly addrsInBlock = new Map<number, number>();
  private readonly usedBlocks = new Set<number>();

  /** @param cidr the subnet's IPv6 block, a /64. @throws Error otherwise. */
  constructor(cidr: string) {
    const c = parseIpv6Cidr(cidr);
    if (c.prefixLength !== SUBNET_IPV6_PREFIX_LENGTH)
      throw new Error(`subnet IPv6 CIDR ${cidr}: prefix length must be /${SUBNET_IPV6_PREFIX_LENGTH}`);
    this.block = c;
    this.cidr = c.cidr;
  }

  /** Whether `ip` is in use here (an assigned address, or inside a delegated /80). */
  isUsed(ip: string): boolean {
    const off = ipv6ToBigInt(ip) - this.block.base;
    return this.usedAddrs.has(off) || this.usedBlocks.has(Number(off >> BLOCK_BITS));
  }

  /** Number of /80 prefixes delegated from this subnet. */
  prefixCount(): number {
    return this.usedBlocks.size;
  }

  /** Takes `count` free addresses, lowest first (outside delegated /80s and the reserved ones). */
  allocate(count: number): string[] {
    const out: string[] = [];
    for (let off = 4n; out.length < count && off < this.block.size - 1n; off++) {
      const blk = Number(off >> BLOCK_BITS);
      if (this.usedBlocks.has(blk)) {
        off = (BigInt(blk + 1) << BLOCK_BITS) - 1n; // skip the delegated /80
        continue;
      }
      if (this.usedAddrs.has(off)) continue;
      this.take(off);
      out.push(bigIntToIpv6(this.block.base + off));
    }
    if (out.length < count) {
      this.release(out);
      throw new Ec2ApiError(
        'InsufficientFreeAddressesInSubnet',
        'The specified subnet does not have enough free IPv6 addresses to satisfy the request.',
      );
    }
    return out;
  }

  /**
   * Takes the given addresses (all or none), returned normalised.
   * @throws Ec2ApiError InvalidParameterValue (not IPv6, outside the subnet, reserved,
   * duplicate), InvalidIPAddress.InUse.
   */
  allocateSpecific(ips: string[]): string[] {
    const offs = ips.map((ip) => {
      let n: bigint;
      try {
        n = ipv6ToBigInt(ip);
      } catch {
        throw invalidParameter(`Invalid value '${ip}' for Ipv6Addresses: not an IPv6 address`);
      }
      const off = n - this.block.base;
      if (off < 0n || off >= this.block.size)
        throw invalidParameter(`Address ${ip} does not fall within the subnet's IPv6 address range ${this.cidr}`);
      if (off < 4n || off === this.block.size - 1n) throw invalidParameter(`Address ${ip} is reserved by AWS`);
      if (this.usedAddrs.has(off) || this.usedBlocks.has(Number(off >> BLOCK_BITS)))
        throw new Ec2ApiError('InvalidIPAddress.InUse', `Address ${ip} is in use.`);
      return off;
    });
    if (new Set(offs).size !== offs.length) throw invalidParameter('Duplicate addresses in the request');
    for (const o of offs) this.take(o);
    return offs.map((o) => bigIntToIpv6(this.block.base + o));
  }

  /** Returns addresses to the free set (unknown ones are ignored). */
  release(ips: string[]): void {
    for (const ip of ips) {
      const off = ipv6ToBigInt(ip) - this.block.base;
      if (!this.usedAddrs.delete(off)) continue;
      const blk = Number(off >> BLOCK_BITS);
      const n = (this.addrsInBlock.get(blk) ?? 1) - 1;
      if (n > 0) this.addrsInBlock.set(blk, n);
      else this.addrsInBlock.delete(blk);
    }
  }

  /**
   * Takes `count` free /80 prefixes, lowest first.
   * @throws Ec2ApiError InsufficientCidrBlocks when not enough /80s are free.
   */
  allocatePrefixes(count: number): string[] {
    const found: number[] = [];
    for (let blk = 0; blk < BLOCKS && found.length < count; blk++) if (this.blockFree(blk)) found.push(blk);
    if (found.length < count)
      throw new Ec2ApiError(
        'InsufficientCidrBlocks',
        'There are not enough free cidr blocks in the specified subnet to satisfy the request.',
      );
    for (const b of found) this.usedBlocks.add(b);
    return found.map((b) => this.prefixText(b));
  }

  /**
   * Takes the given /80 prefixes (all or none), returned normalised.
   * @throws Ec2ApiError InvalidParameterValue when malformed, not an aligned /80, outside
   * the subnet, overlapping addresses in use or reserved, or already delegated.
   */
  allocateSpecificPrefixes(prefixes: string[]): string[] {
    const blks = prefixes.map((p) => {
      const blk = this.blockOf(p);
      if (!this.blockFree(blk)) throw invalidParameter(`Prefix ${p} overlaps addresses in use or reserved`);
      return blk;
    });
    if (new Set(blks).size !== blks.length) throw invalidParameter('Duplicate prefixes in the request');
    for (const b of blks) this.usedBlocks.add(b);
    return blks.map((b) => this.prefixText(b));
  }

  /** Returns /80 prefixes to the free set (unknown ones are ignored). */
  releasePrefixes(prefixes: string[]): void {
    for (const p of prefixes) this.usedBlocks.delete(this.blockOf(p));
  }

  /** The /80 index of a prefix of this subnet. @throws Ec2ApiError InvalidParameterValue */
  private blockOf(p: string): number {
    let c: Ipv6Cidr;
    try {
      c = parseIpv6Cidr(p);
    } catch {
      throw invalidParameter(`Invalid value '${p}' for Ipv6Prefix`);
    }
    if (c.prefixLength !== ENI_IPV6_PREFIX_LENGTH || ipv6ToBigInt(p.split('/')[0]!) !== c.base)
      throw invalidParameter(`Invalid value '${p}' for Ipv6Prefix: must be an aligned /${ENI_IPV6_PREFIX_LENGTH}`);
    const off = c.base - this.block.base;
    if (off < 0n || off >= this.block.size)
      throw invalidParameter(`Prefix ${p} does not fall within the subnet's IPv6 CIDR block ${this.cidr}`);
    return Number(off >> BLOCK_BITS);
  }

  private prefixText(blk: number): string {
    return `${bigIntToIpv6(this.block.base + (BigInt(blk) << BLOCK_BITS))}/${ENI_IPV6_PREFIX_LENGTH}`;
  }

  private blockFree(blk: number): boolean {
    return blk > 0 && blk < BLOCKS - 1 && !this.usedBlocks.has(blk) && !this.addrsInBlock.has(blk);
  }

  private take(off: bigint): void {
    this.usedAddrs.add(off);
    const blk = Number(off >> BLOCK_BITS);
    this.addrsInBlock.set(blk, (this.addrsInBlock.get(blk) ?? 0) + 1);
  }
}
