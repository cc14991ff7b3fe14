/**
 * The datastore as a checkpoint source (checkpoint/writer.ts `CheckpointSource`): the whole
 * state for a compaction, and for each group commit only what the datastore recorded as
 * changed (datastore/changes.ts), so a journal append costs O(changes) whatever the number
 * of allocations and remembered DELs (docs/design.md#16-footprint-and-latency).
 *
 * The checkpoint keeps the newest `cap` remembered DELs (the node's checkpoint bound, which
 * can be below the datastore's own 4096). The source keeps the list the disk holds
 * (`persisted`, in order) and moves it like the datastore's newest `cap`: a new DEL is
 * appended and pushes the oldest out. When a forgotten DEL inside that window would pull an
 * older one back in (an ADD for a container remembered as released, an expiry), the window
 * is rewritten whole in that record (all listed, in order): rare, and still exact.
 */
import { monoAtBoot, monoNow } from '../clock.js';
import type { CheckpointData, CheckpointSource, JournalRecord } from './index.js';
import type { ChangeJournal } from '../datastore/roles.js';

/** What {@link datastoreCheckpointSource} needs. */
export interface DatastoreSourceOptions {
  ds: ChangeJournal;
  /** This boot's id (`/proc/sys/kernel/random/boot_id`), written in every snapshot. */
  bootId: string;
  /** Most remembered DELs the checkpoint keeps (the newest; the node's checkpoint bound). */
  releasedCap: number;
  /** The runtime identity to keep (read at every write; compared by name and version). */
  runtime: () => CheckpointData['runtime'];
  /** ms since epoch, for which addresses still cool in a snapshot; default monoNow, ipamd/clock.ts. */
  now?: () => number;
  /** This process's `monoAtBoot` (ms), written in every snapshot; default ipamd/clock.ts's. */
  monoAtBoot?: number;
}

/**
 * The {@link CheckpointSource} of a datastore; turns the datastore's change tracking on.
 * Every write must go through the returned source (it keeps what the disk holds).
 */
export function datastoreCheckpointSource(o: DatastoreSourceOptions): CheckpointSource {
  const { ds, releasedCap: cap } = o;
  const now = o.now ?? monoNow;
  const atBoot = o.monoAtBoot ?? monoAtBoot();
  ds.trackChanges();
  /** The remembered DELs on disk (after the last snapshot/delta), oldest first. */
  let persisted = new Map<string, number>();
  let runtime: CheckpointData['runtime'];
  const newestReleased = () => {
    const all = ds.unassignedEntries();
    return all.length > cap ? all.slice(-cap) : all;
  };
  return {
    snapshot(): CheckpointData {
      ds.takeChanges(); // all in the snapshot
      const released = newestReleased();
      persisted = new Map(released.map((e) => [e.containerID, e.releasedAt]));
      runtime = o.runtime();
      return {
        version: 1,
        bootId: o.bootId,
        monoAtBoot: atBoot,
        allocations: ds.allocations(),
        cooldown: ds.coolingEntries(now()),
        released,
        ...(runtime ? { runtime } : {}),
      };
    },
    delta(): Omit<JournalRecord, 'seq'> {
      const d = ds.takeChanges();
      let unrel: string[] = [];
      for (const id of d.unrel) if (persisted.delete(id)) unrel.push(id);
      for (const e of d.rel) {
        persisted.delete(e.containerID);
        persisted.set(e.containerID, e.releasedAt);
      }
      while (persisted.size > cap) {
        const oldest = persisted.keys().next().value!;
        persisted.delete(oldest);
        unrel.push(oldest);
      }
      let rel = d.rel.filter((e) => persisted.has(e.containerID));
      if (persisted.size < Math.min(cap, ds.unassignedCount())) {
        // An older DEL re-enters the window: list the whole window again, in order (every
        // id the disk may hold is unlisted first; applyRecord removes before it adds).
        unrel = [...new Set([...unrel, ...persisted.keys(), ...d.unrel])];
        rel = [...newestReleased()];
        persisted = new Map(rel.map((e) => [e.containerID, e.releasedAt]));
      }
      const rt = o.runtime();
      const rtChanged = rt?.name !== runtime?.name || rt?.version !== runtime?.version;
      runtime = rt;
      return {
        ...(d.put.length ? { put: d.put } : {}),
        ...(d.del.length
          ? { del: d.del.map((k) => [k.networkName, k.containerID, k.ifName] as [string, string, string]) }
          : {}),
        ...(d.cool.length ? { cool: d.cool } : {}),
        ...(d.uncool.length ? { uncool: d.uncool } : {}),
        ...(rel.length ? { rel } : {}),
        ...(unrel.length ? { unrel } : {}),
        ...(rtChanged ? { runtime: rt ?? null } : {}),
      };
    },
  };
}
