/**
 * CHECK's comparison for the IPv6 side of a pod (issue #31; wiring-v6.ts is what ADD
 * set up): `<ip6>/128` on CNI_IFNAME, `::/0 via fe80::1`, the permanent neighbour
 * `fe80::1 → host veth MAC` in the pod; the host route `<ip6>/128 dev <host veth>` on the
 * node. Pure: state as iproute2 JSON (`addr show`, `route show table all root ::/0`,
 * `neigh show`).
 */
import type { IpJson } from '../netfacts/ip-query.js';
import { flags } from './check-drift.js';
import { POD_GATEWAY_V6, POD_V6_PREFIX_LEN } from './families.js';

/** What should exist for the IPv6 side. */
export interface ExpectedV6 {
  netns: string;
  ifName: string;
  /** Pod IPv6 from prevResult, without a prefix length. */
  ipv6: string;
  hostVeth: string;
  /** MAC the gateway neighbour must point at (the live host veth's when it exists). */
  hostMac: string;
}

/** `a` in the compressed lower-case form iproute2 prints (RFC 5952), e.g. `2600:1f14::a`; `a` itself when not an address. */
export function canonicalV6(a: string): string {
  try {
    return new URL(`http://[${a}]/`).hostname.slice(1, -1);
  } catch {
    return a;
  }
}

/** Main-table entries of `route show table all` (no `table` key). */
const mainTable = (routes: IpJson[]): IpJson[] => routes.filter((r) => r.table === undefined || r.table === 'main');

/**
 * Lists every way the IPv6 side differs from `e`, e.g.
 * `route ::/0 via fe80::1 dev eth0 missing in /var/run/netns/x`.
 */
export function findDriftV6(
  e: ExpectedV6,
  pod: { addrs: IpJson[]; routes6: IpJson[]; neighs: IpJson[] },
  node: { routes6: IpJson[] },
): string[] {
  const p: string[] = [];
  const where = `in ${e.netns}`;
  const ip6 = canonicalV6(e.ipv6);
  const link = pod.addrs.find((l) => l.ifname === e.ifName);
  const addrs = Array.isArray(link?.addr_info) ? (link!.addr_info as IpJson[]) : [];
  if (link && !addrs.some((a) => a.family === 'inet6' && a.local === ip6 && a.prefixlen === POD_V6_PREFIX_LEN))
    p.push(`address ${e.ipv6}/${POD_V6_PREFIX_LEN} missing on ${e.ifName} ${where}`);
  const onIf = (r: IpJson) => r.dev === e.ifName;
  if (!mainTable(pod.routes6).some((r) => onIf(r) && r.dst === 'default' && r.gateway === POD_GATEWAY_V6))
    p.push(`route ::/0 via ${POD_GATEWAY_V6} dev ${e.ifName} missing ${where}`);
  const neigh = pod.neighs.find((n) => onIf(n) && n.dst === POD_GATEWAY_V6);
  if (!neigh || typeof neigh.lladdr !== 'string') {
    p.push(`neighbour ${POD_GATEWAY_V6} lladdr ${e.hostMac} permanent missing on ${e.ifName} ${where}`);
  } else if (neigh.lladdr.toLowerCase() !== e.hostMac) {
    p.push(
      `neighbour ${POD_GATEWAY_V6} on ${e.ifName} ${where} points at ${neigh.lladdr}, not the host veth MAC ${e.hostMac}`,
    );
  } else if (!flags(neigh, 'state').includes('PERMANENT')) {
    p.push(`neighbour ${POD_GATEWAY_V6} on ${e.ifName} ${where} is not permanent`);
  }
  const dst = [ip6, `${ip6}/${POD_V6_PREFIX_LEN}`];
  const hostRoute = mainTable(node.routes6).find((r) => dst.includes(String(r.dst)));
  if (!hostRoute) p.push(`host route ${e.ipv6}/${POD_V6_PREFIX_LEN} dev ${e.hostVeth} missing on the node`);
  else if (hostRoute.dev !== e.hostVeth)
    p.push(
      `host route ${e.ipv6}/${POD_V6_PREFIX_LEN} points at ${String(hostRoute.dev ?? hostRoute.gateway)}, not ${e.hostVeth}`,
    );
  return p;
}
