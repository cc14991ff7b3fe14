/**
 * The Linux side of one secondary ENI (docs/design.md#7-host-networking): the link found by MAC, its MTU, up,
 * its primary IPv4 (`/prefix` of the subnet, `noprefixroute`: the subnet is reached
 * through the ENI's own table, not main), route table `device number + 1` holding
 * `<subnet gw>/32 dev <link> scope link` and `default via <subnet gw> dev <link>`, and the
 * rule `from <ENI primary ip> lookup <table>` (priority in netfacts/routing.ts).
 * The VPC router of a subnet is its first host address (network + 1), as in AWS VPCs
 * ("VPC router", docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html).
 * Converges to the desired state (re-run safe): reads links, routes and rules, then one
 * `ip -batch` with only the missing/extra pieces.
 */
import { monoNow } from '../clock.js';
import ipaddr from 'ipaddr.js';
import type { EniInfo } from '../datastore/types.js';
import { asCidr, listRules, ruleSyncLines, type IpRule } from './ip-rules.js';
import { ENI_PRIMARY_IP_PRIORITY, eniRouteTable } from '../../netfacts/routing.js';
import type { CommandRunner } from './runner.js';

/** The ENI facts the host side needs. */
export type EniLinkSpec = Pick<EniInfo, 'eniId' | 'mac' | 'deviceNumber' | 'primaryIp' | 'subnetCidr'>;

/** A link as `ip -j addr show` reports it (only the fields used). */
interface LinkJson {
  ifname: string;
  address?: string;
  addr_info?: Array<{ family: string; local: string; prefixlen: number }>;
}

/** A route as `ip -4 -j route show table all` reports it (only the fields used). */
interface RouteJson {
  type?: string;
  dst: string;
  gateway?: string;
  dev?: string;
  table?: string;
}

