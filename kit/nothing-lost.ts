/**
 * The "nothing lost" check of docs/design.md#9-restore-sources-and-the-nothing-lost-check (docs/design.md#4-restore-after-restart), as a pure function over what the
 * test observed: the live CRI sandboxes, the simulated EC2 state and call log, and
 * ipamd's allocations after a GC pass. Separate from the node composition so the rules
 * read in one place.
 *
 * A pod is lost when its sandbox is READY but its IP is not on an attached ENI of the
 * instance any more, or when EC2 was asked to take its IP (UnassignPrivateIpAddresses,
 * by address or by the /28 prefix holding it) or its ENI (DetachNetworkInterface,
 * DeleteNetworkInterface) after the sandbox was created (EC2 API Reference for the three
 * actions; request parameters as in the Query API). With prefix delegation an ENI's
 * addresses are its secondary IPs plus every address of its delegated /28 prefixes.
 */
import ipaddr from 'ipaddr.js';
import type { ApiCallRecord, Eni, SimState } from '../sim/index.js';

/** One READY, non-host-network sandbox as the CRI runtime reports it. */
export interface LiveSandbox {
  id: string;
  /** Pod IP (`PodSandboxStatus.status.network.ip`). */
  ip: string;
  podName: string;
  podNamespace: string;
  /** Creation time, ms since epoch (CRI `created_at` is in ns). */
  createdAtMs: number;
}

/** Inputs of {@link findLosses}. */
export interface LossInput {
  live: LiveSandbox[];
  /** IP each sandbox got at RunPodSandbox (from the harness), by sandbox id; may lack adopted ones. */
  ipAtStart: ReadonlyMap<string, string>;
  /** IP configured on eth0 inside each sandbox's netns, by sandbox id (undefined: not checked). */
  ipInNetns?: ReadonlyMap<string, string | undefined>;
  sim: SimState;
  calls: readonly ApiCallRecord[];
  instanceId: string;
  /** ipamd's allocations (`GET /v1/allocations`) after a GC pass. */
  allocations: Array<{ containerID: string; ipv4: string }>;
  /**
   * When ipamd handed each sandbox its address (its "assigned IP" log line), ms since epoch, by
   * sandbox id. With it, an Unassign after the sandbox's creation is no loss when EC2 assigned
   * the address (or its /28) again after that Unassign had completed and before the hand-out:
   * the address was free when it was unassigned (a shrink during the sandbox's creation).
   */
  handedOutAt?: ReadonlyMap<string, number>;
}

/** Values of `Name.1`, `Name.2`, ... (and a bare `Name`) of a Query API request. */
export function listParam(params: Record<string, string>, name: string): string[] {
  const out: string[] = [];
  if (params[name] !== undefined) out.push(params[name]!);
  for (let i = 1; params[`${name}.${i}`] !== undefined; i++) out.push(params[`${name}.${i}`]!);
  return out;
}

/** Every address of an IPv4 CIDR (`10.0.0.16/28` → 10.0.0.16 … 10.0.0.31). @throws Error for a bad CIDR. */
export function prefixAddresses(cidr: string): string[] {
  const [base, len] = ipaddr.IPv4.parseCIDR(cidr);
  const first = base.toByteArray().reduce((v, b) => v * 256 + b, 0);
  return Array.from({ length: 2 ** (32 - len) }, (_, i) =>
    ipaddr.fromByteArray([...Array(4)].map((_, k) => ((first + i) >>> (24 - 8 * k)) & 255)).toString(),
  );
}

/** The addresses pods can get from an ENI: its secondary IPs and the addresses of its /28 prefixes. */
export function eniPodAddresses(e: Pick<Eni, 'secondaryIps' | 'ipv4Prefixes'>): string[] {
  return [...e.secondaryIps, ...e.ipv4Prefixes.flatMap(prefixAddresses)];
}

/**
 * Applies every rule of the check and returns one line per violation (empty = nothing
 * lost). Rules: each live sandbox kept the IP it started with (and has it on eth0); no
 * IP is held by two live sandboxes; each live IP is a secondary IP of an ENI attached
 * (status `attached`) to `instanceId`, or inside one of its /28 prefixes; no Unassign of a
 * live IP or of the prefix holding it, and no Detach/Delete of the ENI holding one, at or
 * after the sandbox's creation; ipamd's allocations are
 * exactly the live sandboxes (same container ids, same IPs).
 */
