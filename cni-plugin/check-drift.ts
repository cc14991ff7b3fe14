/**
 * CHECK's comparison (CNI spec 0.4.0+, "CHECK"): what ADD set up for one attachment
 * versus what the kernel holds now, as precise one-line problems. Pure: the state comes
 * in as iproute2 JSON (`ip -json addr|route|neigh|link|rule show`).
 */
import type { IpJson } from '../netfacts/ip-query.js';
import { routeFromJson, routesTo, type RouteJson } from '../netfacts/ip-route.js';
import type { IpRule } from '../netfacts/ip-rule.js';
import { formatRule, ruleMatches } from './pod-rules.js';
import { POD_GATEWAY } from './result.js';

/** What should exist for the attachment. */
export interface ExpectedAttachment {
  /** Pod netns path (CNI_NETNS), used in messages. */
  netns: string;
  /** Pod interface (CNI_IFNAME). */
  ifName: string;
  /** Pod IPv4 from prevResult; '' for an IPv6-only pod (no IPv4 part checked). */
  ipv4: string;
  /** Pod interface MAC from prevResult, when it gives one (lower case). */
  podMac?: string;
  /** Host veth name. */
  hostVeth: string;
  /** Host veth MAC ADD set; the neighbour is compared with the live host veth's MAC when it exists. */
  hostMac: string;
  /** Node ip rules expected (empty: not checked). */
  rules: IpRule[];
}

/** Kernel state inside the pod netns. */
export interface PodState {
  addrs: IpJson[];
  routes: IpJson[];
  neighs: IpJson[];
}
/** Kernel state of the node netns (main table routes). */
export interface NodeState {
  links: IpJson[];
  routes: IpJson[];
  rules: IpJson[];
}

export const flags = (o: IpJson | undefined, key = 'flags'): string[] =>
  Array.isArray(o?.[key]) ? (o![key] as string[]) : [];

/**
 * Lists every way the kernel differs from `e`, e.g.
 * `route default via 169.254.1.1 dev eth0 missing in /var/run/netns/x`.
 * @returns the problems (empty when the attachment is intact).
 */
export function findDrift(e: ExpectedAttachment, pod: PodState, node: NodeState): string[] {
  const p: string[] = [];
  const where = `in ${e.netns}`;
  const hostLink = node.links.find((l) => l.ifname === e.hostVeth);
  const hostMac = typeof hostLink?.address === 'string' ? hostLink.address.toLowerCase() : e.hostMac;

  const link = pod.addrs.find((l) => l.ifname === e.ifName);
  if (!link) {
    p.push(`interface ${e.ifName} missing ${where}`);
  } else {
    if (!flags(link).includes('UP')) p.push(`interface ${e.ifName} is down ${where}`);
    const mac = typeof link.address === 'string' ? link.address.toLowerCase() : '';
    if (e.podMac && mac !== e.podMac)
      p.push(`interface ${e.ifName} ${where} has MAC ${mac}, prevResult says ${e.podMac}`);
    const addrs = Array.isArray(link.addr_info) ? (link.addr_info as IpJson[]) : [];
    if (e.ipv4 && !addrs.some((a) => a.family === 'inet' && a.local === e.ipv4 && a.prefixlen === 32))
      p.push(`address ${e.ipv4}/32 missing on ${e.ifName} ${where}`);
  }
  if (e.ipv4) p.push(...v4PodDrift(e, pod, hostMac));
  if (!hostLink) p.push(`host veth ${e.hostVeth} missing on the node`);
  else if (!flags(hostLink).includes('UP')) p.push(`host veth ${e.hostVeth} is down on the node`);
  if (e.ipv4) p.push(...v4HostDrift(e, node));
  return p;
}

/** The pod-side IPv4 part of {@link findDrift}: gateway route, default route, neighbour. */
function v4PodDrift(e: ExpectedAttachment, pod: PodState, hostMac: string): string[] {
  const p: string[] = [];
  const where = `in ${e.netns}`;
  const onIf = (r: IpJson) => r.dev === e.ifName;
  if (!pod.routes.some((r) => onIf(r) && r.dst === POD_GATEWAY && r.scope === 'link' && !r.gateway)) {
    p.push(`route ${POD_GATEWAY} dev ${e.ifName} scope link missing ${where}`);
  }
  if (!pod.routes.some((r) => onIf(r) && r.dst === 'default' && r.gateway === POD_GATEWAY)) {
    p.push(`route default via ${POD_GATEWAY} dev ${e.ifName} missing ${where}`);
  }
  const neigh = pod.neighs.find((n) => onIf(n) && n.dst === POD_GATEWAY);
  if (!neigh || typeof neigh.lladdr !== 'string') {
    p.push(`neighbour ${POD_GATEWAY} lladdr ${hostMac} permanent missing on ${e.ifName} ${where}`);
  } else if (neigh.lladdr.toLowerCase() !== hostMac) {
    p.push(
      `neighbour ${POD_GATEWAY} on ${e.ifName} ${where} points at ${neigh.lladdr}, not the host veth MAC ${hostMac}`,
    );
  } else if (!flags(neigh, 'state').includes('PERMANENT')) {
    p.push(
      `neighbour ${POD_GATEWAY} on ${e.ifName} ${where} is not permanent (${flags(neigh, 'state').join(',') || 'no state'})`,
    );
  }
  return p;
}

/** The node-side IPv4 part of {@link findDrift}: host route, rules. */
function v4HostDrift(e: ExpectedAttachment, node: NodeState): string[] {
  const p: string[] = [];
  const [hostRoute] = routesTo(
    node.routes.map((j) => routeFromJson(j as RouteJson)),
    e.ipv4,
  );
  if (!hostRoute) p.push(`host route ${e.ipv4}/32 dev ${e.hostVeth} missing on the node`);
  else if (hostRoute.dev !== e.hostVeth)
    p.push(`host route ${e.ipv4}/32 points at ${String(hostRoute.dev ?? hostRoute.gateway)}, not ${e.hostVeth}`);
  for (const want of e.rules) {
    if (!node.rules.some((r) => ruleMatches(r, want))) p.push(`ip rule ${formatRule(want)} missing on the node`);
  }
  return p;
}
