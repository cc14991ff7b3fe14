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
import { monoNow } from '../clock.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { ReconcileReport } from '../controller/eni-lifecycle/eni-reconcile.js';
import type { DatastoreViews } from '../datastore/roles.js';
import type { Logger } from '../log.js';
import type { NodeInventory } from './discover.js';
import { checkpointBoundsFor, readCheckpoint } from '../checkpoint/index.js';
import type { Ec2Eni, InstanceTypeLimits } from '../cloud/ec2.js';
import type { Ec2Port } from '../cloud/ec2-port.js';
import { CacheGuardedEc2 } from '../cloud/cache-guarded-ec2.js';
import { InventoryCacheWriter, uncoveredAllocation } from '../cloud/inventory-cache.js';

/** The release-gate source held while the cached inventory is unconfirmed. */
export const CONFIRM_GATE_SOURCE = 'ec2-confirm';

/** A uniformly random delay in [0, maxMs) (ms), the confirm's start-up jitter. */
export function confirmJitterMs(maxMs: number): number {
  return Math.floor(Math.random() * maxMs);
}

/**
 * The checkpoint side of the cache check (discover.ts `inventoryCache.check`): the cache
 * is refused — the start describes EC2, as on a first boot — unless the checkpoint at
 * `checkpointPath` (read without changing anything on disk; bounds from `limits`) is
 * readable, from boot `bootId`, and every allocation it holds is on an address the
 * cached managed ENIs list (a secondary IP, or inside a /28 prefix). A held address the
 * cache lacks (an ENI IMDS did not list yet, a lost write) would come back `pending`,
 * not served to its pod. @returns the refusal, or undefined. Never throws.
 */
export function checkpointCoverage(
  checkpointPath: string,
  bootId: string,
): (c: { managed: readonly Ec2Eni[]; limits: InstanceTypeLimits }) => Promise<string | undefined> {
  return async ({ managed, limits }) => {
    try {
      const r = await readCheckpoint(checkpointPath, checkpointBoundsFor(limits.maxEnis, limits.ipv4PerEni));
      if (r.kind === 'missing') return 'no checkpoint of this ipamd';
      if (r.kind === 'corrupt') return `the checkpoint is unusable (${r.reason})`;
      if (r.data.bootId !== bootId) return 'the checkpoint is from another boot';
      const ip = uncoveredAllocation(
        managed,
        r.data.allocations.map((a) => a.ipv4),
      );
      return ip === undefined ? undefined : `the checkpoint holds ${ip}, which the file does not list`;
    } catch (e) {
      return `could not check the checkpoint against it (${(e as Error).message})`;
    }
  };
}

/**
 * The running cache: `ec2` is the EC2 port every part that calls EC2 after start-up must
 * be given (it keeps the cache in step, see cache-guarded-ec2.ts); `confirmed` is the
 * first successful reconcile pass's observer.
 */
export interface InventoryCacheHandle {
  ec2: Ec2Port;
  confirmed(r: ReconcileReport): void;
  stop(): Promise<void>;
}

/**
 * Starts keeping `file` in step (see the module comment) and returns, as `ec2`, `inv.ec2`
 * behind a {@link CacheGuardedEc2}: the port to hand the controller (`inv.ec2` itself is
 * left as is). Call after the inventory is loaded into `ds`. Never throws.
 */
export function startInventoryCache(p: {
  file: string;
  bootId: string;
  inv: NodeInventory;
  ds: DatastoreViews;
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
  const ec2 = new CacheGuardedEc2(inv.ec2, writer);
  const t0 = monoNow();
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
    ec2,
    confirmed(r) {
      if (!gate.describe().some((d) => d.startsWith(CONFIRM_GATE_SOURCE))) return;
      log.info(
        {
          afterMs: monoNow() - t0,
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
