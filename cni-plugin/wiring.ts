/**
 * Netns plumbing of one pod attachment (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 4) with iproute2, in two stages so
 * ADD can overlap the first with ipamd's answer (whose checkpoint fsync dominates it):
 * everything that needs no IP (veth pair, links up, pod routes and neighbour), then, with
 * the IP, the node's route and rules and the pod's address. Two `ip -batch -` processes
 * (node netns; pod netns by `nsenter --net=<netns>`) started in stage 1 run both stages:
 * they read stage 2's lines from their still-open stdin (ip-batch.ts openIpStream).
 *
 * Node side: veth pair created with the peer directly in the pod netns (by path), fixed
 * MACs and MTU, host end up, host route `<ip>/32 dev <hostVeth> scope link`, the pod's
 * ip rules ({@link policyRoutingLines}).
 *
 * Last line of defence (docs/design.md#13-evidence-before-trust item 4): the host route is *added*, never replaced, so
 * an IP that the node already routes to another device (a live pod ipamd lost track
 * of) makes the batch fail with EEXIST instead of silently moving that pod's route. Only
 * then (off the fast path) is the route read to tell a conflict ({@link IpConflictError}:
 * the live pod's route and rules are left untouched, only the new veth is removed) from
 * ip rules an earlier holder of the IP left behind (replaced, as before). Rules alone
 * never mean a live pod: every live pod has its host route, and rules outlive a failed
 * DEL while routes go with their veth.
 * Pod side: `lo` up, peer up, `<ip>/32`, `169.254.1.1 dev <if> scope link`,
 * `default via 169.254.1.1`, permanent neighbour 169.254.1.1 → host veth MAC.
 */
import { statSync, type Stats } from 'node:fs';
import { CniError, echo } from './errors.js';
import { CNI_ERRORS, cniError } from './error-catalogue.js';
import { LOCAL_NODE, type NodeSide } from './host.js';
import { IpBatchError, type IpStream } from '../netfacts/ip-batch.js';
import { ipDeleteAll, ipShow } from '../netfacts/ip-query.js';
import { podHostRoute, routeFromJson, routeLine, type RouteJson } from '../netfacts/ip-route.js';
import { ruleLine } from '../netfacts/ip-rule.js';
import { expectedPodRules, podRuleDeleteLines } from './pod-rules.js';
import { applyHostVethSysctls } from './host-sysctl.js';
import { deleteHostVeths } from './veth-delete.js';
import { hasV4, hasV6, type VethPlan, type WiringPlan } from './wiring-plan.js';
import {
  egressVethLines,
  hostV6RouteLines,
  podHostRouteV6,
  podV6AddressLines,
  podV6RouteLines,
  v4GatewayLines,
} from './wiring-v6.js';

export type { EgressVeth, VethPlan, WiringPlan } from './wiring-plan.js';
export { deleteHostVeth, deleteHostVethPair, deleteHostVeths } from './veth-delete.js';

/**
 * The pod's ip rules (netfacts/ip-rule.ts `podRules`: prio 512 `to <ip>/32 lookup main`,
 * and prio 1536 `from <ip>/32 lookup <routeTableId>` for an IP of a secondary ENI)
 * rendered as node-side `ip -batch` lines, appended to the host batch of ADD (no extra
 * process). CHECK, DEL and GC use the same data (pod-rules.ts), not these lines.
 */
export function policyRoutingLines(plan: WiringPlan): string[] {
  return expectedPodRules(plan).map((r) => ruleLine('add', r, { tableNames: true }));
}

/** Node-side lines creating the veth pair (peer straight into the pod netns); no IP needed. */
export function vethLines(p: VethPlan): string[] {
  return [
    `link add name ${p.hostVeth} address ${p.hostMac} mtu ${p.mtu} type veth peer name ${p.ifName} address ${p.podMac} mtu ${p.mtu} netns ${p.netns}`,
    `link set dev ${p.hostVeth} up`,
    ...egressVethLines(p),
  ];
}

/**
 * Node-side lines for the pod's address: host route and ip rules. The route is `add`ed
 * (fails with EEXIST when the node already routes the IP: see the module docstring);
 * `replace` only once a read showed the route is this attachment's own.
 */
export function hostRouteLines(p: WiringPlan, route: 'add' | 'replace' = 'add'): string[] {
  const v4 = p.ipv4 ? [routeLine(route, podHostRoute(p.ipv4, p.hostVeth)), ...policyRoutingLines(p)] : [];
  return [...v4, ...hostV6RouteLines(p, route)];
}

