/**
 * Executes the grow side of the warm pool (docs/design.md#10-the-warm-pool-at-depth item 2; docs/design.md#pool-math): the
 * pure plan (`planGrow`) sized for the targets plus every waiting ADD, one
 * AssignPrivateIpAddresses batch per existing ENI (awaited), and every new ENI the plan
 * asks for launched at once in the background, each with its own device index (reserved
 * synchronously by the ENI manager), bounded by the ENI limit. All calls go through the
 * EC2 wrapper, so parallel creations share the node's token bucket.
 *
 * ENIs being created count in later plans as ENIs already holding their requested
 * addresses, so a refill asked for while one is in flight adds only what is still
 * missing, and does not wait for the first to finish. Attached ENIs the datastore does
 * not serve from (unmanaged, pending adoption, orphans) count toward the ENI limit.
 *
 * Full subnets fail over (docs/design.md#eni-ownership, "Placement and failover"): an
 * assign EC2 refuses with `InsufficientFreeAddressesInSubnet` / `InsufficientCidrBlocks`
 * marks the ENI's subnet exhausted in the ENI manager's placement, and the same pass
 * re-plans with no room on ENIs there, so the demand goes to new ENIs, which the
 * placement puts in the next candidate subnet (a creation itself moves on to the next
 * candidate when one is full). Only when no candidate is left (or the ENI limit leaves
 * no new ENI) is ENI creation paused (`subnetFullPauseMs`) and the refill "blocked" with
 * the reason listing the exhausted subnets, like EC2 refusing an attach for the
 * instance's limit; other failures are transient: ENI creation backs off (1 s doubling
 * to 30 s) and waiters keep waiting.
 */
import { Ec2Error, type Ec2Eni, type Ec2Port } from '../../cloud/ec2-port.js';
import type { EniInventory, PoolCounts } from '../../datastore/roles.js';
import type { Logger } from '../../log.js';
import { ADDRESSES_PER_SLOT, planGrow, type GrowPlan, type PoolEniView, type PoolTargets } from '../../pool/index.js';
import { growBlockedReason, type EniLimits } from '../../pool/grow-limits.js';
import type { EniManager } from '../eni-lifecycle/eni-manager.js';
import { PlacementError, SUBNET_FULL_CODES, exhaustedReason } from '../eni-lifecycle/subnet-placement.js';
import { assignBatch } from './assign-batch.js';
import { ATTACH_LIMIT, classifyGrowFailure, type GrowFailureKind } from './grow-failure.js';
/** Id prefix of the stand-ins for ENIs being created in a plan. */
const PHANTOM = '(being created) ';

/** Options of {@link GrowExecutor}. */
export interface GrowExecutorOptions {
  ds: PoolCounts & EniInventory;
  ec2: Ec2Port;
  enis: EniManager;
  log: Logger;
  targets: PoolTargets;
  /** Where the ENI limits come from, to name the binding one (omit: the pure plan's wording). */
  limits?: EniLimits;
  /** How long grow pauses after InsufficientFreeAddressesInSubnet / InsufficientCidrBlocks (ms, default 30 000). */
  subnetFullPauseMs?: number;
  now: () => number;
  /** Called when a background ENI creation has finished, either way (the controller re-plans). */
  onCreationDone: () => void;
  /** Told of each failed grow attempt with its kind (metrics). */
  onGrowFailed?: (kind: GrowFailureKind) => void;
  /** Told when EC2 answered that the subnet has no free addresses (metrics: its free count is 0). */
  onSubnetFull?: (subnetId: string) => void;
  /**
   * Why no ENI may be created now (custom networking without a usable ENIConfig), or
   * undefined. Asked before every creation; a refusal launches none and blocks the refill
   * that needs one (waiting ADDs fail with the reason). Memory only; must not throw.
   */
  eniCreationRefused?: () => { kind: EniConfigBlockKind; reason: string } | undefined;
  /** No new ENI is created until this settles (the start-up settle of leftover ENIs: eni-settle.ts); omit: none held. */
  newEnisAfter?: Promise<unknown>;
}

