/**
 * The checkpoint journal's format, pure (no I/O): what changed between two checkpoint
 * states as one record, applying records to a snapshot, and parsing a journal file.
 *
 * On disk the checkpoint is the snapshot file (`ipam.json`, {@link CheckpointData}, with
 * `journalSeq` = the last journal record it already holds) plus two journal files,
 * `<snapshot>.journal` and `<snapshot>.journal.b` ({@link JOURNAL_SUFFIXES}; the writer
 * appends to one while a compaction folds the other into the snapshot): one JSON object
 * per line, each a {@link JournalRecord} numbered `seq` = 1 more than the record before it
 * (in either file), never reused (numbering continues across compactions through the
 * snapshot's `journalSeq`). The state is the snapshot with the records of
 * `seq > journalSeq` from both files applied in `seq` order.
 *
 * Crash rules (docs/design.md#3-contracts, "Checkpoint"): a record is acknowledged only
 * once fdatasync returned, so the only record a crash can tear is the last one: bytes
 * after the last newline, or a last line that does not parse, are ignored. Anything else
 * wrong (a bad record before the last, a gap in `seq`, a journal without its snapshot) makes
 * the whole checkpoint corrupt: applying part of it could lose an acknowledged change.
 */
import { z } from 'zod';
import {
  checkpointAllocationSchema,
  checkpointSchema,
  type CheckpointAllocation,
  type CheckpointData,
} from './schema.js';

/** Suffix of the first journal file next to the snapshot. */
const JOURNAL_SUFFIX = '.journal';

/** Suffixes of the two journal files next to the snapshot (writer.ts alternates between them). */
export const JOURNAL_SUFFIXES = [JOURNAL_SUFFIX, '.journal.b'] as const;

/**
 * One journal record: the changes of one group commit. Maps are keyed as the datastore
 * keys them: allocations by `(networkName, containerID, ifName)`, cooldown by IP,
 * remembered DELs by container id. `put*` upsert, `del*` remove; `runtime: null` clears it.
 */
export interface JournalRecord {
  seq: number;
  put?: CheckpointAllocation[];
  /** Allocation keys removed: `[networkName, containerID, ifName]`. */
  del?: Array<[string, string, string]>;
  cool?: Array<{ ip: string; releasedAt: number }>;
  uncool?: string[];
  rel?: Array<{ containerID: string; releasedAt: number }>;
  unrel?: string[];
  runtime?: { name: string; version: string } | null;
}

const id = z.string().min(1);
const base = checkpointSchema.shape;

/** zod schema of {@link JournalRecord}. */
export const journalRecordSchema = z.object({
  seq: z.number().int().positive(),
  put: z.array(checkpointAllocationSchema).optional(),
  del: z.array(z.tuple([id, id, id])).optional(),
  cool: base.cooldown.optional(),
  uncool: z.array(z.string()).optional(),
  rel: z.array(z.object({ containerID: id, releasedAt: z.number().finite().nonnegative() })).optional(),
  unrel: z.array(z.string()).optional(),
  runtime: z.object({ name: id, version: z.string() }).nullable().optional(),
});

/** A checkpoint state indexed for diffing: what {@link indexState} builds. */
export interface StateIndex {
  allocations: Map<string, CheckpointAllocation>;
  cooldown: Map<string, number>;
  released: Map<string, number>;
  runtime: CheckpointData['runtime'];
}

const keyOf = (a: { networkName: string; containerID: string; ifName: string }) =>
  `${a.networkName}\0${a.containerID}\0${a.ifName}`;

/**
 * Indexes `d` by allocation key, cooldown IP and released container id (O(n)). With
 * `prev` (the index of `prevData`) and `d.released` the very array `prevData.released`
 * was (the datastore hands out the same array while it is unchanged), the released map
 * is reused: the 4096 remembered DELs of a busy node are not re-indexed per write.
 */
