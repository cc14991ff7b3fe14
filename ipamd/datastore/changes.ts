/**
 * What changed in the datastore since the checkpoint last took its changes, so a group
 * commit's journal record costs O(changes), not O(state) (docs/design.md#16-footprint-and-latency).
 * Pure; no I/O.
 *
 * Three things are persisted, and each is tracked by the id it is keyed by:
 * - allocations, by allocation key: any change of the allocation held by a key (assigned,
 *   released, rolled back, restored, its ENI filled in when a pending IP shows up);
 * - cooldown, by IP: any change of whether an address is known and unheld with a release
 *   time, or of that time ({@link journalCooldownOf});
 * - remembered DELs, by container id, in the order they were last changed (the datastore
 *   re-inserts a remembered DEL at the end of its map, so the changed ones that are still
 *   remembered are the newest, in this order).
 * The values are read from the datastore when the changes are taken, so a key changed
 * twice is written once, with its latest state.
 */
import type { AllocationKey } from './types.js';

/** The ids changed since the last {@link ChangeLog.take}; see the module docstring. */
export interface ChangedIds {
  /** Allocation key string → the key. */
  keys: Map<string, AllocationKey>;
  ips: Set<string>;
  /** Container ids, oldest change first. */
  released: Set<string>;
}

/** Records changed ids while {@link enabled}; off until the checkpoint turns it on (no unbounded growth without a reader). */
export class ChangeLog {
  enabled = false;
  private ids: ChangedIds = { keys: new Map(), ips: new Set(), released: new Set() };

  /** The allocation held by `k` (key string `ks`) changed. */
  key(ks: string, k: AllocationKey): void {
    if (this.enabled && !this.ids.keys.has(ks))
      this.ids.keys.set(ks, { networkName: k.networkName, containerID: k.containerID, ifName: k.ifName });
  }

  /** The cooldown view of address `ip` may have changed. */
  ip(ip: string): void {
    if (this.enabled) this.ids.ips.add(ip);
  }

  /** The remembered DEL of `containerID` changed (moved to the newest end, or forgotten). */
  released(containerID: string): void {
    if (!this.enabled) return;
    this.ids.released.delete(containerID);
    this.ids.released.add(containerID);
  }

  /** The ids changed since the last call (or since {@link enabled} was set), and forgets them. */
  take(): ChangedIds {
    const out = this.ids;
    this.ids = { keys: new Map(), ips: new Set(), released: new Set() };
    return out;
  }
}

/**
 * The cooldown entry the journal keeps for an address: its release time when it is known,
 * unheld and was released (whether or not its cooldown has run out, and whatever its
 * release or verification state), else undefined. A superset of what the snapshot keeps
 * (`coolingEntries(now)`: still cooling, not releasing or unverified): an extra entry on
 * restore only marks a known, unheld address cooling until `releasedAt + cooldown`, which
 * an expired entry never does.
 */
export function journalCooldownOf(r: { holder?: string; releasedAt?: number } | undefined): number | undefined {
  return r && r.holder === undefined ? r.releasedAt : undefined;
}
