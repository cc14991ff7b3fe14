/**
 * IPv6 allocations of a node in `ipv6` or `dual` mode (docs/design.md#ip-families): one
 * /128 per attachment from the node's /80 prefix (2^48 addresses, no EC2 call per pod),
 * and in `ipv6` mode an IPv4 egress address per attachment from 169.254.172.0/22 (the
 * pod's `v4if0`). Beside the IPv4 datastore, never inside it. Pure: no I/O.
 *
 * Addresses are handed out sparsely: a cursor walks the /80 and never goes back until it
 * wraps, so a released /128 is not handed out again for 2^48 − 1 assignments (and never
 * within IP_COOLDOWN_PERIOD: a cooling address is skipped). The egress range is small
 * (1,022 addresses): it walks the same way and honours the cooldown.
 *
 * Restore ({@link Ipv6Allocations.restore}): an allocation whose /128 is outside the /80,
 * or whose egress address is outside the range, or that repeats an address, is
 * quarantined (kept out of every hand-out, listed), never handed out.
 *
 * Wired addresses no allocation holds are quarantined "owner unknown" ({@link
 * Ipv6Allocations.adoptWired}) until the evidence names their owner ({@link
 * Ipv6Allocations.claim}): then they are that container's allocation again, so its DEL frees them.
 */
import ipaddr from 'ipaddr.js';
import type { AllocationKey, PodRef } from './types.js';

/** One attachment's IPv6 allocation. `allocatedAt` is ms since the epoch. */
export interface V6Allocation extends AllocationKey {
  /** The pod's /128, canonical text (`2600:1f14::a`). */
  ipv6: string;
  /** `ipv6` mode: the pod's egress IPv4 from 169.254.172.0/22; '' in `dual` mode. */
  egressV4: string;
  allocatedAt: number;
  pod?: PodRef;
}

/** An address kept out of every hand-out, and why. */
export interface V6Quarantined {
  address: string;
  reason: string;
}

/** What a released address left behind while it cools (ms since the epoch / monotonic `now`). */
export interface V6Cooling {
  address: string;
  releasedAt: number;
}

/** The durable state (checkpoint): allocations, addresses cooling, the cursors. */
export interface V6State {
  prefix: string;
  allocations: V6Allocation[];
  cooling: V6Cooling[];
  quarantined: V6Quarantined[];
  nextHost: string;
  nextEgress: number;
}

/** The egress range of IPv6 pods (proto/ipam.ts EGRESS_V4_RANGE): hosts 1..1022 of 169.254.172.0/22. */
const EGRESS_BASE = ipaddr.IPv4.parse('169.254.172.0').toByteArray();
const EGRESS_HOSTS = 1022;
/** How the reason of an address {@link Ipv6Allocations.adoptWired} quarantined ends. */
const OWNER_UNKNOWN = '(owner unknown)';
const HOST_BITS = 48n;
const HOSTS = 1n << HOST_BITS;

/** The egress address of host index `i` (1..1022). */
function egressOf(i: number): string {
  const b = [...EGRESS_BASE];
  b[2]! += i >> 8;
  b[3] = i & 0xff;
  return b.join('.');
}

/** Host index of `ip` in 169.254.172.0/22 (1..1022), or undefined when outside or not a host. */
function egressIndex(ip: string): number | undefined {
  if (!ipaddr.IPv4.isValidFourPartDecimal(ip)) return undefined;
  const b = ipaddr.IPv4.parse(ip).toByteArray();
  if (b[0] !== 169 || b[1] !== 254 || b[2]! < 172 || b[2]! > 175) return undefined;
  const i = ((b[2]! - 172) << 8) | b[3]!;
  return i >= 1 && i <= EGRESS_HOSTS ? i : undefined;
}

function toBig(a: ipaddr.IPv6): bigint {
  return a.toByteArray().reduce((n, x) => (n << 8n) | BigInt(x), 0n);
}

function fromBig(n: bigint): string {
  const bytes: number[] = [];
  for (let i = 15; i >= 0; i--) bytes.push(Number((n >> BigInt(i * 8)) & 0xffn));
  return ipaddr.fromByteArray(bytes).toString();
}

/** The key of an attachment as one string. */
export function v6KeyOf(k: AllocationKey): string {
  return `${k.networkName}\u0000${k.containerID}\u0000${k.ifName}`;
}