/** The subnet's VPC router: first host address of `subnetCidr` (`10.0.1.0/24` → `10.0.1.1`). @throws Error for a non-IPv4 CIDR */
export function subnetGateway(subnetCidr: string): string {
  const bytes = ipaddr.IPv4.networkAddressFromCIDR(subnetCidr).toByteArray();
  const n = ((bytes[0]! << 24) >>> 0) + (bytes[1]! << 16) + (bytes[2]! << 8) + bytes[3]! + 1;
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** The link whose MAC is `mac` (case-insensitive), or undefined. @throws CommandError */
export async function findLinkByMac(runner: CommandRunner, mac: string): Promise<LinkJson | undefined> {
  const links = await runner.ipJson<LinkJson>(['addr', 'show']);
  return links.find((l) => l.address?.toLowerCase() === mac.toLowerCase());
}

/** The rules this ENI owns: priority {@link ENI_PRIMARY_IP_PRIORITY} from its IP or into its table. */
function ownedBy(eni: EniLinkSpec): (r: IpRule) => boolean {
  const from = asCidr(eni.primaryIp);
  const table = eniRouteTable(eni.deviceNumber);
  return (r) => r.priority === ENI_PRIMARY_IP_PRIORITY && (r.from === from || r.table === table);
}

const routeDel = (r: RouteJson, table: string): string =>
  [
    'route',
    'del',
    r.dst,
    ...(r.gateway ? ['via', r.gateway] : []),
    ...(r.dev ? ['dev', r.dev] : []),
    'table',
    table,
  ].join(' ');

/**
 * Waits up to `waitMs` (polling every 200 ms) for the link with the ENI's MAC: a newly
 * attached ENI takes a moment to appear. @throws Error naming the ENI and MAC when absent.
 */
async function waitForLink(runner: CommandRunner, eni: EniLinkSpec, waitMs: number): Promise<LinkJson> {
  const deadline = monoNow() + waitMs;
  for (;;) {
    const link = await findLinkByMac(runner, eni.mac);
    if (link) return link;
    if (monoNow() >= deadline)
      throw new Error(`no link with MAC ${eni.mac} (ENI ${eni.eniId}, device ${eni.deviceNumber}) after ${waitMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Brings the ENI's link to the desired state: MTU `mtu` (bytes) and up, primary IP,
 * table `device+1` with exactly the gateway and default routes, no routes of the link in
 * main, and exactly one `from <primary ip> lookup <table>` rule.
 * @param waitMs how long to wait for the link to appear (ms).
 * @returns the link name and how many `ip` commands changed something (0 on a re-run).
 * @throws Error when no link has the ENI's MAC within `waitMs`; CommandError when `ip` fails.
 */
export async function setupEniLink(
  runner: CommandRunner,
  eni: EniLinkSpec,
  mtu: number,
  waitMs: number,
): Promise<{ ifName: string; changes: number }> {
  if (eni.deviceNumber < 1)
    throw new Error(`ENI ${eni.eniId} has device number ${eni.deviceNumber}: only secondary ENIs get their own table`);
  const link = await waitForLink(runner, eni, waitMs);
  const dev = link.ifname;
  const table = String(eniRouteTable(eni.deviceNumber));
  const gw = subnetGateway(eni.subnetCidr);
  const prefixLen = Number(eni.subnetCidr.split('/')[1]);
  const [routes, rules] = await Promise.all([
    runner.ipJson<RouteJson>(['-4', 'route', 'show', 'table', 'all']),
    listRules(runner),
  ]);

  const changes: string[] = [];
  if (!link.addr_info?.some((a) => a.family === 'inet' && a.local === eni.primaryIp)) {
    changes.push(`addr add ${eni.primaryIp}/${prefixLen} dev ${dev} noprefixroute`);
  }
  const inTable = routes.filter((r) => r.table === table);
  const hasGw = inTable.some((r) => r.dst === gw && r.dev === dev && !r.gateway);
  const hasDefault = inTable.some((r) => r.dst === 'default' && r.gateway === gw && r.dev === dev);
  if (!hasGw) changes.push(`route replace ${gw}/32 dev ${dev} scope link table ${table}`);
  if (!hasDefault) changes.push(`route replace default via ${gw} dev ${dev} table ${table}`);
  for (const r of inTable) {
    const wanted =
      (r.dst === gw && r.dev === dev && !r.gateway) || (r.dst === 'default' && r.gateway === gw && r.dev === dev);
    if (!wanted) changes.push(routeDel(r, table));
  }
  for (const r of routes)
    if (r.table === undefined && r.dev === dev && (r.type ?? 'unicast') === 'unicast')
      changes.push(routeDel(r, 'main'));
  changes.push(
    ...ruleSyncLines(rules, ownedBy(eni), [
      { priority: ENI_PRIMARY_IP_PRIORITY, from: asCidr(eni.primaryIp), table: Number(table) },
    ]),
  );
  // MTU and up are cheap and idempotent: always set (they also repair a link someone took down).
  await runner.ipBatch([`link set dev ${dev} mtu ${mtu} up`, ...changes]);
  return { ifName: dev, changes: changes.length };
}

/**
 * Removes what {@link setupEniLink} made for the ENI: every route of table `device+1`,
 * its `from <primary ip>` rule, and (when the link is still there) its primary IP.
 * Safe to repeat; a missing link is fine (already detached).
 * @returns how many `ip` commands were run. @throws CommandError
 */
export async function teardownEniLink(runner: CommandRunner, eni: EniLinkSpec): Promise<number> {
  const table = String(eniRouteTable(eni.deviceNumber));
  const [link, routes, rules] = await Promise.all([
    findLinkByMac(runner, eni.mac),
    runner.ipJson<RouteJson>(['-4', 'route', 'show', 'table', table]),
    listRules(runner),
  ]);
  const lines = routes.map((r) => routeDel(r, table));
  lines.push(...ruleSyncLines(rules, ownedBy(eni), []));
  const addr = link?.addr_info?.find((a) => a.family === 'inet' && a.local === eni.primaryIp);
  if (link && addr) lines.push(`addr del ${addr.local}/${addr.prefixlen} dev ${link.ifname}`);
  await runner.ipBatch(lines);
  return lines.length;
}
