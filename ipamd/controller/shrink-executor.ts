/**
 * Executes the shrink side of the warm pool (issue 4 item 3; DESIGN §3 "Pool math"):
 * surplus is released only after it stayed surplus for ENI_IPAM_SHRINK_DELAY
 * ({@link SurplusTracker}: the amount is the smallest surplus seen over that window),
 * in one UnassignPrivateIpAddresses per ENI, and whole ENIs are freed only within the
 * same hysteresis budget.
 *
 * Shrink never races an ADD: the IPs of a batch are first reserved in the datastore
 * (state `releasing`, which ADD never hands out), then sent to EC2. Before every EC2
 * call and between ENIs it checks whether demand came back (an ADD waits, or the pool is
 * short of its targets without the reserved IPs); if so the reservation is returned and
 * the shrink stops. A failed unassign returns its IPs only when EC2 surely did not act
 * (4xx/throttle); otherwise EC2 is asked which IPs are still on the ENI, and IPs whose
 * fate is unknown stay reserved until a later describe settles them.
 */
import type { Ec2Api } from '../cloud/ec2.js';
import type { Datastore } from '../datastore/datastore.js';
import type { Logger } from '../log.js';
import { ADDRESSES_PER_SLOT, planShrink, poolCounts, type PoolTargets, type SurplusTracker } from '../pool/index.js';
import { unassignRefusedKeepingAddresses } from './eni-ownership.js';
import type { EniManager } from './eni-manager.js';
import { PrefixReleaser } from './prefix-release.js';
import type { ReleaseGate } from './release-gate.js';

/** Options of {@link ShrinkExecutor}. */
export interface ShrinkExecutorOptions {
  ds: Datastore;
  ec2: Ec2Api;
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
}

/** What one shrink run did (for logs and tests). */
export interface ShrinkOutcome {
  unassigned: string[];
  freedEnis: string[];
  /** Why the run stopped early, if it did. */
  cancelled?: string;
}

/** Runs shrink passes; one at a time (the pool controller's single flight). */
export class ShrinkExecutor {
  /** IPs whose unassign outcome is unknown, by ENI: kept `releasing` until EC2 settles it. */
  private readonly unsettled = new Map<string, Set<string>>();

  /** Prefix delegation: releases whole free /28 prefixes instead of single IPs (prefix-release.ts). */
  private readonly prefixes?: PrefixReleaser;

  constructor(private readonly o: ShrinkExecutorOptions) {
    if (o.targets.unit === 'prefix') this.prefixes = new PrefixReleaser({ ds: o.ds, ec2: o.ec2, gate: o.gate, log: o.log, now: o.now });
  }

  /** IPs held back because an unassign's outcome is not known yet. */
  unsettledIps(): string[] {
    return [...this.unsettled.values()].flatMap((s) => [...s]);
  }

  /**
   * One shrink pass. `demandWaiting()` is true while ADDs wait for an address.
   * Never throws (EC2 failures are logged; the next pass retries).
   */
  async run(demandWaiting: () => boolean): Promise<ShrinkOutcome> {
    const { ds, enis, gate, log, targets } = this.o;
    const out: ShrinkOutcome = { unassigned: [], freedEnis: [] };
    await this.settle();
    await this.prefixes?.settle();
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
      if (this.prefixes) { // prefix delegation: u.count is /28 prefixes, the budget is addresses
        const r = await this.prefixes.release(u.eniId, Math.min(u.count, Math.floor(budget / ADDRESSES_PER_SLOT.prefix)), demand);
        if (r.kind === 'cancelled') return cancel(r.why);
        if (r.kind === 'failed') return out;
        out.unassigned.push(...r.prefixes);
        budget -= r.prefixes.length * ADDRESSES_PER_SLOT.prefix;
        continue;
      }
      const ips = ds.reserveForRelease(u.eniId, Math.min(u.count, budget), this.o.now());
      if (ips.length === 0) continue;
      const why = demand();
      if (why) {
        ds.cancelRelease(ips);
        return cancel(why);
      }
      const released = await this.unassign(u.eniId, ips);
      if (released === undefined) return out;
      out.unassigned.push(...released);
      budget -= released.length;
    }
    for (const eniId of plan.deleteEnis) {
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

  /**
   * One batched unassign of reserved IPs. @returns the IPs EC2 no longer holds (removed
   * from the datastore), or undefined when the call failed (the shrink stops).
   */
  private async unassign(eniId: string, ips: string[]): Promise<string[] | undefined> {
    const { ds, ec2, log } = this.o;
    try {
      await ec2.unassignIps(eniId, ips);
    } catch (e) {
      if (unassignRefusedKeepingAddresses(e)) {
        ds.cancelRelease(ips);
        log.warn({ eniId, err: (e as Error).message }, 'unassign failed; IPs kept in the pool');
      } else {
        const set = this.unsettled.get(eniId) ?? new Set<string>();
        for (const ip of ips) set.add(ip);
        this.unsettled.set(eniId, set);
        log.warn({ eniId, ips, err: (e as Error).message }, 'unassign outcome unknown; IPs held back until EC2 says');
        await this.settle();
      }
      return undefined;
    }
    ds.removeIps(ips, this.o.now());
    log.info({ eniId, ips }, 'released surplus secondary IPs');
    return ips;
  }

  /** Asks EC2 about IPs whose unassign outcome is unknown: still there → back to the pool; gone → removed. */
  private async settle(): Promise<void> {
    const { ds, ec2, log } = this.o;
    for (const [eniId, set] of [...this.unsettled]) {
      let eni;
      try {
        [eni] = await ec2.describeEnis([eniId]);
      } catch (e) {
        log.info({ eniId, err: (e as Error).message }, 'cannot settle unknown unassign yet');
        continue;
      }
      if (!eni) continue;
      const still = new Set(eni.secondaryIps);
      const ips = [...set];
      ds.cancelRelease(ips.filter((ip) => still.has(ip)));
      ds.removeIps(ips.filter((ip) => !still.has(ip)), this.o.now());
      this.unsettled.delete(eniId);
      log.info({ eniId, back: ips.filter((ip) => still.has(ip)), gone: ips.filter((ip) => !still.has(ip)) }, 'settled an unassign of unknown outcome');
    }
  }
}