/**
 * The network address of an IPv6 /80 CIDR (`2600:1f14:aa:bb00::/80`).
 * @throws Error naming the value when it is not an IPv6 /80 with its host bits zero.
 */
export function parsePrefix80(cidr: string): bigint {
  let addr: ipaddr.IPv6;
  let len: number;
  try {
    const [a, l] = ipaddr.IPv6.parseCIDR(cidr);
    addr = a;
    len = l;
  } catch {
    throw new Error(`not an IPv6 CIDR: ${JSON.stringify(cidr)}`);
  }
  if (len !== 80) throw new Error(`not an IPv6 /80 prefix: ${JSON.stringify(cidr)}`);
  const base = toBig(addr);
  if (base & (HOSTS - 1n)) throw new Error(`IPv6 /80 prefix has host bits set: ${JSON.stringify(cidr)}`);
  return base;
}

/** Options of {@link Ipv6Allocations}. */
export interface Ipv6AllocationsOptions {
  /** The node's /80 (`2600:1f14:aa:bb00::/80`). */
  prefix: string;
  /** True in `ipv6` mode: each allocation also gets an egress IPv4. */
  egressV4: boolean;
  /** IP_COOLDOWN_PERIOD in ms (≥ 0). */
  cooldownMs: number;
}

/** The IPv6 half of a node's allocations (see the module docstring). */
export class Ipv6Allocations {
  readonly prefix: string;
  private readonly base: bigint;
  private readonly byKey = new Map<string, V6Allocation>();
  /** Address (IPv6 or egress IPv4) → key string, for every held address. */
  private readonly held = new Map<string, string>();
  private readonly cooling = new Map<string, number>();
  private readonly quarantine = new Map<string, string>();
  private nextHost = 1n;
  private nextEgress = 1;

  /** @throws Error if the prefix is not an IPv6 /80 or the cooldown is negative. */
  constructor(private readonly o: Ipv6AllocationsOptions) {
    if (!(o.cooldownMs >= 0)) throw new RangeError(`cooldownMs must be >= 0, got ${o.cooldownMs}`);
    this.base = parsePrefix80(o.prefix);
    this.prefix = `${fromBig(this.base)}/80`;
  }

  /** True when `ip` is a /128 inside the node's /80. */
  inPrefix(ip: string): boolean {
    if (!ipaddr.IPv6.isValid(ip)) return false;
    return toBig(ipaddr.IPv6.parse(ip)) >> HOST_BITS === this.base >> HOST_BITS;
  }

  private usable(addr: string, now: number): boolean {
    if (this.held.has(addr) || this.quarantine.has(addr)) return false;
    const at = this.cooling.get(addr);
    if (at === undefined) return true;
    if (now - at >= this.o.cooldownMs) {
      this.cooling.delete(addr);
      return true;
    }
    return false;
  }

  private takeHost(now: number): string {
    for (let tries = 0; tries < 1_000_000; tries++) {
      const h = this.nextHost;
      this.nextHost = h + 1n >= HOSTS ? 1n : h + 1n;
      const addr = fromBig(this.base | h);
      if (this.usable(addr, now)) return addr;
    }
    throw new Error(`no free IPv6 address in ${this.prefix} within 1,000,000 tries`);
  }

  private takeEgress(now: number): string {
    for (let tries = 0; tries < EGRESS_HOSTS; tries++) {
      const i = this.nextEgress;
      this.nextEgress = i >= EGRESS_HOSTS ? 1 : i + 1;
      const addr = egressOf(i);
      if (this.usable(addr, now)) return addr;
    }
    throw new Error(`no free IPv4 egress address in 169.254.172.0/22 (${EGRESS_HOSTS} held, cooling or quarantined)`);
  }

  /**
   * The key's allocation, new or the one it holds (repeated ADD: `existing`).
   * `now` is the monotonic clock (cooldown); `wallMs` is stamped as `allocatedAt`.
   * @throws Error when the /80 or, in `ipv6` mode, the egress range has no usable address.
   */
  assign(
    key: AllocationKey,
    pod: PodRef | undefined,
    now: number,
    wallMs: number,
  ): { allocation: V6Allocation; existing: boolean } {
    const k = v6KeyOf(key);
    const had = this.byKey.get(k);
    if (had) return { allocation: had, existing: true };
    const egressV4 = this.o.egressV4 ? this.takeEgress(now) : '';
    const ipv6 = this.takeHost(now);
    const a: V6Allocation = {
      networkName: key.networkName,
      containerID: key.containerID,
      ifName: key.ifName,
      ipv6,
      egressV4,
      allocatedAt: wallMs,
      ...(pod ? { pod } : {}),
    };
    this.hold(a);
    return { allocation: a, existing: false };
  }

