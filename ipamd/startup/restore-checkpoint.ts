/**
 * Restores allocations from the checkpoint into the datastore (docs/design.md#3-contracts, docs/design.md#4-restore-after-restart).
 *
 * - Same boot: every allocation is re-created; cooldown entries and the remembered
 *   DELs (`released`, so a sandbox still stopping is not re-adopted) too. Their stamps are
 *   converted to this process's clock through the checkpoint's `monoAtBoot`
 *   (checkpoint/boot-stamps.ts), so a wall-clock step while ipamd was down neither ends a
 *   cooldown early nor ages an allocation past its GC grace.
 * - Another boot: no sandbox survives a reboot, so the allocations are dropped and
 *   their IPs stay in the warm pool (still assigned in EC2; nothing is released here);
 *   the addresses that were cooling cool for a full IP_COOLDOWN_PERIOD from now.
 * - Missing or corrupt file while the ENIs already hold secondary IPs: nobody can vouch
 *   for those IPs being free, so they are marked unverified (never handed out, never
 *   released) and releases are frozen (source "checkpoint") until a clean read of the
 *   runtime adopts what is in use. A fresh node (no secondary IP anywhere) needs neither.
 */
import type { CheckpointData, CheckpointLoad } from '../checkpoint/index.js';
import type { PoolCounts, RestoreTarget } from '../datastore/roles.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { Logger } from '../log.js';
import { rebaseStamp, stampScale } from '../checkpoint/boot-stamps.js';

/** Outcome counts of a restore, for logs and tests. */
export interface CheckpointRestoreSummary {
  kind: CheckpointLoad['kind'] | 'other-boot';
  restored: number;
  pending: number;
  conflicts: number;
  dropped: number;
}

/** Applies a loaded checkpoint to the datastore and the release gate. */
export function restoreFromCheckpoint(p: {
  load: CheckpointLoad;
  bootId: string;
  ds: RestoreTarget & PoolCounts;
  gate: ReleaseGate;
  log: Logger;
  path: string;
  now: number;
  /** This process's `monoAtBoot` (ipamd/clock.ts, ms): converts the checkpoint's stamps. */
  monoAtBoot: number;
  /**
   * Set when the data was imported from another IPAM's checkpoint (aws-node, the path):
   * the IPs it does not name are marked unverified and releases frozen (source
   * "checkpoint") until a clean evidence pass, as with no checkpoint at all, because
   * another program's file is not evidence that the rest is free.
   */
  importedFrom?: string;
}): CheckpointRestoreSummary {
  const { load, ds, gate, log } = p;
  const sum: CheckpointRestoreSummary = { kind: load.kind, restored: 0, pending: 0, conflicts: 0, dropped: 0 };
  if (load.kind !== 'ok') {
    const held = ds.counts(p.now).total;
    const why =
      load.kind === 'missing'
        ? `no checkpoint at ${p.path}`
        : `checkpoint was corrupt (${load.reason}; kept at ${load.movedTo})`;
    if (load.kind === 'corrupt')
      log.error({ reason: load.reason, movedTo: load.movedTo }, 'checkpoint corrupt: moved aside, rebuilding state');
    if (held > 0) {
      ds.markAllUnverified();
      gate.freeze('checkpoint', `${why} while the ENIs hold ${held} secondary IPs that pods may be using`);
      log.warn({ held }, `${why}: releases frozen until a source vouches for the IPs in use`);
    } else {
      log.info(`${why}; fresh node, nothing to restore`);
    }
    return sum;
  }
  const data: CheckpointData = load.data;
  if (load.journal)
    log.info(
      { ...load.journal },
      load.journal.tornBytes > 0
        ? 'checkpoint journal applied; its torn last record (never acknowledged) ignored'
        : 'checkpoint journal applied',
    );
  const scale = stampScale(data, p.bootId, p.monoAtBoot);
  const at = (stamp: number) => rebaseStamp(stamp, scale, p.now);
  if (scale.kind === 'other-boot') {
    sum.kind = 'other-boot';
    sum.dropped = data.allocations.length;
    for (const c of data.cooldown) ds.restoreCooldown(c.ip, at(c.releasedAt), p.now);
    log.info(
      {
        checkpointBoot: data.bootId,
        bootId: p.bootId,
        allocations: data.allocations.length,
        cooling: data.cooldown.length,
      },
      'checkpoint is from a previous boot: no sandbox survives a reboot, its IPs return to the warm pool (still assigned in EC2); those that were cooling cool for a full period',
    );
    return sum;
  }
  if (scale.kind === 'legacy')
    log.info('checkpoint without monoAtBoot (an older ipamd): its stamps are read on the wall clock, clamped to now');
  // Before the allocations: one restored for the same container clears its entry (an ADD after the DEL).
  ds.restoreUnassigned((data.released ?? []).map((r) => ({ ...r, releasedAt: at(r.releasedAt) })));
  for (const a of data.allocations) {
    const r = ds.restoreAllocation({ ...a, allocatedAt: at(a.allocatedAt) });
    if (r === 'restored') sum.restored++;
    else if (r === 'pending') sum.pending++;
    else if (r === 'releasing') {
      // Only if a release were under way (never at start-up): recorded, EC2's answer decides (Datastore.restoreAllocation).
      sum.restored++;
      log.error(
        { allocation: a },
        'checkpoint allocation holds an IP whose unassign is in flight at EC2; kept, EC2 decides',
      );
    } else {
      sum.conflicts++;
      log.error({ allocation: a, result: r }, 'checkpoint allocation conflicts with another; kept the first');
    }
  }
  for (const c of data.cooldown) ds.restoreCooldown(c.ip, at(c.releasedAt), p.now);
  if (p.importedFrom !== undefined) {
    const others = ds.markAllUnverified();
    if (others > 0)
      gate.freeze(
        'checkpoint',
        `allocations imported from the aws-node checkpoint ${p.importedFrom}; the ${others} other IPs on the ENIs stay unverified until every source has been read`,
      );
  }
  if (sum.pending > 0)
    log.warn(
      { pending: ds.pendingAllocations().map((a) => a.ipv4) },
      'restored allocations whose IP EC2 does not show on our ENIs: kept, never handed out',
    );
  log.info(
    {
      restored: sum.restored,
      pending: sum.pending,
      conflicts: sum.conflicts,
      rememberedDels: data.released?.length ?? 0,
    },
    'restored allocations from checkpoint',
  );
  return sum;
}
