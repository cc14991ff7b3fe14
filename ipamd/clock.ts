/**
 * ipamd's clocks (docs/design.md#time). Every duration (IP cooldown, grace periods, the
 * release brake's windows, back-off, token buckets, waits) is measured on {@link monoNow}, a
 * monotonic clock: a wall-clock step (NTP, an operator's `date -s`, a VM resumed) never
 * lengthens or shortens one. The wall clock (`Date.now`) is only for timestamps shown to
 * people (logs, Kubernetes Events, introspection: {@link wallOf}) and for files compared
 * across processes by their own stamps.
 *
 * {@link monoNow} is `performance.timeOrigin + performance.now()`: ms on the epoch scale,
 * equal to the wall clock when the process started and advancing monotonically from there,
 * so the datastore's times and the checkpoint's fields keep their unit (ms since epoch).
 * Across a restart the scales of two processes differ by whatever the wall clock stepped
 * in between; restored times are therefore clamped to "now" (Datastore.restoreCooldown), so a
 * restored cooldown never lasts longer than its period.
 */

/** Monotonic ms on the epoch scale (see the module doc). Never goes backwards. */
export function monoNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * The {@link monoNow} reading at which this boot's CLOCK_MONOTONIC read 0 (ms, epoch scale):
 * `monoNow() − (ms since boot)`, constant for the process (both advance with
 * CLOCK_MONOTONIC; `performance.now()` is `process.hrtime()` since the process started).
 * A stamp minus it is ms since boot, which no wall-clock step moves: two processes of one
 * boot convert each other's stamps with it exactly (checkpoint/boot-stamps.ts). The clock
 * counts from boot like CLOCK_BOOTTIME but stops while the machine is suspended, so a
 * cooldown measured on it across a restart can only last longer, never shorter.
 */
export function monoAtBoot(): number {
  const sinceBoot = Number(process.hrtime.bigint()) / 1e6;
  return performance.timeOrigin + performance.now() - sinceBoot;
}

/** Below this gap (ms) between the two clocks {@link wallOf} leaves a reading as is (drift, not a step). */
export const WALL_STEP_MS = 1000;

/**
 * The wall-clock time (ms since epoch) of a {@link monoNow} reading, for showing to people:
 * the reading shifted by how far the wall clock has stepped from the monotonic one (left as
 * is when they differ by less than {@link WALL_STEP_MS}, so shown times stay stable).
 */
export function wallOf(monoMs: number, wallNow = Date.now(), mono = monoNow()): number {
  const step = wallNow - mono;
  return Math.abs(step) < WALL_STEP_MS ? monoMs : monoMs + step;
}

/** A pending timer of {@link Timers}; `unref` keeps it from holding the process open. */
export interface TimerHandle {
  unref(): unknown;
}

/**
 * The timer functions a loop schedules its delays with (ms), injectable so unit tests can
 * run the loop on virtual time (`test/helpers/virtual-time.ts`); {@link realTimers} in ipamd.
 * `setImmediate` (the next turn of the event loop, not a delay) is not part of it.
 */
export interface Timers {
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
}

/** Node's own `setTimeout`/`clearTimeout`. */
export const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout | undefined),
};
