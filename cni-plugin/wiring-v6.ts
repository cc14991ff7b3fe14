/**
 * `ip -batch` lines of the IPv6 side of a pod and of its IPv4 egress pair (issue #31;
 * docs/design.md#ip-families), appended by wiring.ts to the same two batches as the IPv4
 * lines (node side and pod side), so no process is added per family.
 *
 * IPv6 on CNI_IFNAME: pod side `::/0 via fe80::1 dev <if>`, a permanent neighbour
 * `fe80::1 → host veth MAC` (the gateway is never resolved, like 169.254.1.1 for IPv4;
 * the pod routes via it whether or not the host end has that address), and
 * `<ip6>/128 nodad`: duplicate address detection is skipped because ipamd hands each /128
 * to one pod only, so ADD never waits for DAD (upstream waits up to 10 s) and the address
 * is usable the moment ADD returns. Node side: `<ip6>/128 dev <host veth>` (added, never
 * replaced: the conflict check of wiring.ts covers it as it covers IPv4) and a permanent
 * neighbour `<ip6> → pod MAC` so the node never solicits the pod either.
 *
 * IPv4 egress of an IPv6 pod: a second veth pair (pod end `v4if0`) wired exactly like an
 * IPv4 pod's eth0 (169.254.1.1 gateway, permanent neighbour, `/32`, host route) with the
 * egress address from 169.254.172.0/22, without ip rules (the range never leaves the
 * node unSNATed: netfacts/egress-v4.ts).
 */
import { podHostRoute, routeLine } from '../netfacts/ip-route.js';
import { POD_GATEWAY_V6, POD_V6_PREFIX_LEN } from './families.js';
import { POD_GATEWAY } from './result.js';
import { hasV6, type EgressVeth, type VethPlan, type WiringPlan } from './wiring-plan.js';

/** Node-side lines creating the egress pair (peer straight into the pod netns). */
export function egressVethLines(p: VethPlan): string[] {
  const e = p.egress;
  if (!e) return [];
  return [
    `link add name ${e.hostVeth} address ${e.hostMac} mtu ${p.mtu} type veth peer name ${e.ifName} address ${e.podMac} mtu ${p.mtu} netns ${p.netns}`,
    `link set dev ${e.hostVeth} up`,
  ];
}

/** Pod-side IPv4 gateway lines on `ifName` toward `hostMac` (eth0 of an IPv4 pod, v4if0 of an IPv6 pod). */
export function v4GatewayLines(ifName: string, hostMac: string): string[] {
  return [
    `route replace ${POD_GATEWAY} dev ${ifName} scope link`,
    `route replace default via ${POD_GATEWAY} dev ${ifName}`,
    `neigh replace ${POD_GATEWAY} lladdr ${hostMac} dev ${ifName} nud permanent`,
  ];
}

/** Pod-side lines that need no address for the IPv6 family and the egress pair. */
export function podV6RouteLines(p: VethPlan): string[] {
  const lines: string[] = [];
  if (hasV6(p.family)) {
    lines.push(
      `route replace ::/0 via ${POD_GATEWAY_V6} dev ${p.ifName}`,
      `neigh replace ${POD_GATEWAY_V6} lladdr ${p.hostMac} dev ${p.ifName} nud permanent`,
    );
  }
  if (p.egress) lines.push(`link set dev ${p.egress.ifName} up`, ...v4GatewayLines(p.egress.ifName, p.egress.hostMac));
  return lines;
}

/** Pod-side address lines for IPv6 (`/128 nodad`) and the egress `/32`. */
export function podV6AddressLines(p: WiringPlan): string[] {
  const lines: string[] = [];
  if (p.ipv6) lines.push(`addr replace ${p.ipv6}/${POD_V6_PREFIX_LEN} dev ${p.ifName} nodad`);
  if (p.egress && p.egressV4) lines.push(`addr replace ${p.egressV4}/32 dev ${p.egress.ifName}`);
  return lines;
}

/** The node's route to the pod's IPv6, e.g. `2600:1f14::5/128 dev eni1a2b scope link`. */
export function podHostRouteV6(ipv6: string, hostVeth: string): ReturnType<typeof podHostRoute> {
  return { dst: `${ipv6}/${POD_V6_PREFIX_LEN}`, dev: hostVeth, type: 'unicast' };
}

/**
 * Node-side lines for the IPv6 address (host route, permanent neighbour) and the egress
 * address (host route, no rules). Routes are `add`ed unless `route` says `replace`.
 */
export function hostV6RouteLines(p: WiringPlan, route: 'add' | 'replace' = 'add'): string[] {
  const lines: string[] = [];
  if (p.ipv6) {
    lines.push(
      routeLine(route, podHostRouteV6(p.ipv6, p.hostVeth)),
      `neigh replace ${p.ipv6} lladdr ${p.podMac} dev ${p.hostVeth} nud permanent`,
    );
  }
  if (p.egress && p.egressV4) lines.push(routeLine(route, podHostRoute(p.egressV4, p.egress.hostVeth)));
  return lines;
}

/**
 * Per-interface IPv6 settings of a host veth (ip-sysctl.rst, "conf/interface/*"), as
 * upstream hardens its host veths: `accept_ra=0` (a pod's router advertisement never
 * configures the node), `accept_redirects=1`, `forwarding=0` (the veth is a host
 * interface, not a router port: the node's forwarding is `conf/all/forwarding`).
 */
export const HOST_VETH_V6_SYSCTLS: readonly (readonly [string, string])[] = [
  ['accept_ra', '0'],
  ['accept_redirects', '1'],
  ['forwarding', '0'],
];

/** The egress pair of a plan as a plan of its own (for CHECK's and teardown's IPv4 logic). */
export function egressAsPlan(p: WiringPlan, e: EgressVeth): WiringPlan {
  return {
    netns: p.netns,
    ifName: e.ifName,
    hostVeth: e.hostVeth,
    hostMac: e.hostMac,
    podMac: e.podMac,
    ipv4: p.egressV4 ?? '',
    mtu: p.mtu,
    routeTableId: 0,
  };
}