/** Why the ENIConfig forbids creating ENIs: it is missing, invalid, or not known (the API cannot be read). */
export type EniConfigBlockKind = 'eniconfig_missing' | 'eniconfig_invalid' | 'eniconfig_unknown';

export type { GrowFailureKind } from './grow-failure.js';

/** What one grow pass did. */
export interface GrowOutcome {
  /** Addresses were added or ENI creations launched. */
  changed: boolean;
  /** The refill cannot succeed now (a limit binds, the subnet is full): waiters beyond `incoming` fail. */
  blocked?: string;
  /** A transient failure (throttled, timeout...): waiters keep waiting; retry soon. */
  failed?: boolean;
  /**
   * `blocked` is an ENI limit (MAX_ENI or the instance type's, or an attach EC2 refused at it
   * in an earlier pass) that no failed EC2 call of this pass already reported to `onGrowFailed`.
   */
  atEniLimit?: boolean;
}

/** Plans and runs grow passes (one at a time: the pool controller's single flight). */
export class GrowExecutor {
  /** ENI creations in flight: id → slots requested. */
  private readonly creations = new Map<number, number>();
  private readonly inFlight = new Set<Promise<void>>();
  private seq = 0;
  private pausedUntil = 0;
  /** Why ENI creation is paused (every candidate subnet ran out of addresses). */
  private pauseReason = 'the subnet has no free addresses';
  private createBackoffMs = 0;
  private createHoldUntil = 0;
  /** Set while creations are held because EC2 refused an attach for the instance's limit. */
  private createHoldReason?: string;
  /** Last grow failure, for status output and timeout messages. */
  lastError?: string;
  /** Kind of the last grow failure (cleared with `lastError`), for the ADD failure reason. */
  lastErrorKind?: GrowFailureKind;

  /** True until `newEnisAfter` settles: the pool may attach a leftover ENI instead of creating one. */
  private newEnisHeld: boolean;

  constructor(private readonly o: GrowExecutorOptions) {
    this.newEnisHeld = o.newEnisAfter !== undefined;
    void o.newEnisAfter?.finally(() => {
      this.newEnisHeld = false;
      o.onCreationDone(); // re-plan: what waited for the settle is created now
    });
  }

  /** Addresses the ENIs being created will hold (what they asked for, plus their room for a later assign). */
  incoming(): number {
    return this.creations.size * this.o.enis.instance.ipsPerEni * ADDRESSES_PER_SLOT[this.o.targets.unit ?? 'ip'];
  }

  /** Number of ENI creations in flight. */
  get creating(): number {
    return this.creations.size;
  }

  /** Resolves once no ENI creation is in flight (each ends within its own EC2 timeouts). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /**
   * Why not even one more address can be placed now, or undefined (for CNI STATUS;
   * calls no API): grow paused after the subnet ran out, or the plan for one more
   * address leaves it unmet.
   */
  blockedNow(short: number): string | undefined {
    return this.blockedKindNow(short)?.reason;
  }

  /**
   * {@link blockedNow} with its kind: `subnet_full` while ENI creation is paused and one
   * more address needs a new ENI, `eni_limit` when the plan cannot place one more address,
   * `eniconfig_*` when only a new ENI could and the ENIConfig forbids creating one.
   */
  blockedKindNow(
    short: number,
  ): { kind: 'subnet_full' | 'eni_limit' | EniConfigBlockKind; reason: string } | undefined {
    const plan = this.plan(1);
    if (this.o.now() < this.pausedUntil && (plan.createEnis.length > 0 || plan.unmet > 0))
      return { kind: 'subnet_full', reason: this.pauseReason };
    if (short + 1 - plan.unmet < 1) return { kind: 'eni_limit', reason: this.reason(plan) };
    const onExisting = plan.assign.some((a) => !a.eniId.startsWith(PHANTOM) && a.count > 0) || this.creations.size > 0;
    return onExisting ? undefined : this.refusal(plan);
  }

  /** The ENIConfig refusal when `plan` needs a new ENI, else undefined. */
  private refusal(plan: GrowPlan): { kind: EniConfigBlockKind; reason: string } | undefined {
    return plan.createEnis.length > 0 ? this.o.eniCreationRefused?.() : undefined;
  }

