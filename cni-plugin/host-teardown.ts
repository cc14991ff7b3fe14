/**
 * Removes the node side of one attachment (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 4, undone): the host veth
 * (its peer and the host route `<ip>/32 dev <veth>` go with it: DEL and GC delete it
 * themselves, veth-delete.ts `deleteOwnedVeth`; {@link teardownAttachment} for the spool)
 * and the pod's ip rules. Used by DEL (also when ipamd is unreachable: from `prevResult`)
 * and by GC for the attachments ipamd released. Idempotent: what is already gone is fine.
 * With a netlink helper in `node` (ipamd's exec server), the veth and the known rules go through it.
 */
import { LOCAL_NODE, type NodeSide } from './host.js';
import { ipDeleteAll, ipShow } from '../netfacts/ip-query.js';
import { routeFromJson, routesTo, type RouteJson } from '../netfacts/ip-route.js';
import { podRuleDeleteLines, ruleDeleteLinesFor } from './pod-rules.js';
import type { WiringPlan } from './wiring.js';
import { deleteOwnedVeth } from './veth-delete.js';
import { hostVethMac, hostVethNames, knowsPod, type VethOwner } from './veth-name.js';
import { egressVeth, egressVethNames } from './wiring-plan.js';

/** What to remove once the attachment's host veth is gone. */
export interface HostTeardown {
  /** Pod IPv4 when known (ipamd's reply or prevResult); without it nothing is done. */
  ipv4?: string;
  /**
   * The wiring plan with the ENI's route table when ipamd said which (then exactly the
   * rules `policyRoutingLines(plan)` adds are deleted). Without it (ipamd unreachable)
   * every rule naming `ipv4` alone is deleted — unless a device still routes that IP:
   * the attachment's own route went with its veth, so that is another attachment
   * holding it now (the newer sandbox of the same pod, under the same host veth name),
   * and rules and routes are left alone.
   */
  plan?: WiringPlan;
  /** How to run `ip` and where the node side is (default: the current netns, `ip` forked here). */
  node?: NodeSide;
}

/**
 * Tears down the node side of one attachment after the caller deleted its host veth
 * (veth-delete.ts `deleteOwnedVeth`: the host route went with it): the pod's ip rules.
 * @returns warnings (things left in place on purpose, failures to delete some rule).
 * @throws Error when the node's routes and rules cannot be read (no plan).
 */
export async function teardownHost(t: HostTeardown): Promise<string[]> {
  const node = t.node ?? LOCAL_NODE;
  if (!t.ipv4) return [];
  if (t.plan) {
    const failed = node.netlink
      ? await node.netlink.delRules(t.plan)
      : await ipDeleteAll(podRuleDeleteLines(t.plan), node.nodeNetns, node.ip);
    return failed.map((m) => `rule cleanup for ${t.ipv4}: ${m}`);
  }
  const [routes, rules] = await ipShow(['route show table all', 'rule show'], node.nodeNetns, node.ip);
  const other = routesTo(
    routes!.map((j) => routeFromJson(j as RouteJson)),
    t.ipv4,
  ).find((r) => r.dev !== undefined);
  if (other)
    return [
      `${t.ipv4} is routed to ${other.dev} (another attachment holds it now): its rules and routes were left alone`,
    ];
  return (await ipDeleteAll(ruleDeleteLinesFor(rules!, t.ipv4), node.nodeNetns, node.ip)).map(
    (m) => `rule cleanup for ${t.ipv4}: ${m}`,
  );
}

/**
 * Tears down the node side of the attachment `owner` when only its key, pod and IPv4 are
 * known (ipamd's DEL spool): its host veth under any of its names (veth-name.ts
 * `hostVethNames`; by its MAC when the pod is unknown) and an IPv6 pod's egress veth,
 * each only with this attachment's MAC,
 * then the rules of `ipv4` as {@link teardownHost} without a plan.
 * @returns warnings as {@link teardownHost}'s.
 * @throws IpBatchError when a veth exists but cannot be deleted.
 */
export async function teardownAttachment(a: {
  vethPrefix: string;
  owner: VethOwner;
  ipv4?: string;
  node?: NodeSide;
}): Promise<string[]> {
  const node = a.node ?? LOCAL_NODE;
  const { containerId, ifName } = a.owner;
  const names = hostVethNames(a.vethPrefix, a.owner);
  await Promise.all([
    deleteOwnedVeth(names, hostVethMac(containerId, ifName), node, { byMac: !knowsPod(a.owner) }),
    deleteOwnedVeth(egressVethNames(a.vethPrefix, containerId, ifName), egressVeth(containerId, ifName).hostMac, node),
  ]);
  return teardownHost({ node, ...(a.ipv4 ? { ipv4: a.ipv4 } : {}) });
}
