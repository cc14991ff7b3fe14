/**
 * Shrink side of the ENI lifecycle (docs/design.md#eni-ownership): free an ENI that holds
 * nothing (detach, never forced; wait until `available`; delete, NotFound = deleted), and
 * retry the deletion of orphans. Nothing is detached or deleted while releases are frozen.
 */
import { Ec2Error, type Ec2Port, type Ec2Eni } from '../../cloud/ec2-port.js';
import type { EniInventory, PoolCounts, ReleasePhases } from '../../datastore/roles.js';
import type { Logger } from '../../log.js';
import { failedForSure } from '../../cloud/ec2-outcome.js';
import { isOurEni } from './eni-ownership.js';
import { waitForAttachment, type Sleep } from './eni-wait.js';
import type { ReleaseGate } from '../release/release-gate.js';

/** What freeing needs from the ENI manager (its state is shared, not copied). */
export interface EniFreeContext {
  ds: ReleasePhases & EniInventory & PoolCounts;
  ec2: Ec2Port;
  gate: ReleaseGate;
  log: Logger;
  instanceId: string;
  now: () => number;
  /** How long to wait for a detach to settle (ms). */
  settleMs: number;
  /** Waits between polls (ms). */
  sleep: Sleep;
  /** ENIs this process works on now (the sweep skips them). */
  inFlight: Set<string>;
  /** Orphans: detached by us, not yet deleted. */
  orphans: Map<string, { deviceIndex: number }>;
  markOrphan(eniId: string, deviceIndex: number): void;
}

/** Options of {@link freeEni}. */
export interface FreeOptions {
  /** ENIs younger than this are kept (ms; default 60 000). */
  minAgeMs?: number;
  /** Checked right before the detach: true cancels the free (demand came back). */
  shouldCancel?: () => boolean;
}

/**
 * Frees an ENI that holds no assigned, cooling or unverified address: detach (never
 * forced), wait until EC2 reports it `available`, delete (NotFound counts as deleted).
 * Refuses (returns false) while releases are frozen, for the primary ENI, for an ENI
 * younger than `minAgeMs`, one not tagged as ours, or when `shouldCancel()` says the
 * demand came back before the detach. Once the detach was sent the ENI leaves the
 * datastore at once (its IPs are no longer usable); a failure after that point leaves
 * it an orphan whose deletion {@link retryOrphans} retries.
 * @returns true if the ENI left the datastore. @throws Ec2Error on a failure before the detach.
 */