  /**
   * One grow pass for the targets plus `waiting` ADDs: assign batches (awaited) and new
   * ENIs (launched; `onCreationDone` tells when each ends). Never throws.
   */
  async run(waiting: number): Promise<GrowOutcome> {
    const { ds, enis, log, targets } = this.o;
    let plan = this.plan(waiting);
    let blocked = this.unmetBlocks(plan, waiting) ? this.reason(plan) : undefined;
    let atEniLimit = blocked !== undefined;
    // An attached ENI not adopted yet (IMDS lag) comes first; after a failed creation, back off;
    // while every candidate subnet is exhausted, no creation (assigns in other subnets go on);
    // custom networking without a usable ENIConfig: no creation, the refill that needs one is blocked.
    const paused = (): boolean => this.o.now() < this.pausedUntil;
    const held = (): boolean => this.o.now() < this.createHoldUntil;
    if (held() && this.createHoldReason && plan.createEnis.length > 0) {
      blocked = this.createHoldReason;
      atEniLimit = this.lastErrorKind === 'eni_limit';
    }
    if (paused() && plan.createEnis.length > 0) [blocked, atEniLimit] = [this.pauseReason, false];
    const refused = this.refusal(plan);
    if (refused) [blocked, atEniLimit] = [refused.reason, false];
    const mayCreate = (): boolean =>
      !this.newEnisHeld && enis.awaitingAdoption().length === 0 && !held() && !paused() && !refused;
    let creates = mayCreate() ? plan.createEnis.slice(0, Math.max(targets.maxEni - enis.attachedCount(), 0)) : [];
    // Demand placed on ENIs still being created is assigned once they are attached (the re-plan after each creation).
    const assigns = plan.assign.filter((a) => !a.eniId.startsWith(PHANTOM));
    if (assigns.length + creates.length === 0)
      return { changed: false, ...(blocked ? { blocked, ...(atEniLimit ? { atEniLimit } : {}) } : {}) };
    log.info(
      { assign: assigns, createEnis: creates, creating: this.creations.size, waiting, unmet: plan.unmet },
      'pool grow',
    );
    // Existing ENIs first (one call each, no new ENI if the subnet is short), then every new ENI at once.
    const results = await Promise.allSettled(
      assigns.map((a) => assignBatch(this.o, this.o.targets.unit ?? 'ip', a.eniId, a.count)),
    );
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
    // A full subnet under an existing ENI: mark it exhausted and re-plan in this same pass, so
    // the demand goes to new ENIs in the next candidate subnet (if the ENI limit allows).
    const full = results.flatMap((r, i) =>
      r.status === 'rejected' && r.reason instanceof Ec2Error && SUBNET_FULL_CODES.has(r.reason.code)
        ? [{ subnetId: ds.getEni(assigns[i]!.eniId)?.subnetId ?? enis.instance.subnetId, code: r.reason.code }]
        : [],
    );
    let exhausted: string | undefined;
    if (full.length > 0) {
      for (const f of full) {
        enis.placement.markExhausted(f.subnetId, f.code);
        this.o.onSubnetFull?.(f.subnetId);
      }
      plan = this.plan(waiting);
      // Any subnet left to put a new ENI in? (The placement's cached describe: the one the creation uses.)
      const where = await enis.placement.plan();
      if (where.ok) enis.placement.release?.(where.candidates[0]!.subnetId);
      if (!where.ok && where.kind === 'subnets_exhausted') {
        creates = [];
        exhausted = where.reason;
      } else creates = mayCreate() ? plan.createEnis : [];
      blocked = this.unmetBlocks(plan, waiting) ? this.reason(plan) : undefined;
      atEniLimit = blocked !== undefined;
      if (creates.length > 0) log.info({ exhausted: full, createEnis: creates }, 'subnet full: new ENIs elsewhere');
    }
    if (errors.length > 0) {
      // Nothing can take the demand a full subnet refused: pause creations, naming the subnets.
      const stuck = full.length > 0 && Math.min(creates.length, targets.maxEni - enis.attachedCount()) <= 0;
      const classified = this.classify(errors, stuck ? full : [], exhausted);
      if (classified !== undefined) [blocked, atEniLimit] = [classified, false]; // classify reported it
    } else if (assigns.length) this.lastError = this.lastErrorKind = undefined;
    // Re-checked after the await: the ENI limit is counted exactly at launch (device indexes are reserved synchronously).
    const launched = paused() ? [] : creates.slice(0, Math.max(targets.maxEni - enis.attachedCount(), 0));
    for (const count of launched) this.launch(count);
    const changed = launched.length > 0 || results.some((r) => r.status === 'fulfilled');
    if (!blocked) return { changed, ...(errors.length ? { failed: true } : {}) };
    return { changed, blocked, ...(atEniLimit ? { atEniLimit } : {}) };
  }

