/**
 * The pool controller: keeps the warm pool at its targets by calling EC2, beside the
 * request path (ADD is served from memory; docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip). It runs one step at a time
 * (single flight), on a timer, shortly after ADDs and DELs ({@link PoolController.changed}:
 * one step per {@link CHANGE_STEP_DELAY_MS} at most, however many), and at once when an
 * ADD finds the pool empty — then the waiting ADDs are counted as extra demand in one
 * coalesced refill.
 *
 * A step runs the grow side (`grow-executor.ts`: assign batches on existing ENIs, then
 * every new ENI at once, each at its own device index, in the background), then wakes or
 * fails waiters, then, when nothing is wanted or on its way, the shrink side
 * (`shrink-executor.ts`). Waiting ADDs (`address-waiters.ts`) are woken the moment
 * addresses appear (the datastore signals every addition; a timer covers cooldown ends),
 * not when a step or a creation ends. A refill that cannot succeed (ENI limit reached
 * with every ENI full, subnet out of addresses, EC2 refusing the attach) fails the
 * waiters that the ENIs still being created cannot serve, at once, naming the binding
 * limit (`pool/grow-limits.ts`).
 */
import { monoNow, realTimers, type TimerHandle, type Timers } from '../../clock.js';
import type { Ec2Eni } from '../../cloud/ec2-port.js';
import { poolCounts, SurplusTracker } from '../../pool/index.js';
import { AddressWaiters, PoolExhaustedError } from './address-waiters.js';
import { GrowExecutor, type EniConfigBlockKind } from './grow-executor.js';
import { ShrinkExecutor } from './shrink-executor.js';
import { PeriodicTask } from '../periodic-task.js';
import type { PoolControllerOptions } from './pool-controller-options.js';

export { PoolExhaustedError } from './address-waiters.js';
export type { PoolControllerOptions } from './pool-controller-options.js';

/** Delay before a step is retried after a transient grow failure while ADDs wait (ms). */
const RETRY_AFTER_FAILURE_MS = 500;

/**
 * Longest delay (ms) between a served ADD or DEL and the pool step that sees it. Under a
 * stream of ADDs and DELs a step per change ran back to back: at 1,000 pairs/s the steps'
 * views and counts were ~28 % of what ipamd's heap promoted, and the ADD tail clusters at
 * the major collections that promotion brings (~15 ms of event loop each; docs/design.md
 * §16 item 4). An ADD that finds no address still steps at once.
 */
export const CHANGE_STEP_DELAY_MS = 100;

/** Runs grow/shrink steps against EC2 and wakes ADDs waiting for an address. */
export class PoolController {
  private readonly now: () => number;
  private readonly surplus = new SurplusTracker();
  private readonly shrinker: ShrinkExecutor;
  private readonly grower: GrowExecutor;
  private readonly waiters: AddressWaiters;
  private running?: Promise<void>;
  private again = false;
  /** Re-evaluates every `intervalMs` when nothing else triggers a step. */
  private readonly ticker: PeriodicTask;
  private readonly timers: Timers;
  private wakeTimer?: TimerHandle;
  private scheduled?: NodeJS.Immediate;
  /** The step {@link changed} asked for, due within `changeDelayMs`. */
  private deferred?: TimerHandle;
  private stopped = false;
  private started = false;

