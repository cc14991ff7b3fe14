/**
 * Deleting an attachment's host veth(s) on the node side, through ipamd's netlink helper
 * when there is one, else with `ip`. A host veth is named after its pod
 * (veth-name.ts `hostVethNames`), so during a fast re-create two sandboxes of one pod
 * share the name, and the older one's DEL runs while the newer one's ADD takes the name
 * over (deletes the older veth and makes its own). Every delete here is of the link of
 * that name *with this attachment's MAC* (veth-name.ts `hostVethMac`), deleted by the
 * index it had when its MAC was read, never by the name alone: a link made under the
 * name since is another link and is left; a link gone since is success. Only ADD, taking
 * the name over (as amazon-vpc-cni-k8s's `setupVeth` does), deletes by name whatever the
 * MAC. A link of that name with another MAC counts as absent.
 */
import { IpBatchError } from '../netfacts/ip-batch.js';
import { ipShow, type IpJson } from '../netfacts/ip-query.js';
import { LOCAL_NODE, type NodeSide } from './host.js';
import type { VethPlan } from './wiring-plan.js';

/** What {@link deleteHostVeths} may take: this attachment's links only (default), or any of those names. */
export interface DeleteScope {
  /** Delete a link of the name whatever its MAC (a repeated or re-created ADD taking the name over). */
  anyMac?: boolean;
}

/**
 * Deletes the host veth of `p` and, for an IPv6 pod, its egress host veth (each removes
 * its peer, host route and neighbours), each only with the MAC `p` gives it unless
 * `scope.anyMac`. Both are tried.
 * @returns true if the first was deleted.
 * @throws the first failure other than "no such device".
 */
export async function deleteHostVeths(
  p: Pick<VethPlan, 'hostVeth' | 'hostMac' | 'egress'>,
  node: NodeSide = LOCAL_NODE,
  scope: DeleteScope = {},
): Promise<boolean> {
  const mac = (m: string) => (scope.anyMac ? undefined : m);
  const [first, egress] = await Promise.allSettled([
    deleteHostVeth(p.hostVeth, node, mac(p.hostMac)),
    p.egress ? deleteHostVeth(p.egress.hostVeth, node, mac(p.egress.hostMac)) : Promise.resolve(false),
  ]);
  if (first.status === 'rejected') throw first.reason;
  if (egress.status === 'rejected') throw egress.reason;
  return first.value;
}

/**
 * Deletes the host veth `a` and the egress host veth `b` of an IPv6 pod (each removes its
 * peer, host route and neighbours), each only with its MAC in `macs` when given: in one
 * request through `node.netlink` when there is one and both exist (one kernel batch),
 * else one by one ({@link deleteHostVeth}).
 * @returns each deletion's outcome as {@link deleteHostVeth}'s (true: it was deleted).
 */
export async function deleteHostVethPair(
  a: string,
  b: string,
  node: NodeSide = LOCAL_NODE,
  macs?: [string, string],
): Promise<[PromiseSettledResult<boolean>, PromiseSettledResult<boolean>]> {
  const both = node.netlink
    ? await node.netlink.delLinks(a, b, macs).then(
        () => true,
        () => false,
      )
    : false;
  if (both)
    return [
      { status: 'fulfilled', value: true },
      { status: 'fulfilled', value: true },
    ];
  const [x, y] = await Promise.allSettled([deleteHostVeth(a, node, macs?.[0]), deleteHostVeth(b, node, macs?.[1])]);
  return [x, y];
}

/**
 * Deletes the host veth `name` on the node side (`node`, default the current netns),
 * which removes its peer and the host route with it; with `mac`, only when the link has
 * that MAC. Through `node.netlink` when there is one (the MAC compared and the link
 * deleted by index in one request); else with `ip`: without `mac` by name, with it one
 * `ip -json link show` and then the link of that name and MAC deleted by its index
 * ({@link deleteLinkByIndex}), so a link made under the name since the read stays.
 * @returns true if it was deleted, false if there was no such device (or none of `mac`).
 * @throws IpBatchError for any other failure.
 */
export async function deleteHostVeth(name: string, node: NodeSide = LOCAL_NODE, mac?: string): Promise<boolean> {
  if (node.netlink) return node.netlink.delLink(name, mac);
  if (!mac) return deleteLink(node, name);
  const [links] = await ipShow(['link show'], node.nodeNetns, node.ip);
  const link = links!.find((l) => l.ifname === name && hasMac(l, mac));
  return link ? deleteLinkByIndex(node, links!, link) : false;
}

