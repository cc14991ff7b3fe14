/**
 * IPv4 routes (`ip route`, ip-route(8)) as data: the model the plugin's wiring renders
 * (a pod's host route `<ip>/32 dev <host veth> scope link`) and that readers of the node
 * (CHECK, DEL/GC teardown, the conflict check, ipamd's kernel evidence) build from
 * `ip -json route show`. Pure.
 */

/** One route. `dst` is a CIDR (`10.0.0.7/32`) or `default`. */
export interface IpRoute {
  dst: string;
  dev?: string;
  gateway?: string;
  scope?: string;
  /** Route type (`unicast` when iproute2 prints none; `blackhole`, `local`, ...). */
  type: string;
  /** Table id when the listing says (table all); undefined = the one listed. */
  table?: number;
}

/** One row of `ip -json route show`. */
export interface RouteJson {
  dst?: string;
  dev?: string;
  gateway?: string;
  scope?: string;
  type?: string;
  table?: string | number;
}

/**
 * The route a row of `ip -json route show` describes: a bare host address becomes /32
 * (iproute2 prints `10.0.0.7` for `10.0.0.7/32`), `default` stays; a row without `dst` gets ''.
 */
export function routeFromJson(j: RouteJson): IpRoute {
  const dst = typeof j.dst !== 'string' ? '' : j.dst === 'default' || j.dst.includes('/') ? j.dst : `${j.dst}/32`;
  const r: IpRoute = { dst, type: typeof j.type === 'string' ? j.type : 'unicast' };
  if (typeof j.dev === 'string') r.dev = j.dev;
  if (typeof j.gateway === 'string') r.gateway = j.gateway;
  if (typeof j.scope === 'string') r.scope = j.scope;
  if (j.table !== undefined && Number.isFinite(Number(j.table))) r.table = Number(j.table);
  return r;
}

/** The pod's host route on the node: `<ip>/32 dev <hostVeth> scope link` (main table). */
export function podHostRoute(ipv4: string, hostVeth: string): IpRoute {
  return { dst: `${ipv4}/32`, dev: hostVeth, scope: 'link', type: 'unicast' };
}

/** The `ip -batch` line that adds, replaces or deletes `r`, e.g. `route add 10.0.0.7/32 dev eni1 scope link`. */
export function routeLine(verb: 'add' | 'replace' | 'del', r: IpRoute): string {
  return [
    'route',
    verb,
    r.dst,
    ...(r.gateway ? ['via', r.gateway] : []),
    ...(r.dev ? ['dev', r.dev] : []),
    ...(r.scope ? ['scope', r.scope] : []),
    ...(r.table !== undefined ? ['table', String(r.table)] : []),
  ].join(' ');
}

/** The routes of `routes` to exactly `<ipv4>/32`. */
export function routesTo(routes: readonly IpRoute[], ipv4: string): IpRoute[] {
  return routes.filter((r) => r.dst === `${ipv4}/32`);
}
