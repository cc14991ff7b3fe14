/**
 * Private IPv4 bookkeeping of one subnet. AWS reserves five addresses per subnet (the
 * first four and the last: AWS VPC User Guide, "Subnet CIDR blocks"), so a subnet has
 * `size - 5` free addresses to begin with. /28 prefixes are aligned on 16 addresses and
 * take all 16 (AWS EC2 User Guide, "Assign prefixes to network interfaces").
 */
import ipaddr from 'ipaddr.js';
import { Ec2ApiError, invalidParameter } from './ec2-errors.js';

/** Parses an IPv4 dotted quad to a uint32. @throws Error when not IPv4. */
export function ipToInt(ip: string): number {
  const b = ipaddr.IPv4.parse(ip).toByteArray();
  return ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
}

/** Formats a uint32 as an IPv4 dotted quad. */
export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join('.');
}

/** Parses and normalises an IPv4 CIDR. @throws Error on anything else. */
export function parseIpv4Cidr(cidr: string): { base: number; prefixLength: number; size: number; cidr: string } {
  const [addr, prefixLength] = ipaddr.IPv4.parseCIDR(cidr);
  const size = 2 ** (32 - prefixLength);
  const base = (ipToInt(addr.toString()) & ~(size - 1)) >>> 0;
  return { base, prefixLength, size, cidr: `${intToIp(base)}/${prefixLength}` };
}

/** Whether `ip` lies in `cidr`. */
export function cidrContains(cidr: string, ip: string): boolean {
  const c = parseIpv4Cidr(cidr);
  const n = ipToInt(ip);
  return n >= c.base && n < c.base + c.size;
}

/** Free/used address accounting of one subnet. Offsets are relative to the network address. */
export class SubnetAddresses {
  readonly base: number;
  readonly size: number;
  private readonly used = new Set<number>();

  /** @param cidr the subnet CIDR (/16 to /28, as EC2 allows). @throws Error otherwise. */
  constructor(cidr: string) {
    const c = parseIpv4Cidr(cidr);
    if (c.prefixLength < 16 || c.prefixLength > 28)
      throw new Error(`subnet CIDR ${cidr}: prefix length must be /16 to /28`);
    this.base = c.base;
    this.size = c.size;
  }

  /** Number of free addresses (EC2 `AvailableIpAddressCount`). */
  freeCount(): number {
    return this.size - 5 - this.used.size;
  }

  /** Whether `ip` is in the subnet and currently in use. */
  isUsed(ip: string): boolean {
    return this.used.has(ipToInt(ip) - this.base);
  }

  /**
   * Takes `count` free addresses, lowest first.
   * @throws Ec2ApiError InsufficientFreeAddressesInSubnet when fewer are free.
   */
  allocate(count: number): string[] {
    if (count > this.freeCount()) {
      throw new Ec2ApiError(
        'InsufficientFreeAddressesInSubnet',
        `The specified subnet does not have enough free addresses to satisfy the request (requested ${count}, free ${this.freeCount()}).`,
      );
    }
    const out: string[] = [];
    for (let off = 4; off < this.size - 1 && out.length < count; off++) {
      if (!this.used.has(off)) {
        this.used.add(off);
        out.push(intToIp(this.base + off));
      }
    }
    return out;
  }

  /**
   * Takes the given addresses (all or none).
   * @throws Ec2ApiError InvalidParameterValue when one is outside the subnet, reserved or in use.
   */
  allocateSpecific(ips: string[]): void {
    const offs = ips.map((ip) => {
      let n: number;
      try {
        n = ipToInt(ip);
      } catch {
        throw invalidParameter(`Invalid value '${ip}' for PrivateIpAddress: not an IPv4 address`);
      }
      const off = n - this.base;
      if (off < 0 || off >= this.size)
        throw invalidParameter(`Address ${ip} does not fall within the subnet's address range`);
      if (off < 4 || off === this.size - 1) throw invalidParameter(`Address ${ip} is reserved by AWS`);
      if (this.used.has(off)) throw new Ec2ApiError('InvalidIPAddress.InUse', `Address ${ip} is in use.`);
      return off;
    });
    if (new Set(offs).size !== offs.length) throw invalidParameter('Duplicate addresses in the request');
    for (const o of offs) this.used.add(o);
  }

  /** Returns addresses to the free set (unknown ones are ignored). */
  release(ips: string[]): void {
    for (const ip of ips) this.used.delete(ipToInt(ip) - this.base);
  }

  /**
   * Takes `count` free /28 prefixes (16 aligned, fully free, no reserved address).
   * @throws Ec2ApiError InsufficientCidrBlocks when not enough blocks are free.
   */
  allocatePrefixes(count: number): string[] {
    const found: number[] = [];
    for (let off = 0; off + 16 <= this.size && found.length < count; off += 16) {
      if (this.blockFree(off)) found.push(off);
    }
    if (found.length < count) {
      throw new Ec2ApiError(
        'InsufficientCidrBlocks',
        'There are not enough free cidr blocks in the specified subnet to satisfy the request.',
      );
    }
    for (const off of found) for (let i = 0; i < 16; i++) this.used.add(off + i);
    return found.map((off) => `${intToIp(this.base + off)}/28`);
  }

  /**
   * Takes the given /28 prefixes (all or none).
   * @throws Ec2ApiError InvalidParameterValue when malformed, unaligned, outside or not free.
   */
  allocateSpecificPrefixes(prefixes: string[]): string[] {
    const offs = prefixes.map((p) => {
      let c: ReturnType<typeof parseIpv4Cidr>;
      try {
        c = parseIpv4Cidr(p);
      } catch {
        throw invalidParameter(`Invalid value '${p}' for Ipv4Prefix`);
      }
      if (c.prefixLength !== 28 || c.cidr !== p)
        throw invalidParameter(`Invalid value '${p}' for Ipv4Prefix: must be an aligned /28`);
      const off = c.base - this.base;
      if (off < 0 || off + 16 > this.size)
        throw invalidParameter(`Prefix ${p} does not fall within the subnet's address range`);
      if (!this.blockFree(off))
        throw new Ec2ApiError('InvalidParameterValue', `Prefix ${p} overlaps addresses in use or reserved`);
      return off;
    });
    if (new Set(offs).size !== offs.length) throw invalidParameter('Duplicate prefixes in the request');
    for (const off of offs) for (let i = 0; i < 16; i++) this.used.add(off + i);
    return prefixes;
  }

  /** Returns /28 prefixes to the free set. */
  releasePrefixes(prefixes: string[]): void {
    for (const p of prefixes) {
      const off = parseIpv4Cidr(p).base - this.base;
      for (let i = 0; i < 16; i++) this.used.delete(off + i);
    }
  }

  private blockFree(off: number): boolean {
    if (off < 4 || off + 16 > this.size - 1) return false; // holds a reserved address
    for (let i = 0; i < 16; i++) if (this.used.has(off + i)) return false;
    return true;
  }
}
