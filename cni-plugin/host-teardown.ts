/**
 * Removes the node side of one attachment (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 4, undone): the host veth
 * (its peer and the host route `<ip>/32 dev <veth>` go with it) and the pod's ip rules.
 * Used by DEL (also when ipamd is unreachable: from `prevResult`) and by GC for the
 * attachments ipamd released. Idempotent: what is already gone is fine. With a netlink
 * helper in `node` (ipamd's exec server), the veth and the known rules go through it.
 */
import { LOCAL_NODE, type NodeSide } from './host.js';
import { ipDeleteAll, ipShow } from '../netfacts/ip-query.js';
import { routeFromJson, routesTo, type RouteJson } from '../netfacts/ip-route.js';
import { podRuleDeleteLines, ruleDeleteLinesFor } from './pod-rules.js';
import { deleteHostVeth, type WiringPlan } from './wiring.js';

/** What to remove. */
export interface HostTeardown {
  /** Host veth name (computed from container id + ifname). */
  hostVeth: string;
  /** Pod IPv4 when known (ipamd's reply or prevResult); without it only the veth goes. */
  ipv4?: string;
  /**
   * The wiring plan with the ENI's route table when ipamd said which (then exactly the
   * rules `policyRoutingLines(plan)` adds are deleted). Without it (ipamd unreachable)
   * every rule naming `ipv4` alone is deleted — unless another device now routes that
   * IP (another pod got it), then rules and routes are left alone.
   */
  plan?: WiringPlan;
  /** Set when the veth was already deleted by the caller (skips that step). */
  vethDone?: boolean;
  /** How to run `ip` and where the node side is (default: the current netns, `ip` forked here). */
  node?: NodeSide;
}

/**
 * Tears down the node side of one attachment.
 * @returns warnings (things left in place on purpose, failures to delete some rule).
 * @throws IpBatchError when the host veth exists but cannot be deleted.
 */
export async function teardownHost(t: HostTeardown): Promise<string[]> {
  const node = t.node ?? LOCAL_NODE;
  if (!t.vethDone) await deleteHostVeth(t.hostVeth, node);
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
  ).find((r) => r.dev !== undefined && r.dev !== t.hostVeth);
  if (other)
    return [
      `${t.ipv4} is routed to ${other.dev} (another attachment holds it now): its rules and routes were left alone`,
    ];
  return (await ipDeleteAll(ruleDeleteLinesFor(rules!, t.ipv4), node.nodeNetns, node.ip)).map(
    (m) => `rule cleanup for ${t.ipv4}: ${m}`,
  );
}
