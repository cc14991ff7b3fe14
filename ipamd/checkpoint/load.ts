/**
 * Reading the checkpoint at start-up (docs/design.md#checkpoint, docs/design.md#4-restore-after-restart step 1). A file that
 * cannot be trusted is moved aside for forensics (never deleted) and reported, so the
 * daemon rebuilds its state instead of crash-looping.
 */
import { readFileSync } from 'node:fs';
import { readFile, rename, stat } from 'node:fs/promises';
import { JOURNAL_SUFFIXES, replayJournals } from './journal.js';
import { checkpointSchema, CHECKPOINT_VERSION, type CheckpointData } from './schema.js';

/**
 * What a checkpoint of this node can plausibly hold (docs/design.md#13-evidence-before-trust: a valid 55 MB checkpoint
 * with 200,000 allocations was accepted and every ADD then rewrote it, 7 → 446 ms).
 * Beyond either bound the file is treated as corrupt (moved aside, state rebuilt).
 */
export interface CheckpointBounds {
  /** Most allocations (and, separately, cooldown entries) a checkpoint may list. */
  maxEntries: number;
  /** Largest file in bytes (checked before the file is read). */
  maxBytes: number;
}

/** Bytes one allocation may take in the file, generously (key ≤ ~400, pod ≤ ~360, the rest ~150). */
const BYTES_PER_ENTRY = 1024;

/**
 * The bounds of a node with `maxEnis` ENIs of `ipv4PerEni` addresses each (the instance
 * type's limits, IMDS/EC2): at most every address of every ENI as /28 prefixes
 * (`maxEnis × ipv4PerEni × 16`, prefix delegation's capacity, whatever the current mode,
 * so switching modes never makes a checkpoint "corrupt"), and 1 KiB per entry for the
 * allocations and the cooldown list, plus 64 KiB.
 */
export function checkpointBoundsFor(maxEnis: number, ipv4PerEni: number): CheckpointBounds {
  const maxEntries = Math.max(1, maxEnis * ipv4PerEni * 16);
  return { maxEntries, maxBytes: 2 * maxEntries * BYTES_PER_ENTRY + 64 * 1024 };
}

/** What the journal added to a loaded snapshot (journal.ts): records applied, skipped (already in the snapshot), torn tail bytes ignored. */
export interface JournalLoad {
  applied: number;
  skipped: number;
  tornBytes: number;
  /** A journal beside a snapshot that does not name one (`journalSeq` absent) is stale: not applied, kept here (the first file; the other beside it, `<name>.stale-<time>`). */
  staleMovedTo?: string;
}

/** Result of {@link loadCheckpoint}. `movedTo` is where a corrupt file was kept (the journal too, at `journalMovedTo`). */
export type CheckpointLoad =
  | { kind: 'ok'; data: CheckpointData; journal?: JournalLoad }
  | { kind: 'missing' }
  | { kind: 'corrupt'; reason: string; movedTo: string; journalMovedTo?: string };

/**
 * Result of {@link readCheckpoint} (changes nothing on disk). `staleJournal`: a journal was
 * found and not applied. `journals`: the journal files (paths) that hold bytes.
 */
export type CheckpointRead =
  | { kind: 'ok'; data: CheckpointData; journal?: JournalLoad; staleJournal?: boolean; journals: string[] }
  | { kind: 'missing' }
  | { kind: 'corrupt'; reason: string; snapshotExists: boolean; journals: string[] };

/**
 * The kernel's boot id (`/proc/sys/kernel/random/boot_id`, trimmed): a checkpoint from
 * another boot means no sandbox is alive any more.
 * @throws the fs error if the file cannot be read.
 */
export function readBootId(): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
}

