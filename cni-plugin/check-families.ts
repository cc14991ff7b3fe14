/**
 * The family-aware parts of CHECK (check.ts; issue #31): what ipamd holds versus what
 * prevResult names (IPv4, IPv6, an IPv6 pod's egress IPv4: all of them, never one
 * without the other), and the IPv6 side and egress pair of the kernel state
 * (check-drift-v6.ts, check-drift.ts for the egress pair). Pure.
 */
import type { CheckNetworkReply } from '../proto/ipam.js';
import type { IpJson } from '../netfacts/ip-query.js';
import { findDrift, type NodeState, type PodState } from './check-drift.js';
import { findDriftV6 } from './check-drift-v6.js';
import type { PrevAttachment } from './prev-result.js';
import { egressVeth, egressVethNames, type WiringPlan } from './wiring-plan.js';

/** The `ip -batch` show line listing every IPv6 route (`route show` alone lists IPv4 only). */
export const V6_ROUTES = 'route show table all root ::/0';

/**
 * Differences between what ipamd holds for the key (`held`) and what `prev` names.
 * `key` describes the allocation key for messages.
 */
export function heldProblems(held: CheckNetworkReply, prev: PrevAttachment, key: string): string[] {
  const names = [prev.ipv4, prev.ipv6, prev.egressV4].filter(Boolean).join(' + ');
  if (!held.held) return [`ipamd holds no IP for ${key} (prevResult says ${names})`];
  const p: string[] = [];
  const pairs: [string, string, string][] = [
    ['', held.ipv4_addr, prev.ipv4],
    ['IPv6', held.ipv6_addr ?? '', prev.ipv6 ?? ''],
    ['IPv4 egress', held.egress_v4_addr ?? '', prev.egressV4 ?? ''],
  ];
  for (const [family, have, want] of pairs) {
    if (have !== want)
      p.push(
        `ipamd holds ${have ? `${family} ${have}`.trim() : `no ${family || 'IPv4'}`} for this container, prevResult says ${want || 'none'}`,
      );
  }
  return p;
}

/**
 * Which name the attachment's host veth has in `links` (`ip -json link show` of the
 * node): the first of `names` (veth-name.ts `hostVethNames`, current first) present with
 * `mac`, else any link with `mac` (a veth ADD named after a pod this CHECK's CNI_ARGS do
 * not name: the MAC comes from the attachment's key); `names[0]` when none is (then CHECK
 * reports it missing under its current name).
 */
export function presentVethName(links: readonly IpJson[], names: readonly string[], mac: string): string {
  const hasMac = (l: IpJson) => typeof l.address === 'string' && l.address.toLowerCase() === mac;
  const byName = names.find((n) => links.some((l) => l.ifname === n && hasMac(l)));
  const byMac = links.find(hasMac)?.ifname;
  return byName ?? (typeof byMac === 'string' ? byMac : names[0]!);
}

/** The IPv6 side (when `prev` has an IPv6) and the egress pair (when it has an egress address) of `plan`. */
export function familyDrift(
  plan: WiringPlan,
  prev: PrevAttachment,
  vethPrefix: string,
  containerId: string,
  state: { pod: PodState & { routes6: IpJson[] }; node: NodeState & { routes6: IpJson[] } },
): string[] {
  const p: string[] = [];
  const hostLink = state.node.links.find((l) => l.ifname === plan.hostVeth);
  const hostMac = typeof hostLink?.address === 'string' ? hostLink.address.toLowerCase() : plan.hostMac;
  if (prev.ipv6)
    p.push(
      ...findDriftV6(
        { netns: plan.netns, ifName: plan.ifName, ipv6: prev.ipv6, hostVeth: plan.hostVeth, hostMac },
        state.pod,
        state.node,
      ),
    );
  if (prev.egressV4) {
    const e = egressVeth(containerId, plan.ifName);
    e.hostVeth = presentVethName(state.node.links, egressVethNames(vethPrefix, containerId, plan.ifName), e.hostMac);
    p.push(
      ...findDrift(
        {
          netns: plan.netns,
          ifName: e.ifName,
          ipv4: prev.egressV4,
          hostVeth: e.hostVeth,
          hostMac: e.hostMac,
          podMac: e.podMac,
          rules: [],
        },
        state.pod,
        state.node,
      ),
    );
  }
  return p;
}
