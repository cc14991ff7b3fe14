/**
 * Durable checkpoint writes with group commit (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip,
 * step 3): concurrent changes share one write, and each caller learns whether the write
 * holding its change succeeded.
 *
 * A write is either an append to the journal (journal.ts: the difference from the last
 * durable state as one line, then fdatasync; ~0.1–0.3 ms on a local disk, whatever the
 * state's size; with a {@link CheckpointSource} the difference is what the state recorded
 * as changed, O(changes), else a diff of two snapshots, O(state)) or a compaction (the whole state into the snapshot: temp file, fsync,
 * rename, directory fsync; then the journal is truncated). Compactions happen on the
 * first write, when the journal has grown past the larger of `compactBytes` and the
 * snapshot's size (so appends cost O(1) per change amortised), after `idleCompactMs`
 * without a change, after a failed append, and on {@link CheckpointWriter.flush}.
 */
import { constants } from 'node:fs';
import { mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { diffState, indexState, JOURNAL_SUFFIX, type JournalRecord, type StateIndex } from './journal.js';
import type { CheckpointData } from './schema.js';

/** Options of {@link CheckpointWriter}. */
export interface CheckpointWriterOptions {
  /** fsync/fdatasync the files and the directory (default true). */
  fsync?: boolean;
  /** Called after each successful compaction (whole snapshot) with its duration (ms) and size (bytes). */
  onWrite?: (ms: number, bytes: number) => void;
  /**
   * Called with the duration (ms) of each stage of each write: `delta` (taking a
   * {@link CheckpointSource}'s changes) or `snapshot` (reading the whole state: every write
   * without a source, each compaction with one), `serialize` (diff + JSON), then
   * `write.dsync` (the O_DSYNC write, sync included) or `write` and `fdatasync` for appends; `compact.serialize`, `compact.write`, `compact.fsync`,
   * `compact.rename` (rename + directory fsync), `compact.truncate` for compactions. See
   * service/stage-trace.ts.
   */
  onStage?: (stage: string, ms: number) => void;
  /** The last journal record number on disk (from {@link loadCheckpoint}'s data `journalSeq`), so numbering goes on; default 0. */
  startSeq?: number;
  /**
   * With `fsync`: open the journal `O_DSYNC`, so an append is one write that returns once
   * the record is as durable as after fdatasync (open(2): synchronized I/O data integrity
   * completion), instead of a write and an fdatasync (two trips to libuv's thread pool).
   * Default true; false for A/B benches. The `write` stage then includes the sync.
   */
  dsync?: boolean;
  /** Journal size (bytes) past which the next write compacts, at least the snapshot's size (default 256 KiB). */
  compactBytes?: number;
  /** false: every write is a compaction (the whole snapshot, no journal), as before the journal; for A/B benches. Default true. */
  journal?: boolean;
  /** Compact this long (ms) after the last change while the journal holds records (default 5000; 0 = never when idle). */
  idleCompactMs?: number;
}

/**
 * A state that knows what changed since it was last read (ipamd's datastore: see
 * startup/checkpoint-source.ts), so an append costs O(changes) instead of a snapshot and a
 * diff of the whole state. The boot id of its snapshots must not change.
 */
export interface CheckpointSource {
  /** The whole state (for a compaction); what {@link delta} reports next is relative to it. */
  snapshot(): CheckpointData;
  /**
   * What changed since the last {@link snapshot} or delta, as a journal record without its
   * `seq` (fields absent or empty when unchanged). After a delta whose write failed the
   * writer's next write is a compaction ({@link snapshot}), so a lost delta is never needed.
   */
  delta(): Omit<JournalRecord, 'seq'>;
}

interface Batch {
  promise: Promise<void>;
  resolve: () => void;
  reject: (e: Error) => void;
}

function newBatch(): Batch {
  let resolve!: () => void, reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A batch nobody awaits (e.g. only flush()) must not crash the process.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * Writes `snapshot()` to `path` (+ journal `path.journal`) durably; the parent directory
 * is created with mode 0700 if missing, the files get mode 0600.
 *
 * Group commit: at most one write runs at a time; every {@link commit} made while a
 * write is in flight joins the next write, whose snapshot is taken when it starts.
 * The on-disk state (snapshot + journal, read by {@link readCheckpoint}) equals the last
 * state a write took, once that write resolved.
 */
export class CheckpointWriter {
  private writing?: Promise<void>;
  private pending?: Batch;
  private readonly fsync: boolean;
  /** The journal is opened O_DSYNC: each append is durable when its write returns. */
  private readonly dsync: boolean;
  private readonly journalPath: string;
  private journal?: FileHandle;
  /** The state on disk after the last successful write; undefined until the first (a compaction). */
  private durable?: StateIndex;
  /** The data {@link durable} was indexed from (its `released` array is compared by identity). */
  private durableData?: CheckpointData;
  /** The boot id in the snapshot on disk (a record does not carry it: a change compacts). */
  private durableBootId?: string;
  private seq: number;
  private journalBytes = 0;
  private snapshotBytes = 0;
  /** An append failed half-way, or a compaction was asked for: the next write compacts. */
  private compactNext = false;
  private idleTimer?: NodeJS.Timeout;
  /** A compaction succeeded (the snapshot on disk is ours): appends may follow. */
  private compacted = false;
  private readonly snapshot: () => CheckpointData;
  /** Set when constructed with a {@link CheckpointSource}: appends take its delta instead of diffing snapshots. */
  private readonly source?: CheckpointSource;

  /**
   * @param path checkpoint file; @param state the state to persist: a function returning
   * the whole state (called when a write starts; appends diff it against the last durable
   * state, O(state)), or a {@link CheckpointSource} (appends write its delta, O(changes));
   * @param opts see {@link CheckpointWriterOptions}.
   */
  constructor(
    private readonly path: string,
    state: (() => CheckpointData) | CheckpointSource,
    private readonly opts: CheckpointWriterOptions = {},
  ) {
    if (typeof state === 'function') this.snapshot = state;
    else {
      this.source = state;
      this.snapshot = () => state.snapshot();
    }
    this.fsync = opts.fsync ?? true;
    this.dsync = this.fsync && (opts.dsync ?? true);
    this.journalPath = path + JOURNAL_SUFFIX;
    this.seq = opts.startSeq ?? 0;
  }

  /**
   * Makes the current state durable. Resolves once a write that started after this call
   * succeeded (so the caller's change is on disk); rejects with that write's error, for
   * exactly the callers that shared it.
   */
  commit(): Promise<void> {
    if (!this.pending) {
      this.pending = newBatch();
      queueMicrotask(() => this.kick());
    }
    return this.pending.promise;
  }

  /**
   * Waits until no write is in flight or pending, then compacts the journal into the
   * snapshot (so the snapshot alone is the whole state, e.g. for an older ipamd after a
   * downgrade) and closes the journal. Never rejects (errors go to committers; a failed
   * final compaction leaves snapshot + journal, which load as before).
   */
  async flush(): Promise<void> {
    await this.idle();
    clearTimeout(this.idleTimer);
    if (this.compacted && this.journalBytes > 0) {
      this.compactNext = true;
      await this.commit().catch(() => undefined);
      await this.idle();
    }
    clearTimeout(this.idleTimer);
    await this.journal?.close().catch(() => undefined);
    this.journal = undefined;
  }

  private async idle(): Promise<void> {
    while (this.writing || this.pending) await Promise.allSettled([this.writing, this.pending?.promise]);
  }

  private kick(): void {
    if (this.writing || !this.pending) return;
    const batch = this.pending;
    this.pending = undefined;
    const w = this.writeOnce().then(batch.resolve, (e: unknown) => {
      this.compactNext = true; // a partial record may be on disk: the next write rewrites everything
      batch.reject(e instanceof Error ? e : new Error(String(e)));
    });
    this.writing = w.finally(() => {
      this.writing = undefined;
      this.kick();
    });
  }

  private stage(name: string, t0: number): number {
    const t = performance.now();
    this.opts.onStage?.(name, t - t0);
    return t;
  }

  /** True when the next write must be a compaction (whatever the state). */
  private mustCompact(): boolean {
    return (
      !this.compacted ||
      this.compactNext ||
      this.opts.journal === false ||
      this.journalBytes >= Math.max(this.opts.compactBytes ?? 256 * 1024, this.snapshotBytes)
    );
  }

  private async writeOnce(): Promise<void> {
    if (this.source) return this.writeDelta(this.source);
    let t = performance.now();
    const data = this.snapshot();
    const next = indexState(
      data,
      this.durable && this.durableData ? { data: this.durableData, index: this.durable } : undefined,
    );
    t = this.stage('snapshot', t);
    if (!this.durable || data.bootId !== this.durableBootId || this.mustCompact()) {
      await this.compact(data, next, t);
      return;
    }
    const rec = diffState(this.durable, next, this.seq + 1);
    if (!rec) {
      this.durableData = data; // the same state: keep the newest arrays for the identity check
      return; // nothing changed since the last write: already durable
    }
    await this.append(rec, t);
    this.durable = next;
    this.durableData = data;
  }

  /** A write with a {@link CheckpointSource}: its delta appended, or a compaction of its snapshot. */
  private async writeDelta(src: CheckpointSource): Promise<void> {
    let t = performance.now();
    if (this.mustCompact()) {
      const data = src.snapshot();
      t = this.stage('snapshot', t);
      await this.compact(data, undefined, t);
      return;
    }
    const body = src.delta();
    t = this.stage('delta', t);
    const rec: JournalRecord = { seq: this.seq + 1 };
    for (const [k, v] of Object.entries(body) as Array<[keyof typeof body, unknown]>)
      if (v !== undefined && !(Array.isArray(v) && v.length === 0)) (rec as unknown as Record<string, unknown>)[k] = v;
    if (Object.keys(rec).length === 1) return; // nothing changed since the last write: already durable
    await this.append(rec, t);
  }

  /** Appends `rec` (numbered `this.seq + 1`) to the journal and fdatasyncs it. */
  private async append(rec: JournalRecord, t0: number): Promise<void> {
    let t = t0;
    const line = Buffer.from(JSON.stringify(rec) + '\n');
    t = this.stage('serialize', t);
    const fh = await this.openJournal();
    const { bytesWritten } = await fh.write(line, 0, line.length);
    if (bytesWritten !== line.length)
      throw new Error(`short write to ${this.journalPath}: ${bytesWritten} of ${line.length} bytes`);
    if (this.dsync) {
      this.stage('write.dsync', t); // the write and its sync, one call
    } else {
      t = this.stage('write', t);
      if (this.fsync) await fh.datasync();
      this.stage('fdatasync', t);
    }
    this.seq = rec.seq;
    this.journalBytes += line.length;
    this.armIdleCompaction();
  }

  /** Writes the whole state as the snapshot, then empties the journal; `next`: its index (diff mode only). */
  private async compact(data: CheckpointData, next: StateIndex | undefined, t0: number): Promise<void> {
    const start = t0;
    let t = t0;
    const buf = Buffer.from(JSON.stringify({ ...data, journalSeq: this.seq }));
    t = this.stage('compact.serialize', t);
    const dir = dirname(this.path);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = join(dir, `.${basename(this.path)}.${process.pid}.tmp`);
    let renamed = false;
    try {
      const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
      try {
        const { bytesWritten } = await fh.write(buf, 0, buf.length);
        if (bytesWritten !== buf.length)
          throw new Error(`short write to ${tmp}: ${bytesWritten} of ${buf.length} bytes`);
        t = this.stage('compact.write', t);
        if (this.fsync) await fh.sync();
        t = this.stage('compact.fsync', t);
      } finally {
        await fh.close();
      }
      await rename(tmp, this.path);
      renamed = true;
      if (this.fsync) await fsyncDir(dir);
      t = this.stage('compact.rename', t);
    } finally {
      if (!renamed) await unlink(tmp).catch(() => undefined);
    }
    // The snapshot holds every record up to this.seq: they may go (a crash before this line
    // leaves records the loader skips by their seq).
    const fh = await this.openJournal();
    await fh.truncate(0);
    if (this.fsync) await fh.sync();
    this.stage('compact.truncate', t);
    this.journalBytes = 0;
    this.snapshotBytes = buf.length;
    this.compactNext = false;
    this.compacted = true;
    this.durable = next;
    this.durableData = data;
    this.durableBootId = data.bootId;
    clearTimeout(this.idleTimer);
    this.opts.onWrite?.(performance.now() - start, buf.length);
  }

  private async openJournal(): Promise<FileHandle> {
    this.journal ??= await open(
      this.journalPath,
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (this.dsync ? constants.O_DSYNC : 0),
      0o600,
    );
    return this.journal;
  }

  /** After `idleCompactMs` without another write, folds the journal into the snapshot. */
  private armIdleCompaction(): void {
    const ms = this.opts.idleCompactMs ?? 5000;
    if (ms <= 0) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.journalBytes === 0) return;
      this.compactNext = true;
      void this.commit();
    }, ms);
    this.idleTimer.unref();
  }
}

/** fsyncs a directory so a rename in it survives a crash. */
async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
