/**
 * Executes the shrink side of the warm pool (docs/design.md#10-the-warm-pool-at-depth item 3; docs/design.md#pool-math):
 * surplus is released only after it stayed surplus for ENI_IPAM_SHRINK_DELAY
 * ({@link SurplusTracker}: the amount is the smallest surplus seen over that window),
 * in one UnassignPrivateIpAddresses per ENI, and whole ENIs are freed only within the
 * same hysteresis budget.
 *
 * Shrink never races an ADD: the IPs of a batch are first reserved in the datastore
 * (state `releasing`, which ADD never hands out), then sent to EC2. Before every EC2
 * call and between ENIs it checks whether demand came back (an ADD waits, or the pool is
 * short of its targets without the reserved IPs); if so the reservation is returned and
 * the shrink stops. From the reservation to EC2's answer the steps are release-batch.ts:
 * an IP the evidence pass adopts before the call is not sent; one adopted while the call
 * is in flight follows EC2's answer (kept if EC2 keeps it, flagged pending and reported
 * in {@link ShrinkOutcome.lost} if EC2 took it); an outcome EC2 did not give (5xx,
 * timeout) stays reserved until a describe settles it.
 */
import type { Ec2Port } from '../../cloud/ec2-port.js';
import type { PoolCounts, ReleasePhases } from '../../datastore/roles.js';
import type { Allocation } from '../../datastore/types.js';
import type { Logger } from '../../log.js';
import { ADDRESSES_PER_SLOT, planShrink, poolCounts, type PoolTargets, type SurplusTracker } from '../../pool/index.js';
import type { EniManager } from '../eni-lifecycle/eni-manager.js';
import { PrefixReleaser } from '../release/prefix-release.js';
import { decideSend, sendRelease, UnsettledReleases, type ReleaseOps } from '../release/release-batch.js';
import type { ReleaseGate } from '../release/release-gate.js';

/** Options of {@link ShrinkExecutor}. */
export interface ShrinkExecutorOptions {
  ds: PoolCounts & ReleasePhases;
  ec2: Ec2Port;
  enis: EniManager;
  gate: ReleaseGate;
  log: Logger;
  targets: PoolTargets;
  surplus: SurplusTracker;
  /** How long a surplus must persist before it is released (ms). */
  shrinkDelayMs: number;
  /** Minimum ENI age before it may be freed (ms). */
  minEniAgeMs: number;
  now: () => number;
  /** Why no ENI may be freed now (a cordoned node, as aws-node's tryFreeENI), or undefined; surplus IPs are still released. */
  eniFreePaused?: () => string | undefined;
}

/** What one shrink run did (for logs and tests). */
export interface ShrinkOutcome {
  unassigned: string[];
  freedEnis: string[];
  /** Allocations adopted onto an address while its unassign was in flight, which EC2 then took (now pending; logged as errors). */
  lost: Allocation[];
  /** Why the run stopped early, if it did. */
  cancelled?: string;
}

/** Runs shrink passes; one at a time (the pool controller's single flight). */
export class ShrinkExecutor {
  private readonly ops: ReleaseOps;
  /** IPs whose unassign outcome is unknown, by ENI: kept `releasing` until EC2 settles it. */
  private readonly unsettled: UnsettledReleases;

  /** Prefix delegation: releases whole free /28 prefixes instead of single IPs (prefix-release.ts). */
  private readonly prefixes?: PrefixReleaser;

  constructor(private readonly o: ShrinkExecutorOptions) {
    const { ds } = o;
    this.ops = {
      what: 'secondary IPs',
      cancel: (ips) => ds.cancelRelease(ips),
      markSent: (ips) => ds.markReleaseSent(ips),
      complete: (ips) => ds.completeRelease(ips),
      onEni: (eni) => eni.secondaryIps,
    };
    this.unsettled = new UnsettledReleases({ ec2: o.ec2, log: o.log, ops: this.ops });
    if (o.targets.unit === 'prefix')
      this.prefixes = new PrefixReleaser({ ds: o.ds, ec2: o.ec2, gate: o.gate, log: o.log, now: o.now });
  }

