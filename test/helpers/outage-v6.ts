/**
 * The IPv6 mode of the outage bench (outage-bench.ts; issue #31 item 5): ipamd with
 * ENABLE_IPv6=true, ENABLE_IPv4=false and prefix delegation, the conflist's eni-ipam entry
 * asking for `ipFamily: ipv6`, the sim's VPC with an IPv6 /56 (buildNode `ipv6`). Each pod
 * gets a /128 from the primary ENI's /80 on `eth0` and an egress IPv4 from
 * 169.254.172.0/22 on `v4if0` (docs/design.md#ip-families).
 *
 * A release in IPv6 mode is no EC2 call: ipamd puts the /128 (and the egress IPv4) into
 * cooldown and logs {@link V6_GC_RELEASE_MSG}; the one EC2 release is
 * UnassignIpv6Addresses of the /80, which would take every pod. Both count here. The
 * nothing-lost check reads ipamd's IPv6 checkpoint (`<checkpoint>.ipv6`, written before
 * every ADD and DEL is answered), the record of what was acknowledged (`GET /v1/allocations`
 * lists the same attachments, but only while ipamd runs).
 */
import assert from 'node:assert/strict';
import ipaddr from 'ipaddr.js';
import { ipv6CheckpointPath, readIpv6Checkpoint } from '../../ipamd/checkpoint/ipv6-file.js';
import type { ContainerdNode } from '../../kit/containerd-node.js';
import { ipIn } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { ipamdLog } from './restore-logs.js';

/** ipamd's IPv6-mode variables (as upstream: IPv6 needs prefix delegation). */
export const IPV6_MODE_ENV: NodeJS.ProcessEnv = {
  ENABLE_IPv6: 'true',
  ENABLE_IPv4: 'false',
  ENABLE_PREFIX_DELEGATION: 'true',
};
/** The keys the IPv6 conflist adds to the eni-ipam entry (ipamd's cni-install writes the same). */
export const IPV6_PLUGIN_CONFIG = { ipFamily: 'ipv6' };
/** ipamd's log message when the evidence pass releases an IPv6 allocation (restore/v6-evidence.ts). */
export const V6_GC_RELEASE_MSG = 'GC: no source vouches for this IPv6 allocation; released into cooldown';
/** ipamd's log message of an IPv6 ADD it answered (service/family-service.ts). */
export const V6_ASSIGNED_MSG = 'assigned IPv6';

/** A live IPv6 pod: its sandbox, the /128 containerd reports, and what its netns holds. */
export interface V6Pod {
  id: string;
  podName: string;
  createdAtMs: number;
  /** The /128 of `PodSandboxStatus.status.network.ip`. */
  ipv6: string;
  /** The global /128 on `eth0` inside the pod's netns (undefined: none). */
  eth0?: string;
  /** The IPv4 on `v4if0` inside the pod's netns (undefined: none). */
  egress?: string;
}

/** IPv6 text in one canonical form (`ipaddr.js` short form), so containerd's and the kernel's text compare. */
const canon6 = (ip: string): string => ipaddr.IPv6.parse(ip).toString();

/** Every READY sandbox of `n` with the /128 containerd reports and the addresses read inside its netns. */
export async function readV6Pods(n: ContainerdNode): Promise<V6Pod[]> {
  const out: V6Pod[] = [];
  for (const s of await n.liveSandboxes()) {
    const ns = await n.cri.netnsPath(s.id);
    const read = (args: string[]) => (ns ? ipIn(ns, args).catch(() => '') : Promise.resolve(''));
    const eth0 = /inet6 ([0-9a-f:]+)\/128/.exec(
      await read(['-6', '-o', 'addr', 'show', 'dev', 'eth0', 'scope', 'global']),
    )?.[1];
    const egress = /inet (\d+\.\d+\.\d+\.\d+)\/32/.exec(await read(['-4', '-o', 'addr', 'show', 'dev', 'v4if0']))?.[1];
    out.push({
      id: s.id,
      podName: s.podName,
      createdAtMs: s.createdAtMs,
      ipv6: s.ip.includes(':') ? canon6(s.ip) : s.ip,
      ...(eth0 ? { eth0: canon6(eth0) } : {}),
      ...(egress ? { egress } : {}),
    });
  }
  return out;
}

