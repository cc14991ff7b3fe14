/**
 * Hysteresis for releases (docs/design.md#3-contracts: "free surplus only after it has stayed surplus
 * for a hysteresis period"). Pure: time is passed in (ms since epoch).
 */

/**
 * Tracks how long the pool has had a surplus. A surplus counts only after it stayed
 * above 0 for the whole delay; the amount releasable is the smallest surplus seen
 * over that window, so a brief spike never releases more than what persisted.
 */
export class SurplusTracker {
  private since: number | undefined;
  /** Samples in time order: each value held from its `t` until the next sample. */
  private samples: Array<{ t: number; over: number }> = [];

  /**
   * Records the current surplus (`over` addresses at `now` ms). Any `over <= 0` resets
   * the tracker: the next surplus starts a new window.
   */
  observe(over: number, now: number): void {
    if (!(over > 0)) {
      this.since = undefined;
      this.samples = [];
      return;
    }
    if (this.since === undefined) this.since = now;
    const last = this.samples[this.samples.length - 1];
    if (last && last.over === over) return;
    this.samples.push({ t: now, over });
    if (this.samples.length > 10_000) this.samples.shift();
  }

  /**
   * Addresses that may be released now: 0 until the surplus has stayed > 0 for
   * `delayMs` (ms), then the minimum surplus observed during the last `delayMs`.
   */
  releasable(now: number, delayMs: number): number {
    if (this.since === undefined || now - this.since < delayMs) return 0;
    const windowStart = now - delayMs;
    while (this.samples.length >= 2 && this.samples[1]!.t <= windowStart) this.samples.shift();
    if (this.samples.length === 0) return 0;
    return this.samples.reduce((m, s) => Math.min(m, s.over), Infinity);
  }
}
