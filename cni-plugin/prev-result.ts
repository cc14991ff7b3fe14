/**
 * Reads what CHECK and DEL need out of `prevResult` (CNI spec, "Network configuration
 * lists": the result of the attachment's ADD, in the config's `cniVersion`): the pod
 * interface and its IPv4 and/or IPv6 address, and an IPv6 pod's IPv4 egress address on
 * `v4if0`. Accepts every supported result shape (0.3.x/0.4.0 with `ips[].version`, 1.x
 * without; the family is read from the address itself), and results of chains (other
 * plugins' entries are ignored).
 */
import { isIPv4, isIPv6 } from 'node:net';
import { EGRESS_IFNAME } from './families.js';

/** The part of `prevResult` describing the pod attachment. */
export interface PrevAttachment {
  /** Pod IPv4, dotted quad without a prefix length; '' when the pod has none (IPv6 only). */
  ipv4: string;
  /** Prefix length the result gives the IPv4 (32 for this plugin's results). */
  prefixLen: number;
  /** Pod IPv6 without a prefix length, when the result gives one. */
  ipv6?: string;
  /** Prefix length the result gives the IPv6 (128 for this plugin's results). */
  ipv6PrefixLen?: number;
  /** The IPv4 address on `v4if0` (an IPv6 pod's egress), when the result lists one. */
  egressV4?: string;
  /** The pod interface entry (`name` = CNI_IFNAME), when the result lists it. */
  podIf?: { name: string; mac?: string; sandbox?: string };
  /** The host-side interface entry (no `sandbox`), when the result lists one. */
  hostIf?: { name: string; mac?: string };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

type Entry = { addr: string; len: number; index: number | undefined };

/** The `ips[]` entries of family `is` (isIPv4/isIPv6), with their prefix length (default `full`). */
function entries(ips: Obj[], is: (a: string) => boolean, full: number): Entry[] {
  return ips.flatMap((ip) => {
    const [addr, len] = (str(ip.address) ?? '').split('/');
    const n = Number(len ?? full);
    return addr && is(addr)
      ? [
          {
            addr,
            len: Number.isInteger(n) ? n : full,
            index: typeof ip.interface === 'number' ? ip.interface : undefined,
          },
        ]
      : [];
  });
}

/** The entry on interface `idx`, or (when no entry has an index) the first one. */
const pickOn = (list: Entry[], idx: number): Entry | undefined =>
  list.find((ip) => idx >= 0 && ip.index === idx) ?? (list.every((ip) => ip.index === undefined) ? list[0] : undefined);

/**
 * Finds the attachment of `ifName` in `prevResult`: the first IPv4 and the first IPv6
 * `ips[]` entry whose `interface` index points at the interface named `ifName` (or, when
 * no entry of that family has an index, its first entry), and the IPv4 entry on `v4if0`.
 * @returns an error message instead when there is neither an IPv4 nor an IPv6 address.
 */
export function readPrevResult(prev: unknown, ifName: string): PrevAttachment | string {
  if (!isObj(prev)) return 'prevResult is missing';
  const ifaces = Array.isArray(prev.interfaces) ? prev.interfaces.filter(isObj) : [];
  const ips = Array.isArray(prev.ips) ? prev.ips.filter(isObj) : [];
  const podIdx = ifaces.findIndex((i) => i.name === ifName && str(i.sandbox));
  const egressIdx = ifaces.findIndex((i) => i.name === EGRESS_IFNAME && str(i.sandbox));
  const v4s = entries(ips, isIPv4, 32);
  const v4 = pickOn(egressIdx >= 0 ? v4s.filter((e) => e.index !== egressIdx) : v4s, podIdx);
  const v6 = pickOn(entries(ips, isIPv6, 128), podIdx);
  if (!v4 && !v6) return `prevResult has no IPv4 or IPv6 address for interface ${ifName}`;
  const out: PrevAttachment = { ipv4: v4?.addr ?? '', prefixLen: v4?.len ?? 32 };
  if (v6) {
    out.ipv6 = v6.addr;
    out.ipv6PrefixLen = v6.len;
  }
  const egress = egressIdx >= 0 ? v4s.find((e) => e.index === egressIdx) : undefined;
  if (egress) out.egressV4 = egress.addr;
  const pod = podIdx >= 0 ? ifaces[podIdx] : undefined;
  if (pod)
    out.podIf = {
      name: ifName,
      ...(str(pod.mac) ? { mac: str(pod.mac)!.toLowerCase() } : {}),
      ...(str(pod.sandbox) ? { sandbox: str(pod.sandbox)! } : {}),
    };
  const host = ifaces.find((i) => !str(i.sandbox) && str(i.name));
  if (host) out.hostIf = { name: str(host.name)!, ...(str(host.mac) ? { mac: str(host.mac)!.toLowerCase() } : {}) };
  return out;
}
