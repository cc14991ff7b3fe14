/**
 * The change journal the checkpoint writer reads (docs/design.md#16-footprint-and-latency):
 * which allocations, cooldown entries and remembered unassigned containers changed since
 * it last asked, each read from the current state when taken, so a key changed twice is
 * written once with its latest value. The ids are recorded by every part of the datastore
 * into the shared {@link ChangeLog}. Pure; O(changes).
 */
import type { AddressTable } from './address-table.js';
import type { AllocationTable } from './allocation-table.js';
import { journalCooldownOf, type ChangeLog } from './changes.js';
import type { ReleasedContainers } from './released-containers.js';
import type { DatastoreDelta } from './roles.js';

/** What a {@link Journal} reads (wired by datastore.ts). */
export interface JournalParts {
  changes: ChangeLog;
  addresses: AddressTable;
  allocations: AllocationTable;
  unassigned: ReleasedContainers;
}

/** Turns the changed ids into a {@link DatastoreDelta} with the current values. */
export class Journal {
  constructor(private readonly p: JournalParts) {}

  /**
   * Starts recording changes for {@link takeChanges} (the checkpoint writer calls it once,
   * before its first snapshot; off by default so a datastore nobody persists keeps no log).
   */
  trackChanges(): void {
    this.p.changes.enabled = true;
  }

  /**
   * What changed since the last call (or since {@link trackChanges}), read from the current
   * state, and forgets it. Empty lists when nothing changed. See {@link DatastoreDelta}.
   */
  takeChanges(): DatastoreDelta {
    const ids = this.p.changes.take();
    const d: DatastoreDelta = { put: [], del: [], cool: [], uncool: [], rel: [], unrel: [] };
    for (const [ks, k] of ids.keys) {
      const a = this.p.allocations.held(ks);
      if (a) d.put.push({ ...a });
      else d.del.push(k);
    }
    for (const ip of ids.ips) {
      const at = journalCooldownOf(this.p.addresses.record(ip));
      if (at === undefined) d.uncool.push(ip);
      else d.cool.push({ ip, releasedAt: at });
    }
    for (const id of ids.released) {
      const at = this.p.unassigned.get(id);
      if (at === undefined) d.unrel.push(id);
      else d.rel.push({ containerID: id, releasedAt: at });
    }
    return d;
  }
}
