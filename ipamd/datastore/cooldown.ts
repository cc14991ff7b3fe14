/**
 * Cooldown (IP_COOLDOWN_PERIOD): an address unassigned less than `cooldownMs` ago is
 * `cooling`, neither available nor assigned, so a just-freed IP is not reused at once.
 * Owns the period and the address-state function bound to it; the release times live on
 * the address records (records.ts). Pure; `now` in ms since epoch.
 */
import type { StateFn } from './prefixes.js';
import type { ChangeLog } from './changes.js';
import { coolingOf, earliestCooldownEnd } from './address-scan.js';
import { ipStateOf, type IpRecord } from './records.js';
import type { IpState } from './types.js';

/** The cooldown period and what follows from it; see the module docstring. */
export class Cooldown {
  /**
   * @param cooldownMs IP_COOLDOWN_PERIOD in ms (≥ 0).
   * @param changes the datastore's change log (a restored cooldown is a change the checkpoint keeps).
   * @throws RangeError if `cooldownMs` is negative or NaN.
   */
  constructor(
    readonly cooldownMs: number,
    private readonly changes: ChangeLog,
  ) {
    if (!(cooldownMs >= 0)) throw new RangeError(`cooldownMs must be >= 0, got ${cooldownMs}`);
  }

  /** State of one address at `now` (ms); see records.ts for the precedence. */
  stateOf(r: IpRecord, now: number): IpState {
    return ipStateOf(r, now, this.cooldownMs);
  }

  /** The state function at `now` (ms), for the scans of address-scan.ts and prefixes.ts. */
  stateAt(now: number): StateFn {
    return (r) => ipStateOf(r, now, this.cooldownMs);
  }

  /** Addresses of `records` still cooling at `now`, with their release time (for the checkpoint). */
  entries(records: Iterable<IpRecord>, now: number): Array<{ ip: string; releasedAt: number }> {
    return coolingOf(records, this.stateAt(now));
  }

  /** When the earliest cooling address of `records` becomes available (ms), or undefined if none cools. */
  nextEnd(records: Iterable<IpRecord>, now: number): number | undefined {
    return earliestCooldownEnd(this.entries(records, now), this.cooldownMs);
  }

  /**
   * Marks a known, unheld address (`r`; undefined is ignored) as cooling since `releasedAt`
   * (a restored cooldown entry, ms). A `releasedAt` after `now` (written by a process whose
   * clock ran ahead: the wall clock stepped back across the restart) is taken as `now`, so
   * a restored cooldown lasts at most its period (docs/design.md#time).
   */
  restore(r: IpRecord | undefined, releasedAt: number, now: number): void {
    if (r && r.holder === undefined) {
      r.releasedAt = Math.min(releasedAt, now);
      this.changes.ip(r.ip);
    }
  }
}
