/**
 * ADD's wiring through ipamd's rtnetlink helper (netlink-helper.ts) instead of two `ip`
 * processes: the same two stages, the same kernel state and the same failure handling as
 * wiring.ts `startWiring` (its docstring is the contract: route added never replaced,
 * the conflict check on "File exists", nothing left on failure), without starting a
 * process per ADD. The host veth deletes (a repeated ADD, the cleanup) go through the
 * helper as well (wiring.ts `deleteHostVeth` with `node.netlink`); the conflict read,
 * replacing stale rules and CHECK keep using `ip`.
 */
import type { NetlinkHelper } from './netlink-helper.js';
import type { NodeSide } from './host.js';
import {
  addHostRoute,
  checkPodNetns,
  deleteHostVeth,
  isFileExists,
  settleFinish,
  wireError,
  type PendingWiring,
  type VethPlan,
  type WiringPlan,
} from './wiring.js';

/**
 * Stage 1 through `helper` (see wiring.ts `startWiring`): checks the netns path, then
 * asks the helper for the veth pair (peer in the pod netns), host end up, and the pod's
 * `lo`, peer, routes and neighbour. A host veth left by an earlier ADD of the same
 * attachment ("File exists") is deleted and the pair created again. `trace` gets the
 * marks `netns-checked`, `veth-up` (all of stage 1 done), and in `finish` `host-exited`
 * and `pod-exited` (the node-side and pod-side requests answered).
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
        await helper.veth(p);
      } catch (e) {
        if (!isFileExists(e)) throw e;
        await deleteHostVeth(p.hostVeth, node); // a repeated ADD: start again from scratch
        await helper.veth(p);
      }
      trace?.('veth-up');
    } catch (e) {
      await deleteHostVeth(p.hostVeth, node).catch(() => undefined);
      throw wireError(p, e);
    }
  })();
  stage1.catch(() => undefined); // surfaced by finish()/abort()

  return {
    async finish(plan: WiringPlan): Promise<void> {
      await stage1;
      const [h, podSide] = await Promise.allSettled([
        addHostRoute(plan, node, () => helper.host(plan)).then(() => trace?.('host-exited')),
        helper.addr(plan).then(() => trace?.('pod-exited')),
      ]);
      await settleFinish(plan, node, h, podSide);
    },
    async abort(): Promise<void> {
      if ((await stage1.then(() => true).catch(() => false)) === false) return; // stage 1 cleaned up after itself
      await deleteHostVeth(p.hostVeth, node).catch(() => undefined);
    },
  };
}