/**
 * ADD refused because the node already routes the IP to another device (another pod's
 * live veth): code 11 (try again later: ipamd quarantines the IP, so the retried ADD
 * gets another one). Nothing of the other attachment was touched.
 */
export class IpConflictError extends CniError {
  constructor(
    readonly ipv4: string,
    readonly device: string,
  ) {
    super(
      CNI_ERRORS['ip-conflict'].code,
      CNI_ERRORS['ip-conflict'].msg.replace('{ip}', ipv4).replace('{device}', echo(device)),
      "ADD refused, the other pod's route and rules were left untouched; ipamd quarantines this IP and the retried ADD gets another one",
    );
    this.name = 'IpConflictError';
  }
}

/**
 * The device (other than `ownVeth`) the node's main table routes `<ip>/32` (an IPv6: `/128`) to, or
 * undefined. One `ip -json` read on the node side (`node`, default the current netns).
 * @throws Error when the read fails.
 */
export async function otherRouteDevice(
  ipv4: string,
  ownVeth: string,
  node: NodeSide = LOCAL_NODE,
): Promise<string | undefined> {
  const v6 = ipv4.includes(':');
  const dst = v6 ? podHostRouteV6(ipv4, ownVeth).dst : `${ipv4}/32`;
  // `-6` for an IPv6: without it iproute2 lists IPv4 routes only and a live pod's /128 looks absent.
  const [rows] = await ipShow([`route show exact ${dst}`], node.nodeNetns, node.ip, v6 ? 'inet6' : undefined);
  const routes = rows!.map((j) => ({ route: routeFromJson(j as RouteJson), typed: typeof j.type === 'string' }));
  const other =
    routes.find(({ route: r }) => r.dev !== undefined && r.dev !== ownVeth) ??
    routes.find(({ route: r }) => r.dev === undefined);
  if (!other) return undefined;
  const r = other.route;
  return r.dev ?? r.gateway ?? (other.typed ? r.type : 'a non-device route');
}

/** `/proc/self/ns/net`: this process's (the node's, for the plugin and a host-network ipamd) network namespace. */
const OWN_NETNS = '/proc/self/ns/net';

/**
 * Refuses a pod netns that is the node's own: same namespace identity (device + inode
 * of the nsfs file, not the path: `/var/run/netns/<name>`, `/proc/self/ns/net` or any
 * other path to it), compared with `nodeNetns` (default this process's netns).
 * @throws CniError 5 when `podNetns` does not exist, 4 when it is the node's namespace.
 */
export async function checkPodNetns(podNetns: string, nodeNetns?: string): Promise<void> {
  // Synchronous: two stats of nsfs files take microseconds, a trip through libuv's thread
  // pool took ~1 ms on ADD's critical path under load (the stage trace's `netns-checked`).
  const settle = (p: string): PromiseSettledResult<Stats> => {
    try {
      return { status: 'fulfilled', value: statSync(p) };
    } catch (e) {
      return { status: 'rejected', reason: e };
    }
  };
  const [pod, node] = [settle(podNetns), settle(nodeNetns ?? OWN_NETNS)];
  if (pod.status === 'rejected') throw cniError('netns-missing', (pod.reason as Error).message, { netns: podNetns });
  if (node.status === 'fulfilled' && pod.value.dev === node.value.dev && pod.value.ino === node.value.ino) {
    throw cniError(
      'env-netns',
      `${echo(podNetns)} is the node's own network namespace; a pod must have a network namespace of its own`,
    );
  }
}

/** All node-side `ip -batch` lines for `plan` ({@link vethLines} then {@link hostRouteLines}). */
export function hostLines(p: WiringPlan): string[] {
  return [...vethLines(p), ...hostRouteLines(p)];
}

/** All pod-side `ip -batch` lines for `plan`, as one batch (`lo` up, {@link podRouteLines}, {@link podAddressLines}). */
export function podLines(p: WiringPlan): string[] {
  return ['link set dev lo up', ...podRouteLines(p), ...podAddressLines(p)];
}

/**
 * `e` as the CniError of a wiring failure (code 5 naming the interface and netns), unless it
 * is one already. setns(2) refused ("enter pod netns: Operation not permitted") means the
 * process wiring the pod lacks CAP_SYS_ADMIN: inside ipamd, the chart's capability set.
 */
