/**
 * Quarantine (docs/design.md#13-evidence-before-trust item 4): addresses an ADD found the
 * node already routing to another pod's veth, so some live pod uses them while ipamd
 * thought them free. Kept on the address records (`quarantined`, records.ts): such an
 * address is `unverified` — never handed out, never released — until the quarantine is
 * lifted. Pure; `now` in ms since epoch.
 */
import type { AvailabilitySignal } from './availability.js';
import type { AddressTable } from './address-table.js';
import type { Quarantine } from './roles.js';

/** Quarantines and lifts quarantines on the address table's records. */
export class QuarantineList implements Quarantine {
  constructor(
    private readonly addresses: AddressTable,
    private readonly signal: AvailabilitySignal,
  ) {}

  /**
   * Quarantines `ip`, held or not, until {@link liftQuarantine}. Re-quarantining keeps the
   * first `since`. @returns false when the address is not on any known ENI (nothing to keep out).
   */
  quarantine(ip: string, now: number, reason: string): boolean {
    const r = this.addresses.record(ip);
    if (!r) return false;
    r.quarantined ??= { since: now, reason };
    return true;
  }

  /** Ends the quarantine of `ip` (the conflict is gone). @returns true if it was quarantined. */
  liftQuarantine(ip: string): boolean {
    const r = this.addresses.record(ip);
    if (!r?.quarantined) return false;
    r.quarantined = undefined;
    this.signal.notify();
    return true;
  }

  /** Quarantined addresses (ms since epoch of `since`), sorted by IP. */
  quarantined(): Array<{ ip: string; eniId: string; since: number; reason: string }> {
    return [...this.addresses.records()]
      .filter((r) => r.quarantined)
      .map((r) => ({ ip: r.ip, eniId: r.eniId, ...r.quarantined! }))
      .sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0));
  }
}