export function indexState(d: CheckpointData, prev?: { data: CheckpointData; index: StateIndex }): StateIndex {
  const allocations = new Map<string, CheckpointAllocation>();
  for (const a of d.allocations) allocations.set(keyOf(a), a);
  const cooldown = new Map<string, number>();
  for (const c of d.cooldown) cooldown.set(c.ip, c.releasedAt);
  if (prev && d.released !== undefined && d.released === prev.data.released)
    return { allocations, cooldown, released: prev.index.released, runtime: d.runtime };
  const released = new Map<string, number>();
  for (const r of d.released ?? []) released.set(r.containerID, r.releasedAt);
  return { allocations, cooldown, released, runtime: d.runtime };
}

function sameAllocation(a: CheckpointAllocation, b: CheckpointAllocation): boolean {
  return (
    a.ipv4 === b.ipv4 &&
    a.eniId === b.eniId &&
    a.allocatedAt === b.allocatedAt &&
    a.pod?.namespace === b.pod?.namespace &&
    a.pod?.name === b.pod?.name &&
    a.pod?.uid === b.pod?.uid &&
    !a.pod === !b.pod
  );
}

/**
 * The record that turns state `prev` into `next`, numbered `seq`, or undefined when they
 * hold the same allocations, cooldown, remembered DELs and runtime (nothing to write).
 */
export function diffState(prev: StateIndex, next: StateIndex, seq: number): JournalRecord | undefined {
  const r: JournalRecord = { seq };
  const put: CheckpointAllocation[] = [];
  for (const [k, a] of next.allocations) {
    const p = prev.allocations.get(k);
    if (!p || !sameAllocation(p, a)) put.push(a);
  }
  const del: Array<[string, string, string]> = [];
  for (const [k, a] of prev.allocations)
    if (!next.allocations.has(k)) del.push([a.networkName, a.containerID, a.ifName]);
  const cool: Array<{ ip: string; releasedAt: number }> = [];
  for (const [ip, at] of next.cooldown) if (prev.cooldown.get(ip) !== at) cool.push({ ip, releasedAt: at });
  const uncool: string[] = [];
  for (const ip of prev.cooldown.keys()) if (!next.cooldown.has(ip)) uncool.push(ip);
  const rel: Array<{ containerID: string; releasedAt: number }> = [];
  const unrel: string[] = [];
  if (prev.released !== next.released) {
    // the same map: unchanged (indexState reused it)
    for (const [containerID, at] of next.released)
      if (prev.released.get(containerID) !== at) rel.push({ containerID, releasedAt: at });
    for (const c of prev.released.keys()) if (!next.released.has(c)) unrel.push(c);
  }
  if (put.length) r.put = put;
  if (del.length) r.del = del;
  if (cool.length) r.cool = cool;
  if (uncool.length) r.uncool = uncool;
  if (rel.length) r.rel = rel;
  if (unrel.length) r.unrel = unrel;
  if (prev.runtime?.name !== next.runtime?.name || prev.runtime?.version !== next.runtime?.version)
    r.runtime = next.runtime ?? null;
  return Object.keys(r).length > 1 ? r : undefined;
}

/** Applies `rec` to the indexed state `s` in place. */
export function applyRecord(s: StateIndex, rec: JournalRecord): void {
  for (const [networkName, containerID, ifName] of rec.del ?? [])
    s.allocations.delete(keyOf({ networkName, containerID, ifName }));
  for (const a of rec.put ?? []) s.allocations.set(keyOf(a), a);
  for (const ip of rec.uncool ?? []) s.cooldown.delete(ip);
  for (const c of rec.cool ?? []) s.cooldown.set(c.ip, c.releasedAt);
  for (const c of rec.unrel ?? []) s.released.delete(c);
  for (const c of rec.rel ?? []) {
    s.released.delete(c.containerID); // re-inserted last: the map's order is the DEL order
    s.released.set(c.containerID, c.releasedAt);
  }
  if (rec.runtime !== undefined) s.runtime = rec.runtime ?? undefined;
}

/**
 * The checkpoint data of indexed state `s` (boot id from `bootId`; `journalSeq` = `seq`;
 * `monoAtBoot` of the snapshot the journal follows: its records were written by the same
 * process, whose first write is a snapshot, writer.ts).
 */