/** Why `text` is not a valid version-1 checkpoint within `bounds`, or the data. */
function parse(buf: Buffer, bounds?: CheckpointBounds): { data: CheckpointData } | { reason: string } {
  if (buf.length === 0) return { reason: 'file is empty (0 bytes)' };
  if (buf.every((b) => b === 0)) return { reason: `file is all zero bytes (${buf.length} bytes)` };
  let json: unknown;
  try {
    json = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    return { reason: `not valid JSON (${buf.length} bytes; truncated?): ${(e as Error).message}` };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { reason: 'not a JSON object' };
  const version = (json as { version?: unknown }).version;
  if (version !== CHECKPOINT_VERSION)
    return {
      reason: `unknown version ${JSON.stringify(version) ?? 'undefined'} (this ipamd reads version ${CHECKPOINT_VERSION})`,
    };
  const r = checkpointSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0]!;
    const where = i.path.length
      ? i.path
          .map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`))
          .join('')
          .replace(/^\./, '')
      : '(root)';
    return {
      reason: `schema invalid at ${where}: ${i.message}${r.error.issues.length > 1 ? ` (and ${r.error.issues.length - 1} more)` : ''}`,
    };
  }
  const data = r.data as CheckpointData;
  if (bounds) {
    for (const [field, n] of [
      ['allocations', data.allocations.length],
      ['cooldown', data.cooldown.length],
    ] as const) {
      if (n > bounds.maxEntries)
        return {
          reason: `implausible: ${n} ${field} entries, more than this node's ENIs can hold (${bounds.maxEntries})`,
        };
    }
  }
  return { data };
}

/** A free name `<path>.<why>-<ISO time>[-n]` next to the file (`why` default `corrupt`). */
export async function asideName(path: string, now: Date, why = 'corrupt'): Promise<string> {
  const base = `${path}.${why}-${now.toISOString()}`;
  for (let n = 0; ; n++) {
    const name = n === 0 ? base : `${base}-${n}`;
    try {
      await stat(name);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return name;
      throw e;
    }
  }
}