export const wireError = (p: VethPlan, e: unknown): CniError => {
  if (e instanceof CniError) return e;
  const msg = (e as Error).message;
  const hint = /enter pod netns: Operation not permitted/.test(msg)
    ? ' (entering a pod netns needs the SYS_ADMIN capability: add it to the eni-ipam container, chart securityContext.capabilities.add)'
    : '';
  return cniError('wire-failed', `${msg}${hint}`, { ifName: p.ifName, netns: p.netns });
};

/** Pod-side lines that need no IP: the peer up, gateway and default routes, neighbour. */
export function podRouteLines(p: VethPlan): string[] {
  return [
    `link set dev ${p.ifName} up`,
    ...(hasV4(p.family) ? v4GatewayLines(p.ifName, p.hostMac) : []),
    ...podV6RouteLines(p),
  ];
}

/** The pod-side lines that need the addresses (IPv4 `/32`, IPv6 `/128`, egress `/32`). */
export function podAddressLines(p: WiringPlan): string[] {
  return [...(p.ipv4 ? [`addr replace ${p.ipv4}/32 dev ${p.ifName}`] : []), ...podV6AddressLines(p)];
}

/** ADD's wiring once started by {@link startWiring}: finished with the IP, or abandoned. */
export interface PendingWiring {
  /**
   * Stage 2 with the IP: the host route and ip rules, the pod's address. Rules an earlier
   * holder of this IP left behind are replaced. On failure the veth and the rules are
   * removed, except on a conflict (then only the new veth goes).
   * @throws IpConflictError (code 11) when the node already routes the IP to another
   *   device; CniError code 5: stage 1 failed (netns missing, ip error) or stage 2 did;
   *   code 4: the pod netns is the node's own.
   */
  finish(p: WiringPlan): Promise<void>;
  /** Abandons the wiring (no IP): ends the processes and removes the veth. Never throws. */
  abort(): Promise<void>;
}

/**
 * Undoes a finished wiring of `p` (ADD failed after {@link PendingWiring.finish}): removes
 * the host veth (peer and host route with it) and the rules {@link policyRoutingLines}
 * added. Never throws.
 */
export async function unwire(p: WiringPlan, node: NodeSide = LOCAL_NODE): Promise<void> {
  await deleteHostVeths(p, node).catch(() => undefined);
  await ipDeleteAll(podRuleDeleteLines(p), node.nodeNetns, node.ip).catch(() => undefined);
}

/**
 * Stage 2 on the node side: runs `add` (which adds the host route and the pod's rules;
 * the route is added, never replaced). On "File exists" reads the route: another device
 * routing the IP is a conflict ({@link IpConflictError}, nothing touched); otherwise an
 * earlier holder's rules were in the way and are replaced (with `ip`, off the fast path).
 * @throws IpConflictError; whatever `add` or the replacement throws otherwise.
 */
export async function addHostRoute(plan: WiringPlan, node: NodeSide, add: () => Promise<void>): Promise<void> {
  try {
    await add();
  } catch (e) {
    if (!isFileExists(e)) throw e;
    // Unreadable counts as a conflict: the rules may be a live pod's, never delete them.
    const mine: [string, string][] = [
      [plan.ipv4, plan.hostVeth],
      [plan.ipv6 ?? '', plan.hostVeth],
      [plan.egressV4 ?? '', plan.egress?.hostVeth ?? ''],
    ];
    for (const [ip, veth] of mine.filter(([ip]) => ip)) {
      const other = await otherRouteDevice(ip, veth, node).catch(
        (err: Error) => `an existing route that could not be read (${err.message})`,
      );
      if (other !== undefined) throw new IpConflictError(ip, other);
    }
    // Our route went in; an earlier holder's rules were in the way: replace them.
    await ipDeleteAll(podRuleDeleteLines(plan), node.nodeNetns, node.ip);
    await node.ip.ipBatch(hostRouteLines(plan, 'replace'), node.nodeNetns);
  }
}

/**
 * The end of stage 2 once both sides settled: nothing when both succeeded; otherwise
 * removes the veth and (unless the failure is a conflict: those rules are the live
 * pod's) the pod's rules, then throws.
 * @throws IpConflictError, or CniError 5 naming the failure.
 */
