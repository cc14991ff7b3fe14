/**
 * CNI GC on ipamd's side (CNI spec 1.1.0, "GC"): release every allocation of one
 * network whose attachment `(containerID, ifName)` the runtime did not list in
 * `cni.dev/valid-attachments`. Releases go through the normal DEL path: into cooldown,
 * made durable (one group-committed checkpoint write) before the caller replies.
 */
import { keyString, type Datastore } from '../datastore/datastore.js';
import type { Allocation, EniInfo } from '../datastore/types.js';
import type { Logger } from '../log.js';

/** One attachment the runtime still knows (an entry of `cni.dev/valid-attachments`). */
export interface GcAttachment {
  containerID: string;
  ifName: string;
}

/** What {@link gcNetwork} needs. */
export interface GcDeps {
  ds: Datastore;
  /** Makes the datastore's current state durable (checkpoint group commit). */
  persist: () => Promise<void>;
  /** Called after releases were made durable (the pool controller's trigger). */
  released: () => void;
  log: Logger;
  now: () => number;
  /** Route table of an ENI (main for the primary ENI, device number + 1 otherwise). */
  routeTableFor: (eni: EniInfo) => number;
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
 * @throws Error when the releases could not be made durable; they are all rolled back,
 *   so a retried GC finds them again.
 */
export async function gcNetwork(d: GcDeps, networkName: string, valid: readonly GcAttachment[], reason = 'cni-gc'): Promise<GcReleased[]> {
  const keep = new Set(valid.map((v) => keyString({ networkName, containerID: v.containerID, ifName: v.ifName })));
  const now = d.now();
  const released: Allocation[] = [];
  for (const a of d.ds.allocations()) {
    if (a.networkName !== networkName || keep.has(keyString(a))) continue;
    const r = d.ds.release(a, now);
    if (r) released.push(r);
  }
  if (released.length === 0) return [];
  try {
    await d.persist();
  } catch (e) {
    for (const a of released) d.ds.rollbackRelease(a);
    d.log.error({ err: (e as Error).message, count: released.length }, 'checkpoint write failed; GC releases rolled back');
    throw new Error(`could not persist the GC releases: ${(e as Error).message}`);
  }
  d.released();
  for (const a of released) d.log.info({ podNamespace: a.pod?.namespace ?? null, podName: a.pod?.name ?? null, ip: a.ipv4, eniId: a.eniId, containerID: a.containerID, ifName: a.ifName, reason }, 'released IP (attachment not in the runtime\'s valid list)');
  return released.map((a) => {
    const eni = d.ds.getEni(a.eniId);
    return eni ? { allocation: a, routeTableId: d.routeTableFor(eni) } : { allocation: a };
  });
}