  constructor(private readonly o: PoolControllerOptions) {
    this.now = o.now ?? monoNow;
    this.timers = o.timers ?? realTimers;
    this.ticker = new PeriodicTask({ intervalMs: o.intervalMs, run: () => this.trigger(), timers: this.timers });
    this.shrinker = new ShrinkExecutor({
      ds: o.ds,
      ec2: o.ec2,
      enis: o.enis,
      gate: o.gate,
      log: o.log,
      targets: o.targets,
      surplus: this.surplus,
      shrinkDelayMs: o.shrinkDelayMs,
      minEniAgeMs: o.minEniAgeMs ?? 60_000,
      now: () => this.now(),
      ...(o.managementPaused ? { eniFreePaused: o.managementPaused } : {}),
    });
    this.grower = new GrowExecutor({
      ds: o.ds,
      ec2: o.ec2,
      enis: o.enis,
      log: o.log,
      targets: o.targets,
      ...(o.limits ? { limits: o.limits } : {}),
      ...(o.subnetFullPauseMs !== undefined ? { subnetFullPauseMs: o.subnetFullPauseMs } : {}),
      now: () => this.now(),
      onCreationDone: () => this.trigger(),
      ...(o.onGrowFailed ? { onGrowFailed: o.onGrowFailed } : {}),
      ...(o.onSubnetFull ? { onSubnetFull: o.onSubnetFull } : {}),
      ...(o.eniCreationRefused ? { eniCreationRefused: o.eniCreationRefused } : {}),
      ...(o.newEnisAfter ? { newEnisAfter: o.newEnisAfter } : {}),
    });
    this.waiters = new AddressWaiters(
      () => o.ds.counts(this.now()).available,
      () => this.lastError,
      () => this.now(),
      this.timers,
    );
    // Every addition of addresses (grow, adoption, reconcile, a cancelled release...) wakes waiting ADDs at once.
    o.ds.onAddressesAvailable(() => this.waiters.wake());
  }

  /** True once {@link stop} was called. */
  get stopping(): boolean {
    return this.stopped;
  }

  /** Why releases are frozen (the release gate's reasons), empty when they are not. */
  freezeReasons(): string[] {
    return this.o.gate.describe();
  }

  /** Last grow failure, for status output. */
  get lastError(): string | undefined {
    return this.grower.lastError;
  }

  /** Starts the periodic loop and runs a first step. */
  start(): void {
    this.started = true;
    this.ticker.start(0);
  }

  /**
   * Shutdown's first step: fails the ADDs waiting for a refill now (they would hold the RPC
   * drain for up to ENI_IPAM_ADD_WAIT_TIMEOUT) and lets no new one wait or step start.
   * {@link stop} finishes the stop. Idempotent.
   */
  refuseWaiting(): void {
    this.stopped = true;
    this.waiters.failAll(new PoolExhaustedError('ipamd is shutting down'));
  }

  /** Stops the loop, fails waiting ADDs, and waits for the step and the ENI creations in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    const ticking = this.ticker.stop();
    this.timers.clearTimeout(this.wakeTimer);
    this.timers.clearTimeout(this.deferred);
    this.deferred = undefined;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    this.waiters.failAll(new PoolExhaustedError('ipamd is shutting down'));
    await ticking;
    await this.running;
    await this.grower.idle();
  }

  /**
   * Schedules a step (coalesced: at most one runs, and one more follows if asked
   * meanwhile). The step starts on the next turn of the event loop, so ADDs that find
   * the pool empty at the same moment are planned for in one refill.
   */
  trigger(): void {
    // Not started (DISABLE_NETWORK_RESOURCE_PROVISIONING, or still starting): no step may assign or create; start() runs one.
    if (this.stopped || !this.started) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.scheduled ??= setImmediate(() => {
      this.scheduled = undefined;
      if (this.stopped) return;
      if (this.running) {
        this.again = true;
        return;
      }
      this.running = this.loop().finally(() => {
        this.running = undefined;
      });
    });
  }

  /**
   * Asks for a step within `changeDelayMs` (an ADD or DEL was served: the warm pool may
   * want a refill or have a surplus). Coalesced: one step sees every change made before it
   * starts, so a stream of changes costs one step per delay, not one per change.
   */
  changed(): void {
    if (this.stopped || !this.started || this.deferred) return;
    if (this.scheduled && !this.running) return; // a step starts on the next turn and sees the change
    this.deferred = this.timers.setTimeout(() => {
      this.deferred = undefined;
      this.trigger();
    }, this.o.changeDelayMs ?? CHANGE_STEP_DELAY_MS);
  }

  /** Resolves once no step and no ENI creation runs (for tests and shutdown); a step {@link changed} asked for runs now. */
  async idle(): Promise<void> {
    while (this.running || this.scheduled || this.deferred || this.grower.creating > 0) {
      if (this.deferred) {
        this.timers.clearTimeout(this.deferred);
        this.deferred = undefined;
        this.trigger();
      }
      if (this.scheduled && !this.running) await new Promise((r) => setImmediate(r));
      await this.running;
      await this.grower.idle();
    }
  }