  /**
   * Whether `plan` leaving addresses unmet blocks the refill: with ADDs waiting, only when
   * the waiters alone cannot all be placed. A warm target the ENI limit cannot also hold
   * (50 pods on a 56-address instance with WARM_ENI_TARGET=1) must not fail ADDs that fit.
   */
  private unmetBlocks(plan: GrowPlan, waiting: number): boolean {
    if (plan.unmet <= 0) return false;
    if (waiting <= 0) return true;
    const bare = { warmEniTarget: 0, warmIpTarget: 0, minimumIpTarget: 0, warmPrefixTarget: 0 };
    return this.plan(waiting, { ...this.o.targets, ...bare }).unmet > 0;
  }

  /**
   * The grow plan for now: the datastore's ENIs plus the ENIs being created (holding
   * what they asked for, with room for the rest; an assign planned on one of them waits
   * until it is attached), with the ENI limit reduced by the attached ENIs the datastore
   * does not serve from. `targets`: the node's, unless given (the waiters-only plan).
   */
  private plan(extraDemand: number, targets: PoolTargets = this.o.targets): GrowPlan {
    const { enis } = this.o;
    const now = this.o.now();
    const views = this.views(now);
    const aps = ADDRESSES_PER_SLOT[targets.unit ?? 'ip'];
    const capacity = enis.instance.ipsPerEni * aps;
    const prefix = aps > 1;
    const phantoms: PoolEniView[] = [...this.creations.values()].map((slots, i) => ({
      eniId: `${PHANTOM}${i}`,
      deviceNumber: 100_000 + i,
      isPrimary: false,
      createdAtMs: now,
      capacity,
      total: slots * aps,
      assigned: 0,
      cooling: 0,
      roomSlots: Math.max(enis.instance.ipsPerEni - slots, 0),
      ...(prefix ? { freeSlots: slots, prefixes: slots } : {}),
    }));
    const outside = enis.unmanagedCount() + enis.orphanIds().length + enis.awaitingAdoption().length;
    return planGrow(
      [...views, ...phantoms],
      { ...targets, maxEni: Math.max(targets.maxEni - outside, 0) },
      extraDemand,
    );
  }

  /** Why the plan cannot place everything, naming the binding limit. */
  private reason(plan: GrowPlan): string {
    const { enis, targets, limits } = this.o;
    if (!limits) return plan.blockedReason ?? 'the pool cannot grow';
    return growBlockedReason(this.views(this.o.now()), targets, limits, {
      unmanaged: enis.unmanagedCount(),
      pending: enis.awaitingAdoption().length,
      orphans: enis.orphanIds().length,
      creating: this.creations.size,
    });
  }

  /**
   * Views of the datastore's ENIs; an ENI whose subnet is marked exhausted has no room
   * (EC2 would refuse an assign there), so the plan puts that demand on new ENIs.
   */
  private views(now: number): PoolEniView[] {
    const { ds, enis } = this.o;
    return ds.poolViews(now).map((v) => {
      const subnetId = ds.getEni(v.eniId)?.subnetId;
      return subnetId && enis.placement.isExhausted(subnetId) ? { ...v, roomSlots: 0 } : v;
    });
  }

