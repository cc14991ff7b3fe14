/**
 * The safety audit of the property test, pure: "at no moment is an IP held by a pod
 * also being released in EC2". Inputs are what the test saw from outside ipamd — the
 * pods' hold intervals (from ADD/DEL replies) and the simulated cloud's call log — so it
 * keeps working whatever ipamd's internals become.
 *
 * A pod holds its IP from the moment its ADD reply arrived until the moment its DEL was
 * sent (a failed DEL keeps it held). A release call is "in flight" from its arrival at
 * the simulated EC2 (`at`) until it answered (`at + durationMs`; unanswered = forever),
 * whether it succeeded or not: asking EC2 to take a held IP is the violation, even if
 * EC2 refused. Release calls (EC2 API Reference):
 *   - UnassignPrivateIpAddresses: `PrivateIpAddress.N` and `Ipv4Prefix.N` (a /28 covers 16 IPs)
 *   - DetachNetworkInterface: `AttachmentId` → the ENI it attached
 *   - DeleteNetworkInterface: `NetworkInterfaceId`
 */
import ipaddr from 'ipaddr.js';
import type { ApiCallRecord } from '../../sim/index.js';

/** One pod's hold of an IP (times in ms since epoch, Date.now clock). */
export interface Hold {
  containerId: string;
  ip: string;
  /** ENI the ADD reply named. */
  eniId: string;
  from: number;
  /** Infinity while still held. */
  to: number;
}

/** The EC2 actions that take addresses away. */
export const RELEASE_ACTIONS: ReadonlySet<string> = new Set([
  'UnassignPrivateIpAddresses',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
]);

/** Values of `Name.1`, `Name.2`, ... (and a bare `Name`) of a Query API request. */
export function listParam(params: Record<string, string>, name: string): string[] {
  const out: string[] = [];
  if (params[name] !== undefined) out.push(params[name]!);
  for (let i = 1; params[`${name}.${i}`] !== undefined; i++) out.push(params[`${name}.${i}`]!);
  return out;
}

/** True if IPv4 `ip` is inside IPv4 CIDR `cidr`. */
export function inCidr(ip: string, cidr: string): boolean {
  try {
    return ipaddr.IPv4.parse(ip).match(ipaddr.IPv4.parseCIDR(cidr));
  } catch {
    return false;
  }
}

/** Inputs of {@link auditReleases}. */
export interface AuditInput {
  holds: readonly Hold[];
  calls: readonly ApiCallRecord[];
  /** AttachmentId → ENI id, for every attachment ever seen. */
  attachmentEni: ReadonlyMap<string, string>;
  /** Only calls concerning this instance are audited (calls without instanceId are kept). */
  instanceId?: string;
}

/** One violation, as a line for the failure message. */
export type Violation = string;

/**
 * Returns one line per (release call, held IP) pair whose intervals overlap. Empty =
 * the property held. Runs in O(calls × holds of the ENIs/IPs named), fine for 10^5.
 */
export function auditReleases(i: AuditInput): Violation[] {
  const out: Violation[] = [];
  const byIp = new Map<string, Hold[]>();
  const byEni = new Map<string, Hold[]>();
  for (const h of i.holds) {
    byIp.set(h.ip, [...(byIp.get(h.ip) ?? []), h]);
    byEni.set(h.eniId, [...(byEni.get(h.eniId) ?? []), h]);
  }
  const overlaps = (c: ApiCallRecord, h: Hold) =>
    c.at <= h.to && (c.durationMs === undefined ? Infinity : c.at + c.durationMs) >= h.from;
  const when = (c: ApiCallRecord) =>
    `${new Date(c.at).toISOString()} +${c.durationMs ?? '∞'} ms (${c.ok ? 'ok' : (c.errorCode ?? 'in flight')})`;
  const held = (h: Hold) =>
    `held by ${h.containerId} from ${new Date(h.from).toISOString()} to ${Number.isFinite(h.to) ? new Date(h.to).toISOString() : 'now'}`;
  for (const c of i.calls) {
    if (!RELEASE_ACTIONS.has(c.action)) continue;
    if (i.instanceId && c.instanceId && c.instanceId !== i.instanceId) continue;
    if (c.action === 'UnassignPrivateIpAddresses') {
      for (const ip of listParam(c.params, 'PrivateIpAddress')) {
        for (const h of byIp.get(ip) ?? [])
          if (overlaps(c, h)) out.push(`UnassignPrivateIpAddresses of ${ip} at ${when(c)}, ${held(h)}`);
      }
      for (const prefix of listParam(c.params, 'Ipv4Prefix')) {
        for (const h of i.holds)
          if (inCidr(h.ip, prefix) && overlaps(c, h))
            out.push(`UnassignPrivateIpAddresses of prefix ${prefix} at ${when(c)}, ${h.ip} ${held(h)}`);
      }
    } else {
      const eniId =
        c.action === 'DeleteNetworkInterface'
          ? (c.params.NetworkInterfaceId ?? '')
          : (i.attachmentEni.get(c.params.AttachmentId ?? '') ?? '');
      for (const h of byEni.get(eniId) ?? [])
        if (overlaps(c, h)) out.push(`${c.action} of ${eniId} at ${when(c)}, its IP ${h.ip} ${held(h)}`);
    }
  }
  return out;
}