  private hold(a: V6Allocation): void {
    const k = v6KeyOf(a);
    this.byKey.set(k, a);
    this.held.set(a.ipv6, k);
    if (a.egressV4) this.held.set(a.egressV4, k);
  }

  private drop(a: V6Allocation): void {
    this.byKey.delete(v6KeyOf(a));
    this.held.delete(a.ipv6);
    if (a.egressV4) this.held.delete(a.egressV4);
  }

  /** Undoes an {@link assign} that could not be made durable (the addresses do not cool). */
  rollbackAssign(a: V6Allocation): void {
    if (this.byKey.get(v6KeyOf(a)) === a) this.drop(a);
  }

  /** Releases the key's addresses into cooldown; undefined when it held none. */
  unassign(key: AllocationKey, now: number): V6Allocation | undefined {
    const a = this.byKey.get(v6KeyOf(key));
    if (!a) return undefined;
    this.drop(a);
    this.cooling.set(a.ipv6, now);
    if (a.egressV4) this.cooling.set(a.egressV4, now);
    return a;
  }

  /** Undoes an {@link unassign} that could not be made durable. */
  rollbackUnassign(a: V6Allocation): void {
    this.cooling.delete(a.ipv6);
    if (a.egressV4) this.cooling.delete(a.egressV4);
    this.hold(a);
  }

  /** The key's allocation, or undefined. */
  lookup(key: AllocationKey): V6Allocation | undefined {
    return this.byKey.get(v6KeyOf(key));
  }

  /** Every allocation, in assignment order. */
  allocations(): V6Allocation[] {
    return [...this.byKey.values()];
  }

  /** Every quarantined address with its reason. */
  quarantined(): V6Quarantined[] {
    return [...this.quarantine].map(([address, reason]) => ({ address, reason }));
  }

  /**
   * Quarantines the /128s (and, in `ipv6` mode, the egress IPv4s of 169.254.172.0/22) the
   * kernel shows wired to pod veths that no allocation holds (the IPv6 checkpoint was lost
   * or set aside while pods ran): owner unknown, so never handed out. Other addresses
   * (outside the /80 or the egress range), held or already quarantined ones are skipped.
   * @param wired addresses (any IPv6 text form; dotted-quad IPv4) of the kernel's host routes to pod veths.
   * @returns the addresses quarantined by this call.
   */
  adoptWired(wired: Iterable<string>): V6Quarantined[] {
    const out: V6Quarantined[] = [];
    for (const ip of wired) {
      const v6 = this.inPrefix(ip);
      if (!v6 && !(this.o.egressV4 && egressIndex(ip) !== undefined)) continue;
      const address = v6 ? ipaddr.IPv6.parse(ip).toString() : ip;
      if (this.held.has(address) || this.quarantine.has(address)) continue;
      const reason = `${address} is wired to a pod veth but no IPv6 allocation holds it ${OWNER_UNKNOWN}`;
      this.quarantine.set(address, reason);
      out.push({ address, reason });
    }
    return out;
  }

  /** The addresses {@link adoptWired} quarantined (this start or, through the checkpoint, an earlier one) whose owner is still unknown. */
  unowned(): string[] {
    return [...this.quarantine].filter(([, why]) => why.endsWith(OWNER_UNKNOWN)).map(([address]) => address);
  }

  /**
   * Makes `a` an allocation again (the evidence names its owner: a READY sandbox with its
   * /128): its /128, and its egress IPv4 when set, leave the "owner unknown" quarantine
   * ({@link unowned}). Nothing changes (false) unless the /128 is an unowned one in the /80
   * in canonical form, the egress IPv4 (if any) is unowned too and allowed in this mode, and the key holds nothing.
   */
  claim(a: V6Allocation): boolean {
    const unowned = (x: string) => this.quarantine.get(x)?.endsWith(OWNER_UNKNOWN) === true;
    if (!this.inPrefix(a.ipv6) || !unowned(a.ipv6) || this.byKey.has(v6KeyOf(a))) return false;
    if (a.egressV4 && (!this.o.egressV4 || !unowned(a.egressV4))) return false;
    this.quarantine.delete(a.ipv6);
    if (a.egressV4) this.quarantine.delete(a.egressV4);
    this.hold(a);
    return true;
  }

