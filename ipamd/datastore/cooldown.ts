/**
 * Cooldown (IP_COOLDOWN_PERIOD): an address unassigned less than `cooldownMs` ago is
 * `cooling`, neither available nor assigned, so a just-freed IP is not reused at once.
 * Owns the period and the address-state function bound to it; the release times live on
 * the address records (records.ts). Pure; `now` in ms since epoch.
 *
 * Two state functions: {@link Cooldown.stateAt} is the timer alone, for the release path
 * (an address leaving the node for EC2) and the checkpoint's cooling list, unchanged by
 * issue 41; {@link Cooldown.reuseStateAt} also ends a cooldown early on the EndpointSlice
 * evidence (reuse-evidence.ts), for what an ADD may take and the counts that say so.
 */
import type { StateFn } from './prefixes.js';
import type { ChangeLog } from './changes.js';
import { coolingOf, earliestCooldownEnd } from './address-scan.js';
import { ipStateOf, type IpRecord } from './records.js';
import type { IpState } from './types.js';
import { evidenceReuseAt, reuseAllowed, type ReuseEvidence } from './reuse-evidence.js';

/** Addresses handed out again after a cooldown, by what ended it (ADDs only; counters since start). */
export interface CooldownReuses {
  timer: number;
  evidence: number;
}

/** The cooldown period and what follows from it; see the module docstring. */
export class Cooldown {
  private evidence?: ReuseEvidence;
  private allowanceMs = Number.NaN;
  private readonly reuses: CooldownReuses = { timer: 0, evidence: 0 };

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

  /**
   * Lets the EndpointSlice evidence end cooldowns early (issue 41): `evidence` is read on
   * every state question; `allowanceMs` is ENI_IPAM_PROXY_SYNC_ALLOWANCE. A later call
   * replaces both; never called (ENI_IPAM_COOLDOWN_EVIDENCE=false): the timer alone rules.
   */
  useEvidence(evidence: ReuseEvidence, allowanceMs: number): void {
    this.evidence = evidence;
    this.allowanceMs = allowanceMs;
  }

  /** When (ms) the evidence lets `r` be reused, or undefined (see reuse-evidence.ts). */
  private evidenceAt(r: IpRecord): number | undefined {
    return this.evidence ? evidenceReuseAt(this.evidence, r.ip, this.allowanceMs) : undefined;
  }

  /** As {@link stateOf}, with a cooldown the evidence ended counted `available` (what an ADD may take). */
  reuseStateOf(r: IpRecord, now: number): IpState {
    const st = ipStateOf(r, now, this.cooldownMs);
    if (st !== 'cooling' || !this.evidence) return st;
    return reuseAllowed(r.releasedAt!, now, this.cooldownMs, this.evidenceAt(r)) ? 'available' : 'cooling';
  }

  /** The state function of {@link reuseStateOf} at `now` (ms). */
  reuseStateAt(now: number): StateFn {
    return (r) => this.reuseStateOf(r, now);
  }

  /**
   * Counts an address an ADD takes at `now` by what ended its cooldown (nothing for one
   * never released). Call before the record's `releasedAt` is cleared.
   */
  noteReuse(r: IpRecord, now: number): void {
    if (r.releasedAt === undefined) return;
    this.reuses[now - r.releasedAt >= this.cooldownMs ? 'timer' : 'evidence']++;
  }

  /** Reuses since start, by what ended the cooldown (a copy). */
  reuseCounts(): CooldownReuses {
    return { ...this.reuses };
  }

  /** Addresses of `records` still cooling at `now`, with their release time (for the checkpoint). */
  entries(records: Iterable<IpRecord>, now: number): Array<{ ip: string; releasedAt: number }> {
    return coolingOf(records, this.stateAt(now));
  }

  /**
   * When the earliest cooling address of `records` becomes available (ms), or undefined if
   * none cools: the timer's end, or the evidence's when that comes first and later than
   * `now` (an address the evidence already freed is available, not cooling).
   */
  nextEnd(records: Iterable<IpRecord>, now: number): number | undefined {
    if (!this.evidence) return earliestCooldownEnd(this.entries(records, now), this.cooldownMs);
    let min: number | undefined;
    for (const r of records) {
      if (this.reuseStateOf(r, now) !== 'cooling') continue;
      const at = this.evidenceAt(r);
      const end = Math.min(r.releasedAt! + this.cooldownMs, at !== undefined && at > now ? at : Infinity);
      if (min === undefined || end < min) min = end;
    }
    return min;
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