export function findLosses(i: LossInput): string[] {
  const bad: string[] = [];
  const byIp = new Map<string, LiveSandbox[]>();
  for (const s of i.live) byIp.set(s.ip, [...(byIp.get(s.ip) ?? []), s]);
  for (const [ip, holders] of byIp) {
    if (holders.length > 1)
      bad.push(`IP ${ip} is held by ${holders.length} live sandboxes: ${holders.map((h) => h.podName).join(', ')}`);
  }
  const eniOfIp = new Map<string, { eniId: string; attachmentId?: string; ok: boolean }>();
  for (const e of i.sim.enis.values()) {
    const ok = e.attachment?.instanceId === i.instanceId && e.attachment.status === 'attached';
    for (const ip of eniPodAddresses(e))
      eniOfIp.set(ip, {
        eniId: e.networkInterfaceId,
        ...(e.attachment ? { attachmentId: e.attachment.attachmentId } : {}),
        ok,
      });
  }
  for (const s of i.live) {
    const first = i.ipAtStart.get(s.id);
    if (first !== undefined && first !== s.ip)
      bad.push(`sandbox ${s.podName} started with ${first}, now reports ${s.ip}`);
    const inNs = i.ipInNetns?.get(s.id);
    if (i.ipInNetns && inNs !== s.ip)
      bad.push(`sandbox ${s.podName}: eth0 in its netns has ${inNs ?? 'no IPv4'}, CRI says ${s.ip}`);
    const eni = eniOfIp.get(s.ip);
    if (!eni) bad.push(`sandbox ${s.podName}: EC2 has its IP ${s.ip} on no ENI`);
    else if (!eni.ok)
      bad.push(`sandbox ${s.podName}: its IP ${s.ip} is on ${eni.eniId}, which is not attached to ${i.instanceId}`);
  }
  const liveByIp = new Map(i.live.map((s) => [s.ip, s]));
  const liveEnis = new Map<string, LiveSandbox>();
  const liveAttachments = new Map<string, LiveSandbox>();
  for (const s of i.live) {
    const e = eniOfIp.get(s.ip);
    if (e) liveEnis.set(e.eniId, s);
    if (e?.attachmentId) liveAttachments.set(e.attachmentId, s);
  }
  for (const c of i.calls) {
    if (c.action === 'UnassignPrivateIpAddresses') {
      const freeThen = (s: LiveSandbox, addr: string): boolean =>
        assignedAgainBefore(addr, c, i.calls, i.handedOutAt?.get(s.id));
      for (const ip of listParam(c.params, 'PrivateIpAddress')) {
        const s = liveByIp.get(ip);
        if (s && c.at >= s.createdAtMs && !freeThen(s, ip))
          bad.push(`UnassignPrivateIpAddresses of ${ip} (live pod ${s.podName}) at ${new Date(c.at).toISOString()}`);
      }
      for (const prefix of listParam(c.params, 'Ipv4Prefix')) {
        for (const ip of validPrefixAddresses(prefix)) {
          const s = liveByIp.get(ip);
          if (s && c.at >= s.createdAtMs && !freeThen(s, prefix))
            bad.push(
              `UnassignPrivateIpAddresses of prefix ${prefix}, which holds ${ip} (live pod ${s.podName}) at ${new Date(c.at).toISOString()}`,
            );
        }
      }
    } else if (c.action === 'DeleteNetworkInterface') {
      const s = liveEnis.get(c.params['NetworkInterfaceId'] ?? '');
      if (s && c.at >= s.createdAtMs)
        bad.push(
          `DeleteNetworkInterface of ${c.params['NetworkInterfaceId']}, which holds ${s.ip} (live pod ${s.podName})`,
        );
    } else if (c.action === 'DetachNetworkInterface') {
      const s = liveAttachments.get(c.params['AttachmentId'] ?? '');
      if (s)
        bad.push(
          `DetachNetworkInterface of ${c.params['AttachmentId']}, the ENI holding ${s.ip} (live pod ${s.podName})`,
        );
    }
  }
  const allocByIp = new Map(i.allocations.map((a) => [a.ipv4, a]));
  for (const s of i.live) {
    const a = allocByIp.get(s.ip);
    if (!a) bad.push(`ipamd holds no allocation for live pod ${s.podName} (${s.ip})`);
    else if (a.containerID !== s.id)
      bad.push(
        `ipamd gives ${s.ip} to container ${a.containerID.slice(0, 12)}, but live pod ${s.podName} is ${s.id.slice(0, 12)}`,
      );
  }
  for (const a of i.allocations) {
    if (!liveByIp.has(a.ipv4))
      bad.push(
        `ipamd still holds ${a.ipv4} for ${a.containerID.slice(0, 12)}, which no live sandbox uses (leak after a GC pass)`,
      );
  }
  return bad;
}

/**
 * True when a successful AssignPrivateIpAddresses gave `addr` (an address or a /28) back
 * after `unassign` had completed and itself completed at or before `handedOutAt` (ms).
 * False without a hand-out time or while the unassign has no answer.
 */
function assignedAgainBefore(
  addr: string,
  unassign: ApiCallRecord,
  calls: readonly ApiCallRecord[],
  handedOutAt: number | undefined,
): boolean {
  if (handedOutAt === undefined || unassign.durationMs === undefined) return false;
  const unassignedAt = unassign.at + unassign.durationMs;
  return calls.some(
    (a) =>
      a.action === 'AssignPrivateIpAddresses' &&
      a.ok &&
      a.durationMs !== undefined &&
      a.at >= unassignedAt &&
      a.at + a.durationMs <= handedOutAt &&
      (a.assigned ?? []).includes(addr),
  );
}

/** Addresses of a prefix from a request parameter; none when it is not a valid IPv4 CIDR. */
function validPrefixAddresses(cidr: string): string[] {
  return ipaddr.IPv4.isValidCIDRFourPartDecimal(cidr) ? prefixAddresses(cidr) : [];
}

/** EC2 actions that give an address back: the ones a release freeze must stop (UnassignIpv6Addresses: an IPv6 node's /80). */
export const RELEASE_ACTIONS = [
  'UnassignPrivateIpAddresses',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
  'UnassignIpv6Addresses',
] as const;

/** The release calls (see {@link RELEASE_ACTIONS}) in `calls` from index `from` on, as `Action(params)` lines. */
export function releaseCallsSince(calls: readonly ApiCallRecord[], from: number): string[] {
  return calls
    .slice(from)
    .filter((c) => (RELEASE_ACTIONS as readonly string[]).includes(c.action))
    .map(
      (c) =>
        `${c.action}(${Object.entries(c.params)
          .filter(([k]) => k !== 'Action' && k !== 'Version')
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')})`,
    );
}
