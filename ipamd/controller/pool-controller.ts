/**
 * The pool controller: keeps the warm pool at its targets by calling EC2, beside the
 * request path (ADD is served from memory; DESIGN §1). It runs one step at a time
 * (single flight), on a timer, after every ADD/DEL, and when an ADD finds the pool
 * empty — then the waiting ADDs are counted as extra demand in one coalesced refill.
 *
 * Decisions come from the pure `pool/` module; this file only executes them.
 */
import type { Datastore } from '../datastore/datastore.js';
import { Ec2Error, type Ec2Api } from '../cloud/ec2.js';
import type { Logger } from '../log.js';
import { planGrow, poolCounts, SurplusTracker, type PoolTargets } from '../pool/index.js';
import type { EniManager } from './eni-manager.js';
import { failedForSure } from './eni-ownership.js';
import { ShrinkExecutor } from './shrink-executor.js';
import type { ReleaseGate } from './release-gate.js';

/** EC2 codes meaning the subnet cannot give more addresses now. */
const SUBNET_FULL = new Set(['InsufficientFreeAddressesInSubnet', 'InsufficientCidrBlocks']);

/** An ADD could not get an address within its wait, with the reason in operator terms. */
export class PoolExhaustedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PoolExhaustedError';
  }
}

/** Options of {@link PoolController}. */
export interface PoolControllerOptions {
  ds: Datastore;
  ec2: Ec2Api;
  enis: EniManager;
  gate: ReleaseGate;
  log: Logger;
  targets: PoolTargets;
  /** Re-evaluation period when nothing triggers a step (ms). */
  intervalMs: number;
  /** How long a surplus must persist before it is released (ms). */
  shrinkDelayMs: number;
  /** Minimum ENI age before it may be freed (ms, default 60 000). */
  minEniAgeMs?: number;
  /** How long grow pauses after InsufficientFreeAddressesInSubnet / InsufficientCidrBlocks (ms, default 30 000). */
  subnetFullPauseMs?: number;
  now?: () => number;
}

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
  deadline: number;
  timer: NodeJS.Timeout;
}

/** Runs grow/shrink steps against EC2 and wakes ADDs waiting for an address. */
export class PoolController {
  private readonly now: () => number;
  private readonly surplus = new SurplusTracker();
  private readonly shrinker: ShrinkExecutor;
  private readonly waiters = new Set<Waiter>();
  private running?: Promise<void>;
  private again = false;
  private timer?: NodeJS.Timeout;
  private cooldownTimer?: NodeJS.Timeout;
  private stopped = false;
  private started = false;
  /** Last grow failure, for status output. */
  lastError?: string;
  /** Grow is paused until this time (ms) after the subnet ran out of addresses. */
  private growPausedUntil = 0;

  constructor(private readonly o: PoolControllerOptions) {
    this.now = o.now ?? Date.now;
    this.shrinker = new ShrinkExecutor({
      ds: o.ds, ec2: o.ec2, enis: o.enis, gate: o.gate, log: o.log, targets: o.targets, surplus: this.surplus,
      shrinkDelayMs: o.shrinkDelayMs, minEniAgeMs: o.minEniAgeMs ?? 60_000, now: () => this.now(),
    });
  }

  /** Starts the periodic loop and runs a first step. */
  start(): void {
    this.started = true;
    this.timer = setInterval(() => this.trigger(), this.o.intervalMs);
    this.timer.unref();
    this.trigger();
  }

  /** Stops the loop, fails waiting ADDs, and waits for the step in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.cooldownTimer);
    for (const w of [...this.waiters]) this.settle(w, new PoolExhaustedError('ipamd is shutting down'));
    await this.running;
  }

  /** Schedules a step (coalesced: at most one runs, and one more follows if asked meanwhile). */
  trigger(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.loop().finally(() => {
      this.running = undefined;
    });
  }

