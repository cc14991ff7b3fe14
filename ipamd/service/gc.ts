/**
 * CNI GC on ipamd's side (CNI spec 1.1.0, "GC"): release every allocation of one
 * network whose attachment `(containerID, ifName)` the runtime did not list in
 * `cni.dev/valid-attachments`. Releases go through the normal DEL path: into cooldown,
 * made durable (one group-committed checkpoint write) before the caller replies.
 *
 * The runtime's list is one source's word, so the restore rules apply here too
 * (docs/how-it-works.md#restore-why-a-restart-cannot-lose-a-pod): an attachment the node's kernel still shows wired (a `/32`
 * host route to a veth whose peer lives in another netns) is kept whatever the list
 * says; an unreadable kernel refuses the whole GC (the runtime retries later); and the
 * release brake caps what one GC may release when the kernel's silence cannot count as
 * a second source (a view with no pod veth at all may be the wrong namespace).
 */
import { keyString } from '../datastore/records.js';
import type { Assignments } from '../datastore/roles.js';
import type { Allocation, EniInfo } from '../datastore/types.js';
import type { Logger } from '../log.js';
import type { KernelReader } from '../restore/kernel-source.js';
import { applyBrake, confirmedGone } from '../restore/release-brake.js';

/** One attachment the runtime still knows (an entry of `cni.dev/valid-attachments`). */
export interface GcAttachment {
  containerID: string;
  ifName: string;
}

/** What {@link gcNetwork} needs. */
export interface GcDeps {
  ds: Assignments;
  /** Makes the datastore's current state durable (checkpoint group commit). */
  persist: () => Promise<void>;
  /** Called after releases were made durable (the pool controller's trigger). */
  released: () => void;
  log: Logger;
  now: () => number;
  /** Route table of an ENI (main for the primary ENI, device number + 1 otherwise). */
  routeTableFor: (eni: EniInfo) => number;
  /** The node's kernel (restore's kernel source); without it the runtime's list is taken as is (unit tests). */
  kernel?: KernelReader;
}

/** One allocation GC released, with its ENI's route table (undefined if the ENI is unknown). */
export interface GcReleased {
  allocation: Allocation;
  routeTableId?: number;
}

/**
 * Releases every allocation of `networkName` not in `valid` (allocations of other
 * networks are never looked at). All releases share one checkpoint write.
 * @returns the released allocations (empty when nothing was stale).
 * @throws Error when the releases could not be made durable (they are all rolled back,
 *   so a retried GC finds them again), when the kernel cannot be read, or when the
 *   release brake holds; nothing is released then.
 */
export async function gcNetwork(
  d: GcDeps,
  networkName: string,
  valid: readonly GcAttachment[],
  reason = 'cni-gc',
): Promise<GcReleased[]> {
  const keep = new Set(valid.map((v) => keyString({ networkName, containerID: v.containerID, ifName: v.ifName })));
  const now = d.now();
  const all = d.ds.allocations();
  let stale = all.filter((a) => a.networkName === networkName && !keep.has(keyString(a)));
  if (stale.length === 0) return [];
  if (d.kernel) {
    const k = await d.kernel.readKernel().catch((e: Error) => {
      throw new Error(`GC refused: ${e.message}; nothing released`);
    });
    const wired = stale.filter((a) => k.pods.has(a.ipv4));
    for (const a of wired)
      d.log.warn(
        { ip: a.ipv4, containerID: a.containerID, ifName: a.ifName, veth: k.pods.get(a.ipv4)?.dev },
        'GC: the runtime did not list this attachment but the kernel shows it wired to a pod veth; kept',
      );
    stale = stale.filter((a) => !k.pods.has(a.ipv4));
    const kernelCounts = k.podVeths > 0;
    const confirmed = stale.filter(() => confirmedGone({ cri: true, kube: false, kernel: kernelCounts })).length;
    const brake = applyBrake({
      held: all.length,
      single: stale.length - confirmed,
      confirmed,
      sources: "the runtime's valid-attachments list",
    });
    if (brake.held) {
      d.log.error({ reason: brake.reason }, 'GC held by the release brake');
      throw new Error(`GC refused: ${brake.reason}`);
    }
  }
  const released: Allocation[] = [];
  for (const a of stale) {
    const r = d.ds.unassign(a, now);
    if (r) released.push(r);
  }
  if (released.length === 0) return [];
  try {
    await d.persist();
  } catch (e) {
    for (const a of released) d.ds.rollbackUnassign(a);
    d.log.error(
      { err: (e as Error).message, count: released.length },
      'checkpoint write failed; GC releases rolled back',
    );
    throw new Error(`could not persist the GC releases: ${(e as Error).message}`);
  }
  d.released();
  for (const a of released)
    d.log.info(
      {
        podNamespace: a.pod?.namespace ?? null,
        podName: a.pod?.name ?? null,
        ip: a.ipv4,
        eniId: a.eniId,
        containerID: a.containerID,
        ifName: a.ifName,
        reason,
      },
      "released IP (attachment not in the runtime's valid list)",
    );
  return released.map((a) => {
    const eni = d.ds.getEni(a.eniId);
    return eni ? { allocation: a, routeTableId: d.routeTableFor(eni) } : { allocation: a };
  });
}