  /** Frees the {@link unowned} addresses among `addresses` (no pod is wired to them any more) into cooldown; returns how many. */
  freeUnowned(addresses: Iterable<string>, now: number): number {
    let n = 0;
    for (const x of addresses)
      if (this.quarantine.get(x)?.endsWith(OWNER_UNKNOWN)) {
        this.quarantine.delete(x);
        this.cooling.set(x, now);
        n++;
      }
    return n;
  }

  /** The durable state, for the checkpoint; `now` drops cooldowns already over. */
  state(now: number): V6State {
    const cooling = [...this.cooling]
      .filter(([, at]) => now - at < this.o.cooldownMs)
      .map(([address, releasedAt]) => ({ address, releasedAt }));
    return {
      prefix: this.prefix,
      allocations: this.allocations(),
      cooling,
      quarantined: this.quarantined(),
      nextHost: this.nextHost.toString(),
      nextEgress: this.nextEgress,
    };
  }

  /**
   * Loads a checkpointed state (start-up, before serving). Allocations whose addresses are
   * implausible for this node are quarantined, never held or handed out.
   * @returns the allocations restored and the addresses quarantined by this call.
   */
  restore(s: Partial<V6State>): { restored: V6Allocation[]; quarantined: V6Quarantined[] } {
    const restored: V6Allocation[] = [];
    const quarantined: V6Quarantined[] = [];
    const q = (address: string, reason: string) => {
      if (this.held.has(address) || this.quarantine.has(address)) return;
      this.quarantine.set(address, reason);
      quarantined.push({ address, reason });
    };
    for (const e of s.quarantined ?? []) q(e.address, e.reason);
    for (const a of s.allocations ?? []) {
      const why = this.implausible(a);
      if (why) {
        q(a.ipv6, why);
        if (a.egressV4) q(a.egressV4, why);
        continue;
      }
      this.hold(a);
      restored.push(a);
    }
    for (const c of s.cooling ?? []) if (!this.held.has(c.address)) this.cooling.set(c.address, c.releasedAt);
    if (s.nextHost !== undefined && /^[0-9]+$/.test(s.nextHost)) {
      const n = BigInt(s.nextHost);
      if (n >= 1n && n < HOSTS) this.nextHost = n;
    }
    if (
      s.nextEgress !== undefined &&
      Number.isInteger(s.nextEgress) &&
      s.nextEgress >= 1 &&
      s.nextEgress <= EGRESS_HOSTS
    )
      this.nextEgress = s.nextEgress;
    return { restored, quarantined };
  }

  /** Why a checkpointed allocation cannot be held on this node, or undefined. */
  private implausible(a: V6Allocation): string | undefined {
    if (!this.inPrefix(a.ipv6)) return `${a.ipv6} is outside the node's IPv6 prefix ${this.prefix}`;
    const canon = ipaddr.IPv6.parse(a.ipv6).toString();
    if (canon !== a.ipv6) return `${a.ipv6} is not in canonical form (${canon})`;
    if (this.held.has(a.ipv6)) return `${a.ipv6} is held by two attachments`;
    if (this.quarantine.has(a.ipv6)) return `${a.ipv6} is quarantined`;
    if (this.byKey.has(v6KeyOf(a))) return `container ${a.containerID} holds two IPv6 allocations`;
    // '' in ipv6 mode: imported from aws-node, whose egress address is in its plugin's host-local store.
    if (this.o.egressV4 && a.egressV4 !== '' && egressIndex(a.egressV4) === undefined)
      return `egress address ${JSON.stringify(a.egressV4)} is outside 169.254.172.0/22`;
    if (!this.o.egressV4 && a.egressV4) return `egress address ${a.egressV4} in dual mode (none expected)`;
    if (a.egressV4 && this.held.has(a.egressV4)) return `egress address ${a.egressV4} is held by two attachments`;
    if (a.egressV4 && this.quarantine.has(a.egressV4)) return `egress address ${a.egressV4} is quarantined`;
    return undefined;
  }
}
