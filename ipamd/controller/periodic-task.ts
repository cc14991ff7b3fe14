/**
 * The one periodic-task helper of ipamd's background loops (the pool loop's re-evaluation,
 * the ENI reconcile, the leaked-ENI sweep, the quarantine check, the evidence pass, the
 * host-networking sync): run a task every `intervalMs`, one run at a time, plus extra runs
 * on demand, stopped cleanly.
 *
 * - **One at a time**: a run asked for while one is in flight joins it (coalesced), so a
 *   slow run never overlaps the next.
 * - **Period**: the next periodic run is due `intervalMs` after the previous periodic run
 *   *ended* (a slow run delays the next one instead of being followed by a burst).
 * - **Extra runs**: {@link PeriodicTask.runNow} (at once) and {@link PeriodicTask.runAfter}
 *   (one pending extra run, e.g. a retry with back-off) do not move the period.
 * - **Errors** of a run are passed to `onError` (default: ignored); the loop goes on.
 * - **Timers are unref'd** (they never keep the process alive) and {@link PeriodicTask.stop}
 *   clears them and waits for a run in flight.
 */

import { realTimers, type TimerHandle, type Timers } from '../clock.js';

/** Options of {@link PeriodicTask}. */
export interface PeriodicTaskOptions {
  /** Period (ms, > 0): from the end of one periodic run to the start of the next. */
  intervalMs: number;
  /** The work; may be sync or async. A throw or rejection goes to `onError`. */
  run: () => unknown;
  /** Told of a run's error (default: ignored; most tasks log inside `run`). */
  onError?: (e: Error) => void;
  /** The timers the period and extra runs use (default: Node's; tests pass virtual ones). */
  timers?: Timers;
}

/** A task run periodically and on demand, one run at a time. */
export class PeriodicTask {
  private periodTimer?: TimerHandle;
  private extraTimer?: TimerHandle;
  private readonly timers: Timers;
  private inFlight?: Promise<void>;
  private started = false;
  private stopped = false;

  /** @throws RangeError when `intervalMs` is not > 0. */
  constructor(private readonly o: PeriodicTaskOptions) {
    if (!(o.intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${o.intervalMs}`);
    this.timers = o.timers ?? realTimers;
  }

  /** True while a run is in flight. */
  get running(): boolean {
    return this.inFlight !== undefined;
  }

  /**
   * Starts the period. The first periodic run comes after `firstRunInMs` (ms; default one
   * period; 0 = now, started synchronously). A second call does nothing.
   */
  start(firstRunInMs = this.o.intervalMs): void {
    if (this.started || this.stopped) return;
    this.started = true;
    if (firstRunInMs <= 0) this.periodic();
    else this.schedulePeriod(firstRunInMs);
  }

  /** Runs the task now, or joins the run in flight. Resolves when that run ends; never rejects. */
  runNow(): Promise<void> {
    if (this.stopped) return this.inFlight ?? Promise.resolve();
    this.inFlight ??= (async () => {
      try {
        await this.o.run();
      } catch (e) {
        this.o.onError?.(e as Error);
      }
    })().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /** Schedules one extra run after `delayMs` (ms), replacing an extra run not yet started. Ignored once stopped. */
  runAfter(delayMs: number): void {
    if (this.stopped) return;
    this.timers.clearTimeout(this.extraTimer);
    this.extraTimer = this.timers.setTimeout(
      () => {
        this.extraTimer = undefined;
        void this.runNow();
      },
      Math.max(0, delayMs),
    );
    this.extraTimer.unref();
  }

  /** Drops the pending extra run, if any. */
  cancelExtra(): void {
    this.timers.clearTimeout(this.extraTimer);
    this.extraTimer = undefined;
  }

  /** Stops both timers (no run starts after this) and waits for a run in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timers.clearTimeout(this.periodTimer);
    this.cancelExtra();
    await this.inFlight;
  }

  private periodic(): void {
    this.periodTimer = undefined;
    void this.runNow().then(() => this.schedulePeriod(this.o.intervalMs));
  }

  private schedulePeriod(ms: number): void {
    if (this.stopped) return;
    this.timers.clearTimeout(this.periodTimer);
    this.periodTimer = this.timers.setTimeout(() => this.periodic(), ms);
    this.periodTimer.unref();
  }
}