/** The /80 delegated to the primary ENI of `n`'s instance, or undefined when it has none. */
export function nodePrefix80(n: ContainerdNode): string | undefined {
  const inst = n.sim.state.instances.get(n.instanceId);
  return inst ? n.sim.state.enis.get(inst.primaryEniId)?.ipv6Prefixes[0] : undefined;
}

/** True when `ip` is an IPv6 address inside `cidr`. */
function inCidr6(ip: string, cidr: string | undefined): boolean {
  if (!cidr || !ipaddr.IPv6.isValid(ip)) return false;
  return ipaddr.IPv6.parse(ip).match(ipaddr.IPv6.parseCIDR(cidr));
}

/** /128s and egress IPv4s held by more than one pod, as `ip: podA, podB`. */
export function duplicateV6(pods: V6Pod[]): string[] {
  const by = new Map<string, string[]>();
  for (const p of pods) for (const ip of [p.ipv6, p.egress]) if (ip) by.set(ip, [...(by.get(ip) ?? []), p.podName]);
  return [...by].filter(([, who]) => who.length > 1).map(([ip, who]) => `${ip}: ${who.join(', ')}`);
}

/**
 * The pods' checks of IPv6 mode: `ipAtStart` (sandbox id → /128 at RunPodSandbox) kept,
 * containerd's /128 on `eth0` and inside the node's /80, an egress IPv4 on `v4if0`, no
 * address on two pods. @returns one line per violation.
 */
export function v6PodProblems(
  pods: V6Pod[],
  prefix: string | undefined,
  ipAtStart: ReadonlyMap<string, string>,
): string[] {
  const bad: string[] = [];
  for (const p of pods) {
    const first = ipAtStart.get(p.id);
    if (first !== undefined && canon6(first) !== p.ipv6) bad.push(`${p.podName} started with ${first}, now ${p.ipv6}`);
    if (p.eth0 !== p.ipv6)
      bad.push(`${p.podName}: eth0 in its netns has ${p.eth0 ?? 'no /128'}, containerd says ${p.ipv6}`);
    if (!inCidr6(p.ipv6, prefix)) bad.push(`${p.podName}: ${p.ipv6} is outside the node's /80 ${prefix ?? '(none)'}`);
    if (!p.egress) bad.push(`${p.podName}: no egress IPv4 on v4if0`);
  }
  for (const d of duplicateV6(pods)) bad.push(`held by two pods: ${d}`);
  return bad;
}

/**
 * The pods' checks ({@link v6PodProblems}) over every live pod of `n`, `pods` kept their /128s.
 * @returns `pods`. @throws AssertionError listing the problems.
 */
export async function assertV6Pods<T extends { id: string; ip: string }>(n: ContainerdNode, pods: T[]): Promise<T[]> {
  const bad = v6PodProblems(await readV6Pods(n), nodePrefix80(n), new Map(pods.map((p) => [p.id, p.ip])));
  assert.deepEqual(bad, [], 'the IPv6 pods');
  return pods;
}

/** One IPv6 release ipamd logged. */
interface V6Release {
  containerID: string;
  ipv6: string;
  egressV4: string | null;
  time: number;
}

/**
 * The releases since `sinceMs` that took a live pod's address: an evidence release of a
 * /128 or egress IPv4 a pod created before it holds, and any UnassignIpv6Addresses (the
 * /80 holds every pod's /128). @returns the lines and the pods hit.
 */
export async function liveV6Releases(
  n: ContainerdNode,
  pods: V6Pod[],
  sinceMs: number,
  sinceCall: number,
): Promise<{ calls: string[]; pods: Set<string> }> {
  const out: string[] = [];
  const hit = new Set<string>();
  const logged = (await ipamdLog(n.ipamdLog, V6_GC_RELEASE_MSG)) as unknown as V6Release[];
  for (const r of logged.filter((l) => l.time >= sinceMs)) {
    const took = pods.filter((p) => p.createdAtMs <= r.time && (p.ipv6 === canon6(r.ipv6) || p.egress === r.egressV4));
    for (const p of took) hit.add(p.id);
    if (took.length)
      out.push(`GC released ${r.ipv6}/${r.egressV4 ?? ''} of live ${took.map((p) => p.podName).join(', ')}`);
  }
  for (const c of n.sim.calls.slice(sinceCall).filter((x) => x.action === 'UnassignIpv6Addresses')) {
    for (const p of pods) hit.add(p.id);
    out.push(`UnassignIpv6Addresses ${JSON.stringify(c.params)} took the /80 of every live pod`);
  }
  return { calls: out, pods: hit };
}

