/**
 * Restarts that cost no EC2 call: wires the ENI inventory cache (inventory-cache.ts)
 * into a running ipamd.
 *
 * - Every start keeps the cache in step with the datastore (periodic write, and a write
 *   without what an unassign or detach gives back before that call leaves).
 * - A start that discovered from the cache (`inv.source === 'cache'`) serves at once from
 *   it, the checkpoint and IMDS, and freezes releases (source `ec2-confirm`): nothing is
 *   given back to EC2, nor any ENI deleted, from a view EC2 has not confirmed. The first
 *   successful EC2/IMDS reconcile pass — run after a random delay up to
 *   ENI_IPAM_RESTART_CONFIRM_JITTER, retried with backoff while EC2 fails — is the
 *   confirm: it adds what EC2 shows that the cache lacked, drops available addresses EC2
 *   no longer shows (held ones are kept and reported, never lost track of), and lifts the
 *   freeze. See docs/design.md#4-restore for the rules.
 */
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { ReconcileReport } from '../controller/eni-lifecycle/eni-reconcile.js';
import type { Datastore } from '../datastore/datastore.js';
import type { Logger } from '../log.js';
import type { NodeInventory } from './discover.js';
import { guardReleases, InventoryCacheWriter } from './inventory-cache.js';

/** The release-gate source held while the cached inventory is unconfirmed. */
export const CONFIRM_GATE_SOURCE = 'ec2-confirm';

/** A uniformly random delay in [0, maxMs) (ms), the confirm's start-up jitter. */
export function confirmJitterMs(maxMs: number): number {
  return Math.floor(Math.random() * maxMs);
}

/** The running cache: `confirmed` is the first successful reconcile pass's observer. */
export interface InventoryCacheHandle {
  confirmed(r: ReconcileReport): void;
  stop(): Promise<void>;
}

/**
 * Starts keeping `file` in step (see the module comment); wraps `inv.ec2`'s release calls
 * in place. Call after the inventory is loaded into `ds`. Never throws.
 */
export function startInventoryCache(p: {
  file: string;
  bootId: string;
  inv: NodeInventory;
  ds: Datastore;
  gate: ReleaseGate;
  log: Logger;
}): InventoryCacheHandle {
  const { inv, gate, log } = p;
  const writer = new InventoryCacheWriter({
    file: p.file,
    bootId: p.bootId,
    instanceId: inv.instance.instanceId,
    ds: p.ds,
    managed: inv.managed,
    unmanaged: inv.unmanaged,
    log,
  });
  guardReleases(inv.ec2, writer);
  const t0 = Date.now();
  if (inv.source === 'cache') {
    gate.freeze(
      CONFIRM_GATE_SOURCE,
      'serving from the cached ENI inventory of this boot; EC2 has not confirmed it yet',
    );
  } else {
    void writer.write();
  }
  writer.start();
  return {
    confirmed(r) {
      if (!gate.describe().some((d) => d.startsWith(CONFIRM_GATE_SOURCE))) return;
      log.info(
        {
          afterMs: Date.now() - t0,
          addedIps: r.addedIps.length,
          removedIps: r.removedIps.length,
          heldMissing: r.heldMissing,
          adoptedEnis: r.adoptedEnis,
          removedEnis: r.removedEnis,
        },
        'EC2 confirmed the cached ENI inventory',
      );
      gate.lift(CONFIRM_GATE_SOURCE);
      void writer.write();
    },
    stop: () => writer.stop(),
  };
}