export function stateData(s: StateIndex, bootId: string, seq: number, monoAtBoot?: number): CheckpointData {
  return {
    version: 1,
    bootId,
    ...(monoAtBoot !== undefined ? { monoAtBoot } : {}),
    allocations: [...s.allocations.values()],
    cooldown: [...s.cooldown].map(([ip, releasedAt]) => ({ ip, releasedAt })),
    released: [...s.released].map(([containerID, releasedAt]) => ({ containerID, releasedAt })),
    ...(s.runtime ? { runtime: s.runtime } : {}),
    journalSeq: seq,
  };
}

/** Result of {@link replayJournals}: the merged state, or why the journal cannot be trusted. */
export type JournalReplay =
  | { ok: true; data: CheckpointData; applied: number; skipped: number; tornBytes: number; lastSeq: number }
  | { ok: false; reason: string };

/** The records of one journal file, in file order, and the torn tail's size; or why the file is corrupt. */
function parseJournalFile(buf: Buffer): { records: JournalRecord[]; tornBytes: number } | { reason: string } {
  const text = buf.toString('utf8');
  const end = text.lastIndexOf('\n');
  const lines = end < 0 ? [] : text.slice(0, end).split('\n');
  let tornBytes = end < 0 ? buf.length : Buffer.byteLength(text.slice(end + 1));
  const records: JournalRecord[] = [];
  for (let i = 0; i < lines.length; i++) {
    let rec: JournalRecord | undefined;
    try {
      const r = journalRecordSchema.safeParse(JSON.parse(lines[i]!));
      if (r.success) rec = r.data as JournalRecord;
    } catch {
      /* handled below */
    }
    if (!rec) {
      if (i === lines.length - 1 && tornBytes === 0) {
        tornBytes = Buffer.byteLength(lines[i]!) + 1;
        break;
      }
      return {
        reason: `journal record ${i + 1} of ${lines.length} is not a valid record, and it is not the last (a torn write can only be the last)`,
      };
    }
    records.push(rec);
  }
  return { records, tornBytes };
}

/**
 * Applies the journal files `bufs` (writer.ts keeps two and alternates between them; any
 * order) to `snapshot` (whose `journalSeq` must be set): records of `seq ≤ journalSeq`
 * are skipped (already in the snapshot: a crash before a compaction emptied the file that
 * held them), the others, from all files together, must follow on from `journalSeq`
 * without a gap or a repeat. A torn last record of a file (see the module docstring) is
 * ignored and counted in `tornBytes`. A reason names the file by its index in `bufs`
 * (`names[i]`, default `journal i`).
 */
export function replayJournals(snapshot: CheckpointData, bufs: Buffer[], names?: string[]): JournalReplay {
  const from = snapshot.journalSeq ?? 0;
  const pending: JournalRecord[] = [];
  let tornBytes = 0;
  let skipped = 0;
  for (const [i, buf] of bufs.entries()) {
    const f = parseJournalFile(buf);
    if ('reason' in f) return { ok: false, reason: `${names?.[i] ?? `journal ${i}`}: ${f.reason}` };
    tornBytes += f.tornBytes;
    for (const rec of f.records) {
      if (rec.seq <= from) skipped++;
      else pending.push(rec);
    }
  }
  pending.sort((a, b) => a.seq - b.seq);
  const s = indexState(snapshot);
  let seq = from;
  for (const rec of pending) {
    if (rec.seq !== seq + 1)
      return {
        ok: false,
        reason:
          rec.seq === seq
            ? `journal record seq ${rec.seq} appears twice`
            : `journal record seq ${rec.seq} follows ${seq} (a record is missing)`,
      };
    applyRecord(s, rec);
    seq = rec.seq;
  }
  return {
    ok: true,
    data: stateData(s, snapshot.bootId, seq, snapshot.monoAtBoot),
    applied: pending.length,
    skipped,
    tornBytes,
    lastSeq: seq,
  };
}