  /**
   * Waits until the pool may have an available address (woken as soon as addresses
   * appear), for at most `timeoutMs` (ms) or, while the pool is still growing, up to
   * `growingWaitMs` (ms) in all, and asks for a refill that counts this ADD. "Still growing":
   * a new ENI is being created ({@link growing}) or nothing blocks one more address
   * ({@link growBlockedReason}: a creation that failed on a 5xx and backs off, an ENI
   * attached but not yet in IMDS, the next step not yet run). A full subnet, the ENI limit
   * or a stopped pool end the longer wait at once.
   * @throws PoolExhaustedError with the reason when the pool cannot grow or time runs out.
   */
  waitForAddress(timeoutMs: number, growingWaitMs = 0): Promise<void> {
    if (this.stopped) return Promise.reject(new PoolExhaustedError('ipamd is shutting down'));
    const pending = (): boolean => this.stillGrowing;
    const untilMs = this.now() + growingWaitMs;
    const p = this.waiters.wait(timeoutMs, growingWaitMs > timeoutMs ? { pending, untilMs } : undefined);
    this.trigger();
    return p;
  }

  /**
   * Why the pool could not add even one address now, or undefined when a grow step
   * could (for CNI STATUS; changes nothing, calls no API). Blocked when the controller
   * is not running (not started, DISABLE_NETWORK_RESOURCE_PROVISIONING, stopped), while
   * grow is paused after the subnet ran out of addresses, or when the pure grow plan
   * ({@link planGrow}) cannot place one more address; the reason names the binding limit
   * (MAX_ENI, the instance type's ENI limit, its addresses per ENI).
   */
  growBlockedReason(): string | undefined {
    if (this.stopped) return 'ipamd is shutting down';
    if (!this.started)
      return 'the warm pool is not managed (DISABLE_NETWORK_RESOURCE_PROVISIONING=true, or ipamd is still starting)';
    const paused = this.o.managementPaused?.();
    if (paused) return paused;
    return this.grower.blockedNow(poolCounts(this.o.ds.poolViews(this.now()), this.o.targets).short);
  }

  /** {@link growBlockedReason} with its kind (`not_managed` when the controller is not running), for the node condition. */
  growBlocked():
    { kind: 'not_managed' | 'subnet_full' | 'eni_limit' | EniConfigBlockKind; reason: string } | undefined {
    const reason = this.growBlockedReason();
    if (reason === undefined) return undefined;
    if (this.stopped || !this.started || this.o.managementPaused?.()) return { kind: 'not_managed', reason };
    return (
      this.grower.blockedKindNow(poolCounts(this.o.ds.poolViews(this.now()), this.o.targets).short) ?? {
        kind: 'eni_limit',
        reason,
      }
    );
  }

  /**
   * Why an ADD that just failed for want of an address failed, in metric terms (see
   * `ADD_FAILURE_REASONS` in observability/metrics/cni.ts): `no_ip` when the pool is not
   * managed or shutting down; `subnet_full` when grow is paused on a full subnet;
   * `frozen` when releases are frozen and addresses are held unverified/releasing while
   * grow cannot help (or has no other failure); `eni_limit` when a limit blocks grow now or
   * the last attempt failed on it; `eniconfig` when only a new ENI could serve and the
   * ENIConfig (custom networking) forbids creating one; `throttled` when EC2 throttled the last attempt;
   * otherwise `timeout` (the wait ran out while the refill was under way). Calls no API.
   */
  addFailureReason(): 'no_ip' | 'subnet_full' | 'eni_limit' | 'eniconfig' | 'throttled' | 'frozen' | 'timeout' {
    if (this.stopped || !this.started || this.o.managementPaused?.()) return 'no_ip';
    const now = this.now();
    const blocked = this.grower.blockedKindNow(poolCounts(this.o.ds.poolViews(now), this.o.targets).short);
    if (blocked?.kind === 'subnet_full') return 'subnet_full';
    // Addresses held unverified/releasing by a freeze would serve this ADD once the evidence is read: that is the cause to fix.
    const c = this.o.ds.counts(now);
    const heldByFreeze = this.o.gate.frozen && c.unverified + c.releasing > 0;
    if (blocked)
      return heldByFreeze
        ? 'frozen'
        : blocked.kind.startsWith('eniconfig')
          ? 'eniconfig'
          : (blocked.kind as 'eni_limit');
    const last = this.grower.lastErrorKind;
    if (last && last !== 'ec2_error') return last;
    return heldByFreeze ? 'frozen' : 'timeout';
  }