/**
 * The nothing-lost check of IPv6 mode, after a GC pass with releases unfrozen: the pods'
 * checks ({@link v6PodProblems}); ipamd's IPv6 checkpoint holds exactly the live pods
 * (same container, /128 and egress IPv4) and quarantines none of their addresses (a
 * quarantined address is never freed by its pod's DEL); the /80 was never unassigned.
 * @throws AssertionError listing every violation.
 */
export async function assertNothingLostV6(n: ContainerdNode): Promise<void> {
  await n.waitForGcPass();
  const s = await waitFor(
    'releases unfrozen after the GC pass',
    async () => ((await n.status()).releasesFrozen ? undefined : true),
    30_000,
    100,
  ).catch(() => false);
  assert.ok(s, `releases still frozen: ${(await n.status()).freezeReasons.join('; ')}`);
  const pods = await readV6Pods(n);
  const bad = v6PodProblems(pods, nodePrefix80(n), new Map([...n.pods.values()].map((p) => [p.id, p.ip])));
  const cp = await readIpv6Checkpoint(ipv6CheckpointPath(n.checkpoint));
  const held = new Map((cp?.allocations ?? []).map((a) => [a.containerID, a]));
  for (const p of pods) {
    const a = held.get(p.id);
    if (!a) bad.push(`ipamd holds no IPv6 allocation for live pod ${p.podName} (${p.ipv6}, egress ${p.egress ?? '-'})`);
    else if (canon6(a.ipv6) !== p.ipv6 || a.egressV4 !== (p.egress ?? ''))
      bad.push(`ipamd holds ${a.ipv6}/${a.egressV4} for ${p.podName}, which has ${p.ipv6}/${p.egress ?? '-'}`);
    held.delete(p.id);
  }
  for (const a of held.values())
    bad.push(`ipamd still holds ${a.ipv6}/${a.egressV4} for ${a.containerID.slice(0, 12)}, which no live sandbox is`);
  const q = new Set((cp?.quarantined ?? []).map((x) => (x.address.includes(':') ? canon6(x.address) : x.address)));
  for (const p of pods)
    for (const ip of [p.ipv6, p.egress])
      if (ip && q.has(ip)) bad.push(`${p.podName}'s ${ip} is quarantined: its DEL would never free it`);
  if (n.sim.calls.some((c) => c.action === 'UnassignIpv6Addresses')) bad.push('UnassignIpv6Addresses was called');
  assert.deepEqual(bad, [], `IPv6 nothing-lost check failed (${pods.length} live pods):\n${bad.join('\n')}`);
}

/**
 * DEL of every pod of `n` (StopPodSandbox + RemovePodSandbox, as kubelet), all of which
 * must succeed; then ipamd's IPv6 checkpoint holds no allocation and quarantines none of
 * the deleted pods' addresses (each DEL freed its /128 and egress IPv4).
 * @throws AssertionError listing the failed DELs and the addresses not freed.
 */
export async function deleteAllV6(n: ContainerdNode): Promise<void> {
  const pods = await readV6Pods(n);
  const failed: string[] = [];
  for (const p of [...n.pods.values()])
    await n.removePod(p.id).catch((e: Error) => failed.push(`DEL of ${p.name}: ${e.message.split('\n')[0]}`));
  const cp = await readIpv6Checkpoint(ipv6CheckpointPath(n.checkpoint));
  for (const a of cp?.allocations ?? [])
    failed.push(`ipamd still holds ${a.ipv6}/${a.egressV4} for ${a.containerID.slice(0, 12)} after every DEL`);
  const q = new Set((cp?.quarantined ?? []).map((x) => (x.address.includes(':') ? canon6(x.address) : x.address)));
  for (const p of pods)
    for (const ip of [p.ipv6, p.egress])
      if (ip && q.has(ip)) failed.push(`${p.podName}'s ${ip} stays quarantined after its DEL (leaked)`);
  assert.deepEqual(failed, [], `DEL of every pod (${pods.length}):\n${failed.join('\n')}`);
}
