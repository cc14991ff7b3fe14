/**
 * ADD's wiring through ipamd's rtnetlink helper (netlink-helper.ts) instead of two `ip`
 * processes: the same two stages, the same kernel state and the same failure handling as
 * wiring.ts `startWiring` (its docstring is the contract: routes added never replaced,
 * the conflict check on "File exists", nothing left on failure), for every family
 * (wiring-v6.ts: IPv6 on CNI_IFNAME, and an IPv6 pod's IPv4 egress pair `v4if0`), without
 * starting a process per ADD. The host veth deletes (a repeated ADD, the cleanup) go
 * through the helper as well (wiring.ts `deleteHostVeth` with `node.netlink`); the
 * conflict read, replacing stale rules and CHECK keep using `ip`.
 */
import type { NetlinkHelper } from './netlink-helper.js';
import type { NodeSide } from './host.js';
import { applyHostVethSysctls } from './host-sysctl.js';
import { hasV6 } from './wiring-plan.js';
import {
  addHostRoute,
  checkPodNetns,
  deleteHostVeths,
  isFileExists,
  settleFinish,
  wireError,
  type PendingWiring,
  type VethPlan,
  type WiringPlan,
} from './wiring.js';

/**
 * Runs `steps` as helper requests sent together (the helper answers them in order) and
 * waits for all of them, so nothing is still running when a failure is handled.
 * @throws the first failure, in request order.
 */
async function allOf(steps: Promise<void>[]): Promise<void> {
  const failed = (await Promise.allSettled(steps)).find((s) => s.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/** Stage 1's helper requests: the veth pair of the family and, for an IPv6 pod, the egress pair. */
function vethRequests(p: VethPlan, helper: NetlinkHelper): Promise<void>[] {
  const family = p.family ?? 'ipv4';
  return [
    family === 'ipv4' ? helper.veth(p) : helper.veth6({ ...p, family }),
    ...(p.egress ? [helper.veth({ ...p.egress, netns: p.netns, mtu: p.mtu })] : []),
  ];
}

/** Stage 2's node-side requests: host route and rules (IPv4), route and neighbour (IPv6), egress route. */
function hostRequests(plan: WiringPlan, helper: NetlinkHelper): Promise<void>[] {
  return [
    ...(plan.ipv4 ? [helper.host(plan)] : []),
    ...(plan.ipv6 ? [helper.host6({ hostVeth: plan.hostVeth, ipv6: plan.ipv6, podMac: plan.podMac })] : []),
    ...(plan.egress && plan.egressV4 ? [helper.route({ hostVeth: plan.egress.hostVeth, ipv4: plan.egressV4 })] : []),
  ];
}

/** Stage 2's pod-side requests: the addresses (IPv4 `/32`, IPv6 `/128 nodad`, egress `/32`). */
function podRequests(plan: WiringPlan, helper: NetlinkHelper): Promise<void>[] {
  const { netns, ifName } = plan;
  return [
    ...(plan.ipv4 ? [helper.addr({ netns, ifName, ipv4: plan.ipv4 })] : []),
    ...(plan.ipv6 ? [helper.addr6({ netns, ifName, ipv6: plan.ipv6 })] : []),
    ...(plan.egress && plan.egressV4 ? [helper.addr({ netns, ifName: plan.egress.ifName, ipv4: plan.egressV4 })] : []),
  ];
}

/**
 * Stage 1 through `helper` (see wiring.ts `startWiring`): checks the netns path, then
 * asks the helper for the veth pair (peer in the pod netns), host end up, and the pod's
 * `lo`, peer, routes and neighbours of its family, and for an IPv6 pod the egress pair;
 * writes the host veth's IPv6 sysctls (host-sysctl.ts) for an IPv6 or dual pod, as the
 * `ip` path does. A host veth left by an earlier ADD of the same attachment ("File
 * exists") is deleted (with its egress veth) and the pairs created again. `trace` gets
 * the marks `netns-checked`, `veth-up` (all of stage 1 done), and in `finish`
 * `host-exited` and `pod-exited` (the node-side and pod-side requests answered).
 */
export function startNetlinkWiring(
  p: VethPlan,
  node: NodeSide,
  helper: NetlinkHelper,
  trace?: (mark: string) => void,
): PendingWiring {
  const stage1 = (async (): Promise<void> => {
    await checkPodNetns(p.netns, node.nodeNetns);
    trace?.('netns-checked');
    try {
      try {
        await allOf(vethRequests(p, helper));
      } catch (e) {
        if (!isFileExists(e)) throw e;
        await deleteHostVeths(p, node, { anyMac: true }); // a repeated ADD, or a re-created pod: take the name over
        await allOf(vethRequests(p, helper));
      }
      if (hasV6(p.family)) await applyHostVethSysctls(p.hostVeth, node);
      trace?.('veth-up');
    } catch (e) {
      await deleteHostVeths(p, node).catch(() => undefined);
      throw wireError(p, e);
    }
  })();
  stage1.catch(() => undefined); // surfaced by finish()/abort()

  return {
    async finish(plan: WiringPlan): Promise<void> {
      await stage1;
      const [h, podSide] = await Promise.allSettled([
        addHostRoute(plan, node, () => allOf(hostRequests(plan, helper))).then(() => trace?.('host-exited')),
        allOf(podRequests(plan, helper)).then(() => trace?.('pod-exited')),
      ]);
      await settleFinish(plan, node, h, podSide);
    },
    async abort(): Promise<void> {
      if ((await stage1.then(() => true).catch(() => false)) === false) return; // stage 1 cleaned up after itself
      await deleteHostVeths(p, node).catch(() => undefined);
    },
  };
}