export async function freeEni(c: EniFreeContext, eniId: string, opts: FreeOptions = {}): Promise<boolean> {
  const { ds, ec2, gate, log } = c;
  const info = ds.getEni(eniId);
  if (!info || info.isPrimary || c.now() - info.createdAtMs < (opts.minAgeMs ?? 60_000)) return false;
  if (gate.frozen) {
    log.info({ eniId, reasons: gate.describe() }, 'not freeing ENI: releases are frozen');
    return false;
  }
  const reserved = ds.reserveAllForRelease(eniId, c.now());
  const view = ds.poolViews(c.now()).find((v) => v.eniId === eniId);
  if (!view || view.total !== 0) {
    ds.cancelRelease(reserved);
    return false;
  }
  c.inFlight.add(eniId);
  try {
    let eni: Ec2Eni | undefined;
    try {
      [eni] = await ec2.describeEnis([eniId]);
    } catch (e) {
      ds.cancelRelease(reserved);
      if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') {
        log.warn({ eniId }, 'ENI to free no longer exists in EC2; dropped from the datastore');
        return dropFromDatastore(c, eniId);
      }
      throw e;
    }
    if (!eni || !isOurEni(eni, c.instanceId)) {
      ds.cancelRelease(reserved);
      log.warn({ eniId }, 'not freeing ENI: not tagged as ours');
      return false;
    }
    // Nothing may have come into use meanwhile (e.g. an evidence pass adopting a sandbox's IP).
    const inUse = ds.eniIps(eniId).some((ip) => ds.ipState(ip, c.now()) !== 'releasing');
    if (gate.frozen || inUse || opts.shouldCancel?.()) {
      ds.cancelRelease(reserved);
      log.info({ eniId, frozen: gate.frozen, inUse }, 'ENI free cancelled before the detach');
      return false;
    }
    // Synchronously before the call: an adoption that cancelled part of the reservation
    // (a sandbox found using one of these IPs) stops the free here.
    if (ds.markReleaseSent(reserved).length !== reserved.length) {
      ds.cancelRelease(reserved);
      log.info({ eniId }, 'ENI free cancelled before the detach: an address was adopted');
      return false;
    }
    if (eni.attachment) {
      try {
        await ec2.detachEni(eni.attachment.attachmentId);
      } catch (e) {
        if (failedForSure(e)) {
          ds.cancelRelease(reserved);
          throw e;
        }
        log.warn(
          { eniId, err: (e as Error).message },
          'detach outcome unknown; ENI taken out of the pool, the reconcile decides',
        );
      }
    }
    // From here on the ENI's IPs are (or may be) off the instance: out of the pool now.
    // An address adopted while the detach was in flight keeps its allocation, pending.
    for (const a of ds.completeRelease(ds.eniIps(eniId))) {
      log.error(
        { eniId, ip: a.ipv4, containerID: a.containerID, pod: a.pod },
        'a sandbox was found using an IP of an ENI being detached: its allocation is kept but pending (ADD refused); the pod needs a restart',
      );
    }
    dropFromDatastore(c, eniId);
    c.markOrphan(eniId, info.deviceNumber);
    try {
      await finishOrphan(c, eniId, true);
      log.info({ eniId, deviceNumber: info.deviceNumber }, 'freed ENI');
    } catch (e) {
      log.warn({ eniId, err: (e as Error).message }, 'ENI detached from the pool but not deleted yet; will retry');
    }
    return true;
  } finally {
    c.inFlight.delete(eniId);
  }
}

/**
 * Retries the deletion of orphans (detached by us, not yet deleted). Skipped while
 * releases are frozen. Errors are logged; the orphan stays for the next try.
 * @returns the ENIs deleted (or found gone).
 */
export async function retryOrphans(c: EniFreeContext): Promise<string[]> {
  const done: string[] = [];
  for (const eniId of [...c.orphans.keys()]) {
    if (c.gate.frozen || c.inFlight.has(eniId)) continue;
    c.inFlight.add(eniId);
    try {
      if (await finishOrphan(c, eniId, false)) done.push(eniId);
    } catch (e) {
      c.log.info({ eniId, err: (e as Error).message }, 'orphan ENI not deleted yet; will retry');
    } finally {
      c.inFlight.delete(eniId);
    }
  }
  return done;
}

/**
 * Deletes an orphan once EC2 shows it `available` (NotFound = already gone). With
 * `wait`, polls until detached (up to the settle timeout); without, returns false
 * while it is still detaching. @throws Ec2Error
 */
async function finishOrphan(c: EniFreeContext, eniId: string, wait: boolean): Promise<boolean> {
  try {
    if (wait) await waitForAttachment(c.ec2, eniId, 'detached', c.settleMs, c.now, c.sleep);
    else {
      const [eni] = await c.ec2.describeEnis([eniId]);
      if (eni && (eni.status !== 'available' || eni.attachment)) return false;
    }
    if (c.gate.frozen)
      throw new Ec2Error('DeleteNetworkInterface', 'ReleasesFrozen', `not deleting ${eniId}: releases are frozen`);
    await c.ec2.deleteEni(eniId);
  } catch (e) {
    if (!(e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound')) throw e;
  }
  c.orphans.delete(eniId);
  return true;
}

/** Removes an ENI whose addresses are all available from the datastore (sync, so no ADD interleaves). */
function dropFromDatastore(c: EniFreeContext, eniId: string): boolean {
  try {
    c.ds.removeEni(eniId, c.now());
    return true;
  } catch (e) {
    c.log.error({ eniId, err: (e as Error).message }, 'ENI still holds addresses in use; kept in the datastore');
    return false;
  }
}