/** The file's bytes, or undefined if it does not exist; larger than `maxBytes` → a reason. */
async function readIfExists(path: string, maxBytes?: number): Promise<Buffer | undefined | { reason: string }> {
  try {
    if (maxBytes !== undefined) {
      const size = (await stat(path)).size;
      if (size > maxBytes)
        return {
          reason: `implausible: ${size} bytes, more than a checkpoint of this node can take (${maxBytes}): ${path}`,
        };
    }
    return await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** The snapshot file's identity (a compaction renames a new file over it), or undefined when absent. */
async function fileId(path: string): Promise<string | undefined> {
  try {
    const s = await stat(path);
    return `${s.ino}:${s.ctimeMs}`;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/**
 * Reads the checkpoint at `path` and its two journal files `path + ".journal"` and
 * `path + ".journal.b"` (journal.ts) and merges them, changing nothing on disk (for
 * ipamd's start-up and for outside readers: the CLI audit). See {@link loadCheckpoint}
 * for what is corrupt. A journal beside a snapshot without `journalSeq` is stale (an older
 * ipamd wrote the snapshot after it): not applied, `staleJournal` set.
 *
 * Beside a running writer: a compaction that replaced the snapshot while the files were
 * read (it empties a journal file afterwards, so the read could miss records) is detected
 * by the snapshot's identity before and after, and the read is repeated (up to 10 times).
 * @throws the fs error for I/O failures other than ENOENT.
 */
export async function readCheckpoint(path: string, bounds?: CheckpointBounds): Promise<CheckpointRead> {
  for (let attempt = 1; ; attempt++) {
    const before = await fileId(path);
    const r = await readOnce(path, bounds);
    if (attempt >= 10 || (await fileId(path)) === before) return r;
  }
}

async function readOnce(path: string, bounds?: CheckpointBounds): Promise<CheckpointRead> {
  const snap = await readIfExists(path, bounds?.maxBytes);
  const names = JOURNAL_SUFFIXES.map((x) => path + x);
  // Each journal file stays below the larger of 256 KiB and the snapshot (writer.ts) plus
  // what is appended while a compaction runs.
  const jrs = await Promise.all(
    names.map((n) => readIfExists(n, bounds ? bounds.maxBytes + 2 * 1024 * 1024 : undefined)),
  );
  // An empty journal holds nothing.
  const journals = names.filter((_, i) => jrs[i] !== undefined && !(Buffer.isBuffer(jrs[i]) && jrs[i].length === 0));
  const corrupt = (reason: string) => ({
    kind: 'corrupt' as const,
    reason,
    snapshotExists: snap !== undefined,
    journals,
  });
  if (snap === undefined) {
    if (journals.length) return corrupt(`journal ${journals.join(', ')} without its snapshot`);
    return { kind: 'missing' };
  }
  if (!Buffer.isBuffer(snap)) return corrupt(snap.reason);
  const r = parse(snap, bounds);
  if (!('data' in r)) return corrupt(r.reason);
  if (!journals.length) return { kind: 'ok', data: r.data, journals };
  const tooBig = jrs.find((j): j is { reason: string } => j !== undefined && !Buffer.isBuffer(j));
  if (tooBig) return corrupt(tooBig.reason);
  if (r.data.journalSeq === undefined) return { kind: 'ok', data: r.data, staleJournal: true, journals };
  const bufs = jrs.filter((j): j is Buffer => Buffer.isBuffer(j) && j.length > 0);
  const j = replayJournals(r.data, bufs, journals);
  if (!j.ok) return corrupt(j.reason);
  if (bounds) {
    for (const [field, n] of [
      ['allocations', j.data.allocations.length],
      ['cooldown', j.data.cooldown.length],
    ] as const) {
      if (n > bounds.maxEntries)
        return corrupt(
          `implausible: ${n} ${field} entries with the journal applied, more than this node's ENIs can hold (${bounds.maxEntries})`,
        );
    }
  }
  return {
    kind: 'ok',
    data: j.data,
    journal: { applied: j.applied, skipped: j.skipped, tornBytes: j.tornBytes },
    journals,
  };
}

/**
 * Loads the checkpoint at `path` with its journal ({@link readCheckpoint}).
 * - no file → `{kind:'missing'}`;
 * - valid version-1 content → `{kind:'ok', data}` (the journal's records applied; a torn
 *   last record ignored; a stale journal moved to `journal.staleMovedTo`);
 * - empty, truncated, zero-filled, non-JSON, schema-invalid or unknown-version content, or
 *   (with `bounds`) a file larger than `bounds.maxBytes` (not read) or listing more than
 *   `bounds.maxEntries` allocations or cooldown entries, or a journal that is bad before
 *   its last record, has a gap or a repeated record, or has no snapshot →
 *   the snapshot is renamed to `<path>.corrupt-<ISO time>` (and each journal file that
 *   holds bytes to `<its name>.corrupt-<ISO time>`; `journalMovedTo` is the first) and
 *   `{kind:'corrupt', reason, movedTo}`.
 * Never throws for bad content.
 * @throws the fs error for I/O failures other than ENOENT (e.g. EACCES, EISDIR, a failed rename).
 */
export async function loadCheckpoint(path: string, bounds?: CheckpointBounds): Promise<CheckpointLoad> {
  const r = await readCheckpoint(path, bounds);
  const now = new Date();
  if (r.kind === 'missing') return r;
  if (r.kind === 'ok') {
    if (!r.staleJournal) return { kind: 'ok', data: r.data, ...(r.journal ? { journal: r.journal } : {}) };
    let staleMovedTo = '';
    for (const j of r.journals) {
      const to = await asideName(j, now, 'stale');
      await rename(j, to);
      staleMovedTo ||= to;
    }
    return { kind: 'ok', data: r.data, journal: { applied: 0, skipped: 0, tornBytes: 0, staleMovedTo } };
  }
  let journalMovedTo: string | undefined;
  for (const j of r.journals) {
    const to = await asideName(j, now);
    await rename(j, to);
    journalMovedTo ??= to;
  }
  let movedTo = journalMovedTo ?? '';
  if (r.snapshotExists) {
    movedTo = await asideName(path, now);
    await rename(path, movedTo);
  }
  return {
    kind: 'corrupt',
    reason: r.reason,
    movedTo,
    ...(journalMovedTo && r.snapshotExists ? { journalMovedTo } : {}),
  };
}