  /** IPs held back because an unassign's outcome is not known yet. */
  unsettledIps(): string[] {
    return this.unsettled.list();
  }

  /**
   * One shrink pass. `demandWaiting()` is true while ADDs wait for an address.
   * Never throws (EC2 failures are logged; the next pass retries).
   */
  async run(demandWaiting: () => boolean): Promise<ShrinkOutcome> {
    const { ds, enis, gate, log, targets } = this.o;
    const out: ShrinkOutcome = { unassigned: [], freedEnis: [], lost: [] };
    out.lost.push(...(await this.unsettled.settle()), ...((await this.prefixes?.settle()) ?? []));
    const now = this.o.now();
    const views = ds.poolViews(now);
    const counts = poolCounts(views, targets);
    this.o.surplus.observe(counts.over, now);
    let budget = this.o.surplus.releasable(now, this.o.shrinkDelayMs);
    if (budget <= 0 || gate.frozen) return out;
    const demand = (): string | undefined => {
      if (demandWaiting()) return 'an ADD is waiting for an address';
      if (gate.frozen) return 'releases frozen';
      if (poolCounts(ds.poolViews(this.o.now()), targets).short > 0) return 'the pool fell below its targets';
      return undefined;
    };
    const cancel = (why: string): ShrinkOutcome => {
      this.o.surplus.observe(0, this.o.now()); // demand came back: a new surplus must persist again
      log.info({ why, unassigned: out.unassigned.length }, 'shrink cancelled');
      return { ...out, cancelled: why };
    };
    const plan = planShrink(views, targets, now, this.o.minEniAgeMs);
    for (const u of plan.unassign) {
      if (budget <= 0) break;
      if (this.prefixes) {
        // prefix delegation: u.count is /28 prefixes, the budget is addresses
        const r = await this.prefixes.release(
          u.eniId,
          Math.min(u.count, Math.floor(budget / ADDRESSES_PER_SLOT.prefix)),
          demand,
        );
        if (r.kind === 'cancelled') return cancel(r.why);
        if (r.kind === 'failed') return out;
        out.unassigned.push(...r.prefixes);
        out.lost.push(...r.lost);
        budget -= r.prefixes.length * ADDRESSES_PER_SLOT.prefix;
        continue;
      }
      const ips = ds.reserveForRelease(u.eniId, Math.min(u.count, budget), this.o.now());
      if (ips.length === 0) continue;
      const d = decideSend(ips, this.ops, gate, demand);
      if (d.kind === 'cancelled') return cancel(d.why);
      if (d.kind === 'nothing') continue;
      const r = await sendRelease({
        eniId: u.eniId,
        items: d.items,
        call: () => this.o.ec2.unassignIps(u.eniId, d.items),
        ops: this.ops,
        unsettled: this.unsettled,
        log,
      });
      if (!r.ok) {
        out.lost.push(...(await this.unsettled.settle()));
        return out;
      }
      log.info({ eniId: u.eniId, ips: d.items }, 'released surplus secondary IPs');
      out.unassigned.push(...d.items);
      out.lost.push(...r.lost);
      budget -= d.items.length;
    }
    const paused = plan.deleteEnis.length ? this.o.eniFreePaused?.() : undefined;
    if (paused) log.debug({ enis: plan.deleteEnis, why: paused }, 'not freeing surplus ENIs');
    for (const eniId of paused ? [] : plan.deleteEnis) {
      const why = demand();
      if (why) return cancel(why);
      const view = ds.poolViews(this.o.now()).find((v) => v.eniId === eniId);
      if (!view) continue;
      const cost = counts.mode === 'warm-eni' ? Math.max(view.total, 1) : view.total;
      if (cost > budget) continue; // ENI deletes spend the same hysteresis budget
      try {
        if (await enis.free(eniId, { minAgeMs: this.o.minEniAgeMs, shouldCancel: () => demand() !== undefined })) {
          out.freedEnis.push(eniId);
          budget -= cost;
        }
      } catch (e) {
        log.warn({ eniId, err: (e as Error).message }, 'freeing ENI failed; will retry');
      }
    }
    return out;
  }
}
