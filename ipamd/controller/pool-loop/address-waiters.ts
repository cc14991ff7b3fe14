/**
 * ADDs waiting for an address on an empty pool (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip: bounded wait on one
 * coalesced refill). FIFO: {@link AddressWaiters.wake} resolves the oldest waiters, as
 * many as there are available addresses, the moment addresses may have appeared (the
 * datastore tells after IPs/prefixes are added or a release is cancelled; the pool
 * controller after a step and when a cooling IP's cooldown ends). A woken waiter takes
 * its address in the same macrotask (its continuation is a chain of microtasks up to
 * the synchronous `Datastore.assign`), so addresses handed to woken waiters are counted
 * as taken until the next macrotask, and a burst of wake-ups does not over-wake.
 * A waiter that loses its address anyway simply waits again for the rest of its time.
 */

import { realTimers, type TimerHandle, type Timers } from '../../clock.js';

/** An ADD could not get an address within its wait, with the reason in operator terms. */
export class PoolExhaustedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PoolExhaustedError';
  }
}

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
  deadline: number;
  timer: TimerHandle;
}

/** How often (ms) a waiter past its own time checks whether addresses are still on their way. */
export const ON_THE_WAY_RECHECK_MS = 500;

/** A waiter's longer wait while addresses are on their way (see {@link AddressWaiters.wait}). */
export interface OnTheWay {
  /** True while addresses are on their way (the pool controller: a new ENI being created and attached). */
  pending: () => boolean;
  /** Latest end of the wait (ms, same clock as `now`). */
  untilMs: number;
}

/** The queue of waiting ADDs. */
export class AddressWaiters {
  private readonly queue = new Set<Waiter>();
  private inTransit = 0;
  private transitReset?: NodeJS.Immediate;

  /**
   * @param available addresses available now (total − assigned − cooling − …);
   * @param timeoutReason text appended to the timeout error (e.g. the last grow failure);
   * @param now clock in ms;
   * @param timers the waits' timeouts (default: Node's; tests pass virtual ones).
   */
  constructor(
    private readonly available: () => number,
    private readonly timeoutReason: () => string | undefined,
    private readonly now: () => number,
    private readonly timers: Timers = realTimers,
  ) {}

  /** Number of waiting ADDs (woken ones excluded). */
  get size(): number {
    return this.queue.size;
  }

  /**
   * Waits until woken (an address may be had) or `timeoutMs` passes; with `onTheWay`, a
   * waiter whose time is up keeps its place while `onTheWay.pending()` says addresses are
   * still on their way, until `onTheWay.untilMs` (checked every {@link ON_THE_WAY_RECHECK_MS}).
   * @throws PoolExhaustedError on timeout or when failed by {@link fail}/{@link failAll}.
   */
  wait(timeoutMs: number, onTheWay?: OnTheWay): Promise<void> {
    const t0 = this.now();
    return new Promise<void>((resolve, reject) => {
      const expire = (): void => {
        const now = this.now();
        if (onTheWay && now < onTheWay.untilMs && onTheWay.pending()) {
          w.deadline = onTheWay.untilMs;
          w.timer = this.timers.setTimeout(expire, Math.min(ON_THE_WAY_RECHECK_MS, onTheWay.untilMs - now));
          return;
        }
        const why = this.timeoutReason();
        this.settle(
          w,
          new PoolExhaustedError(
            `no free IP after waiting ${Math.round(Math.min(w.deadline, now) - t0)} ms${why ? `: ${why}` : ''}`,
          ),
        );
      };
      const w: Waiter = { resolve, reject, deadline: t0 + timeoutMs, timer: this.timers.setTimeout(expire, timeoutMs) };
      this.queue.add(w);
      this.wake();
    });
  }

  /** Wakes the oldest waiters, one per available address not yet promised to a woken waiter. @returns how many were woken. */
  wake(): number {
    if (this.queue.size === 0) return 0;
    let budget = this.available() - this.inTransit;
    let woken = 0;
    for (const w of this.queue) {
      if (budget <= 0) break;
      this.settle(w);
      budget--;
      woken++;
    }
    if (woken > 0) {
      this.inTransit += woken;
      this.transitReset ??= setImmediate(() => {
        this.inTransit = 0;
        this.transitReset = undefined;
      });
    }
    return woken;
  }

  /**
   * Fails, with `reason`, every waiter that nothing can serve: all of them except the
   * `spare` oldest (addresses still on their way) and those whose deadline falls after
   * `coolEnd` (the next cooling IP's end; they wait for it).
   * @returns how many were failed.
   */
  fail(reason: string, coolEnd?: number, spare = 0): number {
    let n = 0;
    let kept = 0;
    for (const w of [...this.queue]) {
      if (kept < spare) {
        kept++;
        continue;
      }
      if (coolEnd !== undefined && coolEnd <= w.deadline) continue;
      this.settle(w, new PoolExhaustedError(`no free IP and the pool cannot grow: ${reason}`));
      n++;
    }
    return n;
  }

  /** Fails every waiter with `err` (shutdown). */
  failAll(err: Error): void {
    for (const w of [...this.queue]) this.settle(w, err);
  }

  private settle(w: Waiter, err?: Error): void {
    if (!this.queue.delete(w)) return;
    this.timers.clearTimeout(w.timer);
    if (err) w.reject(err);
    else w.resolve();
  }
}