  /**
   * Runs `fn` while no pool step and no ENI creation runs (the ENI reconcile: a
   * describe must not race a grow or shrink). Steps asked for meanwhile run right after.
   */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.running || this.grower.creating > 0) {
      await this.running?.catch(() => undefined);
      await this.grower.idle();
    }
    let done!: () => void;
    this.running = new Promise<void>((r) => (done = r));
    try {
      return await fn();
    } finally {
      this.running = undefined;
      done();
      if (this.again) {
        this.again = false;
        this.trigger();
      }
    }
  }

  /** Attaches a leftover ENI of ours if the pool wants one (GrowExecutor.attachLeftoverIfWanted); never while not running or paused. */
  attachLeftoverIfWanted(eni: Ec2Eni, subnetCidr: string): boolean {
    if (this.stopped || !this.started || this.o.managementPaused?.()) return false;
    return this.grower.attachLeftoverIfWanted(eni, subnetCidr, this.waiters.size);
  }

  /** True while a new ENI is being created and attached (its addresses are on their way). */
  get growing(): boolean {
    return this.grower.creating > 0;
  }

  /**
   * True while the pool is still growing for its waiters: a new ENI is being created, or
   * nothing blocks one more address (see {@link waitForAddress}). Calls no API.
   */
  get stillGrowing(): boolean {
    return this.growing || this.growBlockedReason() === undefined;
  }

  /** Number of ADDs waiting for an address. */
  get waiting(): number {
    return this.waiters.size;
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      const done = this.o.inProgress?.('poolStep');
      try {
        await this.step();
      } catch (e) {
        this.o.log.error({ err: (e as Error).message }, 'pool step failed');
        this.o.onStepError?.();
      } finally {
        done?.();
      }
    } while (this.again && !this.stopped);
  }

  private async step(): Promise<void> {
    const { ds, log } = this.o;
    // A cordoned node (AWS_MANAGE_ENIS_NON_SCHEDULABLE=false): no grow; waiting ADDs fail with why.
    const paused = this.o.managementPaused?.();
    const grew = paused ? { changed: false, blocked: paused } : await this.grower.run(this.waiters.size);
    this.waiters.wake();
    if (this.waiters.size > 0) {
      const coolEnd = ds.nextCooldownEnd(this.now());
      if (grew.blocked) {
        // The oldest waiters are kept for the addresses still on their way in ENIs being created.
        const failed = this.waiters.fail(grew.blocked, coolEnd, this.grower.incoming());
        if (failed) log.warn({ failed, reason: grew.blocked }, 'failed waiting ADDs: the pool cannot grow');
        // Grow stopped at an ENI limit with ADDs to serve: a failed grow (awscni_ipamd_error_count{fn="grow_eni_limit"}).
        if (failed && grew.atEniLimit) this.o.onGrowFailed?.('eni_limit');
      }
      // Waiters left: wake them when the next cooling IP is free, or retry a grow that failed transiently.
      const at = Math.min(coolEnd ?? Infinity, grew.failed ? this.now() + RETRY_AFTER_FAILURE_MS : Infinity);
      if (this.waiters.size > 0 && Number.isFinite(at)) {
        this.timers.clearTimeout(this.wakeTimer);
        this.wakeTimer = this.timers.setTimeout(
          () => {
            this.waiters.wake();
            this.trigger();
          },
          Math.max(0, at - this.now()) + 5,
        );
      }
    }
    if (this.waiters.size === 0 && !grew.changed && this.grower.creating === 0) await this.shrink();
    log.debug({ ...ds.counts(this.now()), waiting: this.waiters.size, creating: this.grower.creating }, 'pool step');
  }

  /** Releases surplus that stayed surplus for the hysteresis period (see shrink-executor.ts). */
  private async shrink(): Promise<void> {
    await this.shrinker.run(() => this.waiters.size > 0);
  }
}