export async function settleFinish(
  plan: WiringPlan,
  node: NodeSide,
  h: PromiseSettledResult<unknown>,
  podSide: PromiseSettledResult<unknown>,
): Promise<void> {
  const failed = h.status === 'rejected' ? h.reason : podSide.status === 'rejected' ? podSide.reason : undefined;
  if (failed === undefined) return;
  await deleteHostVeths(plan, node).catch(() => undefined);
  // The rules belong to the live pod that holds the IP: never touch them.
  if (failed instanceof IpConflictError) throw failed;
  await ipDeleteAll(podRuleDeleteLines(plan), node.nodeNetns, node.ip).catch(() => undefined);
  throw wireError(plan, failed);
}

/** True for an `ip` (or netlink helper) failure saying "File exists" (EEXIST). */
export const isFileExists = (e: unknown): boolean => e instanceof IpBatchError && /File exists/.test(e.stderr);

/**
 * Stage 1 of wiring, which needs no IP (ADD runs it while ipamd assigns one): checks the
 * netns path, then starts one `ip -batch` (with `node.ip`) in the node netns
 * (`node.nodeNetns`, a path; default the current one, which is the node's for the plugin
 * process and for a host-network ipamd) creating the veth pair with the peer in the pod netns, host end up, and one in
 * the pod netns bringing `lo` and the peer up and adding the gateway route, the default
 * route and the neighbour (routes need no address). Both processes then wait for the
 * lines that need the IP ({@link PendingWiring.finish}), so no process starts after
 * ipamd's answer. Idempotent: an existing host veth (a repeated ADD) is deleted and the
 * pair created again. On failure nothing is left. Errors surface in `finish`.
 *
 * `trace` (optional) is called with the stage marks `netns-checked`, `ip-started` (both
 * processes asked for), `ip-ready` (the node-side `ip` ran its first line: a marker
 * written before the veth lines, only when tracing), `veth-up` (veth created and host end
 * up), `pod-routes-sent`, and in `finish` `host-exited` / `pod-exited` (each batch's exit
 * after its last lines).
 */
export function startWiring(p: VethPlan, node: NodeSide = LOCAL_NODE, trace?: (mark: string) => void): PendingWiring {
  const { ip, nodeNetns } = node;
  const stage1 = (async (): Promise<{ host: IpStream; pod: IpStream }> => {
    await checkPodNetns(p.netns, nodeNetns);
    trace?.('netns-checked');
    let host = ip.openIpStream(nodeNetns);
    // Tracing: a marker before the veth lines splits the process start from the kernel's work.
    const ready = trace ? host.barrier() : undefined;
    host.write(vethLines(p));
    const pod = ip.openIpStream(p.netns);
    pod.write(['link set dev lo up']);
    trace?.('ip-started');
    try {
      try {
        if (ready) {
          await ready;
          trace?.('ip-ready');
        }
        await host.barrier();
      } catch (e) {
        if (!isFileExists(e)) throw e;
        await deleteHostVeths(p, node, { anyMac: true }); // a repeated ADD, or a re-created pod: take the name over
        host = ip.openIpStream(nodeNetns);
        host.write(vethLines(p));
        await host.barrier();
      }
      if (hasV6(p.family)) await applyHostVethSysctls(p.hostVeth, node);
      trace?.('veth-up');
      pod.write(podRouteLines(p));
      trace?.('pod-routes-sent');
      return { host, pod };
    } catch (e) {
      await Promise.allSettled([host.end(), pod.end()]);
      await deleteHostVeths(p, node).catch(() => undefined);
      throw wireError(p, e);
    }
  })();
  stage1.catch(() => undefined); // surfaced by finish()/abort()

  return {
    async finish(plan: WiringPlan): Promise<void> {
      const { host, pod } = await stage1;
      const hostSide = () => addHostRoute(plan, node, () => host.end(hostRouteLines(plan)));
      const [h, podSide] = await Promise.allSettled([
        hostSide().then(() => trace?.('host-exited')),
        pod.end(podAddressLines(plan)).then(() => trace?.('pod-exited')),
      ]);
      await settleFinish(plan, node, h, podSide);
    },
    async abort(): Promise<void> {
      const started = await stage1.catch(() => undefined);
      if (!started) return; // stage 1 cleaned up after itself
      await Promise.allSettled([started.host.end(), started.pod.end()]);
      await deleteHostVeths(p, node).catch(() => undefined);
    },
  };
}