  /** Resolves once a step has finished (for tests and shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /**
   * Waits until the pool has an available address, for at most `timeoutMs`.
   * @throws PoolExhaustedError with the reason when the pool cannot grow or time runs out.
   */
  waitForAddress(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        resolve, reject, deadline: this.now() + timeoutMs,
        timer: setTimeout(() => this.settle(w, new PoolExhaustedError(`no free IP after waiting ${timeoutMs} ms${this.lastError ? `: ${this.lastError}` : ''}`)), timeoutMs),
      };
      this.waiters.add(w);
      this.trigger();
    });
  }

  /**
   * Why the pool could not add even one address now, or undefined when a grow step
   * could (for CNI STATUS; changes nothing, calls no API). Blocked when the controller
   * is not running (not started, DISABLE_NETWORK_RESOURCE_PROVISIONING, stopped), while
   * grow is paused after the subnet ran out of addresses, or when the pure grow plan
   * ({@link planGrow}) cannot place one more address (instance at MAX_ENI, every ENI full).
   */
  growBlockedReason(): string | undefined {
    if (this.stopped) return 'ipamd is shutting down';
    if (!this.started) return 'the warm pool is not managed (DISABLE_NETWORK_RESOURCE_PROVISIONING=true, or ipamd is still starting)';
    const now = this.now();
    if (now < this.growPausedUntil) return this.lastError ?? 'the subnet has no free addresses';
    const views = this.o.ds.poolViews(now);
    const need = poolCounts(views, this.o.targets).short + 1;
    const plan = planGrow(views, this.o.targets, 1);
    return need - plan.unmet >= 1 ? undefined : (plan.blockedReason ?? 'the pool cannot grow');
  }

  /**
   * Runs `fn` while no pool step runs (the EC2/IMDS reconcile: a describe must not race
   * a grow or shrink). Steps asked for meanwhile run right after.
   */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.running) await this.running.catch(() => undefined);
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

  /** Number of ADDs waiting for an address. */
  get waiting(): number {
    return this.waiters.size;
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.step();
      } catch (e) {
        this.o.log.error({ err: (e as Error).message }, 'pool step failed');
      }
    } while (this.again && !this.stopped);
  }

  private async step(): Promise<void> {
    const { ds, log } = this.o;
    const grew = await this.grow();
    const counts = ds.counts(this.now());
    if (counts.available > 0) {
      for (const w of [...this.waiters]) this.settle(w);
    } else if (this.waiters.size > 0) {
      this.failOrWaitForCooldown(grew.blocked);
    }
    if (this.waiters.size === 0 && !grew.changed) await this.shrink();
    log.debug({ ...counts, waiting: this.waiters.size }, 'pool step');
  }

  /** One grow pass: fill existing ENIs, then new ENIs, per the pure plan. */
  private async grow(): Promise<{ changed: boolean; blocked?: string }> {
    const { ds, ec2, enis, log, targets } = this.o;
    if (this.now() < this.growPausedUntil) {
      // The subnet had no free address moments ago: asking again now only burns API budget.
      return { changed: false, blocked: this.lastError ?? 'subnet out of addresses' };
    }
    const plan = planGrow(ds.poolViews(this.now()), targets, this.waiters.size);
    let changed = false;
    let blocked = plan.unmet > 0 ? plan.blockedReason : undefined;
    let currentAssign: string | undefined;
    try {
      for (const a of plan.assign) {
        currentAssign = a.eniId;
        if (targets.unit === 'prefix') {
          // Prefix delegation: one AssignPrivateIpAddresses with Ipv4PrefixCount; 16 addresses per /28.
          const prefixes = await ec2.assignPrefixes(a.eniId, a.count);
          ds.addPrefixes(a.eniId, prefixes);
          log.info({ eniId: a.eniId, prefixes }, 'assigned /28 prefixes');
        } else {
          const ips = await ec2.assignIps(a.eniId, a.count);
          ds.addIps(a.eniId, ips);
          log.info({ eniId: a.eniId, count: ips.length }, 'assigned secondary IPs');
        }
        changed = true;
        currentAssign = undefined;
      }
      for (const count of plan.createEnis) {
        if (enis.pendingIds().length > 0) break; // an ENI is attached but not adopted yet (IMDS lag): it comes first
        if (enis.attachedCount() >= targets.maxEni) break;
        await enis.createAndAttach(count);
        changed = true;
      }
      this.lastError = undefined;
    } catch (e) {
      let reason = e instanceof Ec2Error ? `${e.action} failed with ${e.code}` : (e as Error).message;
      if (e instanceof Ec2Error && SUBNET_FULL.has(e.code)) {
        const pauseMs = this.o.subnetFullPauseMs ?? 30_000;
        this.growPausedUntil = this.now() + pauseMs;
        reason = `the subnet has no free addresses (${e.code}); grow paused for ${Math.round(pauseMs / 1000)} s`;
      }
      this.lastError = reason;
      // A 5xx, timeout or throttle may pass on the next step: waiting ADDs keep their bounded
      // wait (the message names this error if it runs out) instead of failing at once.
      const transient = e instanceof Ec2Error && (e.kind === 'server' || e.kind === 'transport' || e.kind === 'throttle');
      if (!transient) blocked = reason;
      log.warn({ err: (e as Error).message }, 'pool grow failed');
      if (currentAssign && !failedForSure(e) && await this.settleAssign(currentAssign)) changed = true;
    }
    return { changed, ...(blocked ? { blocked } : {}) };
  }

  /**
   * After an assign of unknown outcome (5xx, timeout) EC2 is asked what the ENI holds:
   * addresses it shows that the datastore lacks are added (EC2 is the truth), so the
   * next plan neither asks for them again nor runs into the ENI's limit. A failed
   * describe decides nothing (the reconcile catches up). @returns true if any were added.
   */
  private async settleAssign(eniId: string): Promise<boolean> {
    const { ds, ec2, log } = this.o;
    try {
      const [eni] = await ec2.describeEnis([eniId]);
      if (!eni || !ds.getEni(eniId)) return false;
      const haveIps = new Set(ds.eniIps(eniId));
      const havePrefixes = new Set(ds.eniPrefixes(eniId));
      const ips = eni.secondaryIps.filter((ip) => !haveIps.has(ip));
      const prefixes = eni.ipv4Prefixes.filter((p) => !havePrefixes.has(p));
      if (ips.length) ds.addIps(eniId, ips);
      if (prefixes.length) ds.addPrefixes(eniId, prefixes);
      if (ips.length + prefixes.length) log.info({ eniId, ips, prefixes }, 'assign of unknown outcome had happened: added what EC2 shows');
      return ips.length + prefixes.length > 0;
    } catch (e) {
      log.info({ eniId, err: (e as Error).message }, 'cannot settle an assign of unknown outcome yet; the reconcile will');
      return false;
    }
  }

  /** Releases surplus that stayed surplus for the hysteresis period (see shrink-executor.ts). */
  private async shrink(): Promise<void> {
    await this.shrinker.run(() => this.waiters.size > 0);
  }

  private failOrWaitForCooldown(blocked: string | undefined): void {
    const now = this.now();
    const coolEnd = this.o.ds.nextCooldownEnd(now);
    for (const w of [...this.waiters]) {
      if (coolEnd !== undefined && coolEnd <= w.deadline) continue;
      if (blocked) this.settle(w, new PoolExhaustedError(`no free IP and the pool cannot grow: ${blocked}`));
    }
    if (coolEnd !== undefined && this.waiters.size > 0) {
      clearTimeout(this.cooldownTimer);
      this.cooldownTimer = setTimeout(() => this.trigger(), Math.max(0, coolEnd - now) + 5);
    }
  }

  private settle(w: Waiter, err?: Error): void {
    if (!this.waiters.delete(w)) return;
    clearTimeout(w.timer);
    if (err) w.reject(err);
    else w.resolve();
  }
}
