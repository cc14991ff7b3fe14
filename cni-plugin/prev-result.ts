/**
 * Reads what CHECK and DEL need out of `prevResult` (CNI spec, "Network configuration
 * lists": the result of the attachment's ADD, in the config's `cniVersion`): the pod
 * interface and its IPv4 address. Accepts every supported result shape (0.3.x/0.4.0
 * with `ips[].version`, 1.x without), and results of chains (other plugins' entries
 * are ignored).
 */
import { isIPv4 } from 'node:net';

/** The part of `prevResult` describing the pod attachment. */
export interface PrevAttachment {
  /** Pod IPv4, dotted quad without a prefix length. */
  ipv4: string;
  /** Prefix length the result gives the address (32 for this plugin's results). */
  prefixLen: number;
  /** The pod interface entry (`name` = CNI_IFNAME), when the result lists it. */
  podIf?: { name: string; mac?: string; sandbox?: string };
  /** The host-side interface entry (no `sandbox`), when the result lists one. */
  hostIf?: { name: string; mac?: string };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * Finds the attachment of `ifName` in `prevResult`: the first IPv4 `ips[]` entry whose
 * `interface` index points at the interface named `ifName` (or, when no entry has an
 * index, the first IPv4 entry).
 * @returns an error message instead when there is no usable IPv4 address.
 */
export function readPrevResult(prev: unknown, ifName: string): PrevAttachment | string {
  if (!isObj(prev)) return 'prevResult is missing';
  const ifaces = Array.isArray(prev.interfaces) ? prev.interfaces.filter(isObj) : [];
  const ips = Array.isArray(prev.ips) ? prev.ips.filter(isObj) : [];
  const podIdx = ifaces.findIndex((i) => i.name === ifName && str(i.sandbox));
  const v4 = ips.flatMap((ip) => {
    const [addr, len] = (str(ip.address) ?? '').split('/');
    return addr && isIPv4(addr)
      ? [{ addr, len: Number(len ?? 32), index: typeof ip.interface === 'number' ? ip.interface : undefined }]
      : [];
  });
  const pick =
    v4.find((ip) => podIdx >= 0 && ip.index === podIdx) ??
    (v4.every((ip) => ip.index === undefined) ? v4[0] : undefined);
  if (!pick) return `prevResult has no IPv4 address for interface ${ifName}`;
  const out: PrevAttachment = { ipv4: pick.addr, prefixLen: Number.isInteger(pick.len) ? pick.len : 32 };
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
