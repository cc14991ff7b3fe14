/**
 * The node side the netlink-wiring tests share: a fresh "node" netns from `mk`, ipamd's
 * rtnetlink helper (the built cni-plugin/eni-ipam-netlink) running in it and closed by
 * `t.after`, and the plugin's node side pointing at both.
 */
import { fileURLToPath } from 'node:url';
import { netlinkHelper, type NetlinkHelper } from '../../cni-plugin/netlink-helper.js';
import { LOCAL_IP } from '../../netfacts/ip-batch.js';
import type { NodeSide } from '../../cni-plugin/host.js';
import type { Netns } from '../../kit/netns.js';

/** The built rtnetlink helper beside the compiled plugin. */
export const NETLINK_HELPER = fileURLToPath(new URL('../../cni-plugin/eni-ipam-netlink', import.meta.url));

/**
 * Makes the node netns (`mk('n')`) and starts the helper in it.
 * @returns the netns, the helper, and the node side with the helper (`side`; ADD/DEL go through it).
 */
export async function netlinkNode(
  t: { after(fn: () => unknown): void },
  mk: (name: string) => Promise<Netns>,
): Promise<{
  node: Netns;
  helper: NetlinkHelper;
  side: NodeSide & { nodeNetns: string; netlink: NetlinkHelper };
}> {
  const node = await mk('n');
  const helper = netlinkHelper(NETLINK_HELPER, node.path);
  t.after(() => helper.close());
  return { node, helper, side: { ip: LOCAL_IP, nodeNetns: node.path, netlink: helper } };
}

/**
 * `v` (parsed `ip -json -details` output) without the keys in `drop`, at every depth: what
 * differs between two namespaces (indexes, netns ids) or moves on its own (operstate, lifetimes).
 */
export function stripKeys(v: unknown, drop: readonly string[]): unknown {
  if (Array.isArray(v)) return v.map((x) => stripKeys(x, drop));
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => !drop.includes(k))
        .map(([k, x]) => [k, stripKeys(x, drop)]),
    );
  return v;
}