  /**
   * Whether the pool wants a new ENI now and may start one: the plan for the targets plus
   * `waiting` ADDs creates one, and no pause, hold, ENIConfig refusal, ENI awaiting
   * adoption or ENI limit stops a creation. Calls no API.
   */
  wantsNewEni(waiting: number): boolean {
    const { enis, targets } = this.o;
    const plan = this.plan(waiting);
    const now = this.o.now();
    if (plan.createEnis.length === 0 || now < this.pausedUntil || now < this.createHoldUntil) return false;
    return !this.refusal(plan) && enis.awaitingAdoption().length === 0 && enis.attachedCount() < targets.maxEni;
  }

  /**
   * Attaches an ENI of ours a previous ipamd left `available` (eni-settle.ts) when the pool
   * wants a new ENI for the targets plus `waiting` ADDs ({@link wantsNewEni}), in the
   * background, counted like a creation of its slots (later plans see it on its way).
   * `subnetCidr`: its subnet's. @returns whether it was launched.
   */
  attachLeftoverIfWanted(eni: Ec2Eni, subnetCidr: string, waiting: number): boolean {
    if (!this.wantsNewEni(waiting)) return false;
    const slots = this.o.targets.unit === 'prefix' ? eni.ipv4Prefixes.length : eni.secondaryIps.length;
    this.launch(slots, () => this.o.enis.attachLeftover(eni, subnetCidr));
    return true;
  }

  /** Starts one ENI creation (or `start`, an attach of a leftover) in the background. */
  private launch(count: number, start = () => this.o.enis.createAndAttach(count)): void {
    const id = ++this.seq;
    this.creations.set(id, count);
    const run: Promise<void> = start()
      .then(
        () => {
          this.createBackoffMs = 0;
          this.createHoldReason = undefined;
          this.lastError = this.lastErrorKind = undefined;
        },
        (e: Error) => {
          if (e instanceof PlacementError && e.kind === 'subnets_exhausted') {
            this.pause(e.message);
            this.lastError = e.message;
            this.lastErrorKind = 'subnet_full';
            this.o.onGrowFailed?.('subnet_full');
            return;
          }
          const blocked = this.classify([e]);
          const attachLimit = e instanceof Ec2Error && e.code === ATTACH_LIMIT;
          this.createBackoffMs = Math.min(this.createBackoffMs ? this.createBackoffMs * 2 : 1000, 30_000);
          this.createHoldUntil = this.o.now() + (attachLimit ? 30_000 : this.createBackoffMs);
          // No usable ENIConfig: waiters fail with its reason until the creation is retried.
          const noConfig = e instanceof PlacementError && e.kind === 'eniconfig';
          this.createHoldReason = attachLimit ? blocked : noConfig ? e.message : undefined;
        },
      )
      .finally(() => {
        this.creations.delete(id);
        this.inFlight.delete(run);
        this.o.onCreationDone();
      });
    this.inFlight.add(run);
  }

  /** Pauses ENI creation for `subnetFullPauseMs`: every candidate subnet is exhausted (`reason` lists them). */
  private pause(reason: string): void {
    this.pausedUntil = this.o.now() + (this.o.subnetFullPauseMs ?? 30_000);
    this.pauseReason = reason;
  }

  /**
   * Records grow failures (`lastError`); `stuck` (full subnets nothing else can stand in
   * for) pauses ENI creation and blocks the refill with `stuckReason` (the placement's
   * list of exhausted subnets) or, without it, naming them.
   * @returns the reason when the refill cannot succeed (subnets full, attach limit), else undefined (transient).
   */
  private classify(
    errors: Error[],
    stuck: Array<{ subnetId: string; code: string }> = [],
    stuckReason?: string,
  ): string | undefined {
    for (const e of errors) this.o.log.warn({ err: e.message }, 'pool grow failed');
    let stuckBlocked: string | undefined;
    if (stuck.length > 0) {
      const unique = [...new Map(stuck.map((f) => [f.subnetId, f])).values()];
      stuckBlocked = stuckReason ?? exhaustedReason(unique, this.o.subnetFullPauseMs ?? 30_000);
      this.pause(stuckBlocked);
    }
    const f = classifyGrowFailure(errors, this.o.limits, stuckBlocked);
    this.lastErrorKind = f.kind;
    this.o.onGrowFailed?.(f.kind);
    this.lastError = f.message;
    return f.blocked;
  }
}
