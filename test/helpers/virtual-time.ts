/**
 * Virtual time for unit tests of ipamd's loops: one clock (`now`, ms) and the
 * {@link Timers} the loops take (`PoolController`, `PeriodicTask`, `AddressWaiters`), so a
 * test runs minutes of the pool's life in milliseconds and a timeout or a hysteresis
 * period is something it steps over, never waits for. `setImmediate` and promises stay
 * real: between timers, {@link VirtualTime.tick} lets the event loop run what they scheduled.
 */
import type { TimerHandle, Timers } from '../../ipamd/clock.js';

interface VirtualTimer extends TimerHandle {
  at: number;
  seq: number;
  fn: () => void;
}

/** A virtual clock and timers. Also a `MemoryEc2` clock (`now`, `advance`). */
export class VirtualTime implements Timers {
  private t: number;
  private seq = 0;
  private readonly pending = new Set<VirtualTimer>();

  /** @param start the clock's first reading (ms since the epoch). */
  constructor(start: number) {
    this.t = start;
  }

  /** The clock (ms). */
  readonly now = (): number => this.t;

  /** Timers not yet fired or cleared. */
  get timers(): number {
    return this.pending.size;
  }

  /** {@link Timers.setTimeout} on the virtual clock (a delay < 0 counts as 0). */
  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: VirtualTimer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, unref: () => timer };
    this.pending.add(timer);
    return timer;
  }

  /** {@link Timers.clearTimeout}. */
  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle) this.pending.delete(handle as VirtualTimer);
  }

  /**
   * Moves the clock `ms` forward at once, firing (synchronously, in due order) the timers
   * due on the way. For code that "spends" time inside a call (MemoryEc2's timeouts, a poll's sleep).
   */
  advance(ms: number): void {
    const end = this.t + ms;
    for (let next = this.due(end); next; next = this.due(end)) this.fire(next);
    this.t = Math.max(this.t, end);
  }

  /**
   * Lets `ms` of virtual time pass the way the event loop would: runs what is ready, then
   * fires the next due timer and lets the event loop run what it started, until no timer is
   * due within `ms`. Resolves with the clock at `now + ms`.
   */
  async tick(ms = 0): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (let next = this.due(end); next; next = this.due(end)) {
      this.fire(next);
      await settle();
    }
    this.t = Math.max(this.t, end);
    await settle();
  }

  private due(end: number): VirtualTimer | undefined {
    let best: VirtualTimer | undefined;
    for (const x of this.pending)
      if (x.at <= end && (!best || x.at < best.at || (x.at === best.at && x.seq < best.seq))) best = x;
    return best;
  }

  private fire(timer: VirtualTimer): void {
    this.pending.delete(timer);
    this.t = Math.max(this.t, timer.at);
    timer.fn();
  }
}

/** Lets the event loop run what is ready (promise chains, `setImmediate` steps): a few turns. */
export async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
}