/** True when the `ip -json link show` object `l` has the MAC `mac` (any case). */
const hasMac = (l: IpJson, mac: string): boolean => String(l.address).toLowerCase() === mac.toLowerCase();

/** What `ip link del` prints when the link is gone: by name "Cannot find device", by index ENODEV. */
const LINK_GONE = /Cannot find device|does not exist|No such device/i;

/** `ip link del dev <dev>` on the node side. @returns false when there is no such device. @throws IpBatchError otherwise. */
async function deleteLink(node: NodeSide, dev: string): Promise<boolean> {
  try {
    await node.ip.ipBatch([`link del dev ${dev}`], node.nodeNetns);
    return true;
  } catch (e) {
    if (e instanceof IpBatchError && LINK_GONE.test(e.stderr)) return false;
    throw e;
  }
}

/**
 * Deletes the node link `link` (an object of `links`, one `ip -json link show` of the node
 * side) by its index: `ip link del dev if<index>`, which iproute2 resolves to that index
 * when no link is named so (lib/ll_map.c `ll_name_to_index`: by name first, then
 * `if<N>`); the kernel does not hand an index out again soon, so the delete takes that
 * link or, when it went since the read, nothing.
 * @returns true if it was deleted, false if it was gone.
 * @throws Error when a link in `links` is named `if<index>` (iproute2 would take that one:
 *   refused, nothing deleted); IpBatchError for a failure other than "no such device".
 */
async function deleteLinkByIndex(node: NodeSide, links: readonly IpJson[], link: IpJson): Promise<boolean> {
  const index = Number(link.ifindex);
  if (!Number.isInteger(index) || index <= 0)
    throw new Error(`ip -json link show gave ${String(link.ifname)} no usable ifindex (${String(link.ifindex)})`);
  const byIndex = `if${index}`;
  if (links.some((l) => l.ifname === byIndex))
    throw new Error(
      `not deleting ${String(link.ifname)} (index ${index}): a link is named ${byIndex}, which \`ip link del dev ${byIndex}\` would take instead`,
    );
  return deleteLink(node, byIndex);
}

/** How {@link deleteOwnedVeth} looks beyond the names it is given. */
export interface OwnedVethLookup {
  /**
   * When none of the names is there with the MAC, look the MAC up among the node's links
   * (one `ip -json link show`) and delete that link: for an owner whose pod is unknown
   * (veth-name.ts `knowsPod`), whose name ADD computed from a pod this caller cannot see.
   */
  byMac?: boolean;
}

/**
 * Deletes the first of `names` that is this attachment's host veth (MAC `mac`): the
 * current name, then the older ones (veth-name.ts `hostVethNames`), so a pod wired by an
 * earlier eni-ipam is unwired as one wired now; with `lookup.byMac`, then the node's link
 * of that MAC whatever its name. The MAC is derived from the attachment's key
 * (veth-name.ts `hostVethMac`), so no other sandbox's link has it; the link is deleted by
 * its index (helper: in its request; `ip`: {@link deleteLinkByIndex} after one read).
 * @returns the name deleted, or undefined when no link of that MAC was found (or it went meanwhile).
 * @throws IpBatchError for a failure other than "no such device".
 */
export async function deleteOwnedVeth(
  names: readonly string[],
  mac: string,
  node: NodeSide = LOCAL_NODE,
  lookup: OwnedVethLookup = {},
): Promise<string | undefined> {
  if (node.netlink) {
    for (const name of names) if (await node.netlink.delLink(name, mac)) return name;
    if (!lookup.byMac) return undefined;
  }
  const [links] = await ipShow(['link show'], node.nodeNetns, node.ip);
  const mine = links!.filter((l) => hasMac(l, mac));
  const link =
    names.map((n) => mine.find((l) => l.ifname === n)).find((l) => l !== undefined) ??
    (lookup.byMac ? mine[0] : undefined);
  const name = typeof link?.ifname === 'string' ? link.ifname : undefined;
  if (!link || !name) return undefined;
  const deleted = node.netlink ? await node.netlink.delLink(name, mac) : await deleteLinkByIndex(node, links!, link);
  return deleted ? name : undefined;
}
