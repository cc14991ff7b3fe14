/**
 * Durable checkpoint writes with group commit (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip,
 * step 3): concurrent changes share one write, and each caller learns whether the write
 * holding its change succeeded.
 *
 * A write appends to the active journal file (journal.ts: the difference from the last
 * durable state as one line, written O_DSYNC; ~0.1–0.3 ms on a local disk, whatever the
 * state's size; with a {@link CheckpointSource} the difference is what the state recorded
 * as changed, O(changes), else a diff of two snapshots, O(state)).
 *
 * Compaction (the whole state into the snapshot: temp file, fsync, rename, directory fsync;
 * then the journal emptied) runs **beside** the appends once the active journal file has
 * grown past the larger of `compactBytes` and the snapshot's size: the write that finds
 * it so takes the state and its delta at one instant, appends the delta, makes the other
 * (empty) journal file active, and returns; the snapshot of that state (with `journalSeq`
 * = that record) is written while later commits append to the other file, and the file
 * left is emptied once the snapshot is durable. No commit waits for a compaction of this
 * kind. A compaction **in place of** a write (commits wait for it) happens on the first
 * write, after a failed append or a failed compaction (a partial record may be on disk),
 * after `idleCompactMs` without a change, and on {@link CheckpointWriter.flush}; it
 * empties both journal files.
 */
import { type FileHandle } from 'node:fs/promises';
import { diffState, indexState, type JournalRecord, type StateIndex } from './journal.js';
import { JournalFiles, type JournalIndex } from './journal-files.js';
import type { CheckpointData } from './schema.js';
import { writeSnapshotFile } from './snapshot-file.js';

/** Options of {@link CheckpointWriter}. */
export interface CheckpointWriterOptions {
  /** fsync/fdatasync the files and the directory (default true). */
  fsync?: boolean;
  /** Called after each successful compaction (whole snapshot) with its duration (ms) and size (bytes). */
  onWrite?: (ms: number, bytes: number) => void;
  /**
   * Called when a compaction beside the appends failed (no committer waits for it; the
   * next write compacts in place, and its committers see the error if it fails again).
   */
  onBackgroundError?: (e: Error) => void;
  /**
   * Called with the duration (ms) of each stage of each write: `delta` (taking a
   * {@link CheckpointSource}'s changes) or `snapshot` (reading the whole state: every write
   * without a source, each compaction with one), `serialize` (diff + JSON), then
   * `write.dsync` (the O_DSYNC write, sync included) or `write` and `fdatasync` for appends; `compact.serialize`, `compact.write`, `compact.fsync`,
   * `compact.rename` (rename + directory fsync), `compact.truncate` for compactions (those
   * beside the appends too, interleaved with the appends' stages). See service/stage-trace.ts.
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
 * checkpoint/datastore-source.ts), so an append costs O(changes) instead of a snapshot and a
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
 * Writes `snapshot()` to `path` (+ journal files `path.journal`, `path.journal.b`) durably;
 * the parent directory is created with mode 0700 if missing, the files get mode 0600.
 *
 * Group commit: at most one write runs at a time; every {@link commit} made while a
 * write is in flight joins the next write, whose state is taken when it starts. A
 * compaction beside the appends (module docstring) may run meanwhile. The on-disk state
 * (snapshot + journal files, read by {@link readCheckpoint}) equals the last state a write
 * took, once that write resolved.
 */
export class CheckpointWriter {
  private writing?: Promise<void>;
  private pending?: Batch;
  /** A compaction beside the appends, while it runs (never rejects: a failure sets {@link compactNext}). */
  private background?: Promise<void>;
  private readonly fsync: boolean;
  /** The journal is opened O_DSYNC: each append is durable when its write returns. */
  private readonly dsync: boolean;
  private readonly files: JournalFiles;
  /** The state on disk after the last successful write; undefined until the first (a compaction). */
  private durable?: StateIndex;
  /** The data {@link durable} was indexed from (its `released` array is compared by identity). */
  private durableData?: CheckpointData;
  /** The boot id in the snapshot on disk (a record does not carry it: a change compacts). */
  private durableBootId?: string;
  private seq: number;
  private snapshotBytes = 0;
  /** An append or a compaction failed, or a compaction was asked for: the next write compacts in place. */
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
    this.files = new JournalFiles(path, this.dsync);
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
   * Waits until no write or compaction is in flight or pending, then compacts the journal
   * into the snapshot (so the snapshot alone is the whole state, e.g. for an older ipamd
   * after a downgrade) and closes the journal files. Never rejects (errors go to
   * committers; a failed final compaction leaves snapshot + journal, which load as before).
   */
  async flush(): Promise<void> {
    await this.idle();
    await this.background;
    clearTimeout(this.idleTimer);
    if (this.compacted && this.files.bytes(0) + this.files.bytes(1) > 0) {
      this.compactNext = true;
      await this.commit().catch(() => undefined);
      await this.idle();
    }
    clearTimeout(this.idleTimer);
    await this.files.close();
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

  /** True when the next write must be a compaction in place (whatever the state). */
  private mustCompact(): boolean {
    return !this.compacted || this.compactNext || this.opts.journal === false;
  }

  /**
   * True when this write should start a compaction beside the appends: the active journal
   * file outgrew the larger of `compactBytes` and the snapshot, and none is running (the
   * other file is then empty: a compaction that failed set {@link compactNext}).
   */
  private rotateNow(): boolean {
    return !this.background && this.files.bytes() >= Math.max(this.opts.compactBytes ?? 256 * 1024, this.snapshotBytes);
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
      await this.background; // an older snapshot must not land after this one
      await this.compactInPlace(data, next, t);
      return;
    }
    const rec = diffState(this.durable, next, this.seq + 1);
    const rotate = this.rotateNow();
    if (rec) await this.append(rec, t);
    this.durable = next;
    this.durableData = data; // the same state when !rec: keep the newest arrays for the identity check
    if (rotate) this.compactBeside(data);
  }

  /** A write with a {@link CheckpointSource}: its delta appended, or a compaction of its snapshot. */
  private async writeDelta(src: CheckpointSource): Promise<void> {
    let t = performance.now();
    if (this.mustCompact()) {
      await this.background; // an older snapshot must not land after this one
      const data = src.snapshot();
      t = this.stage('snapshot', t);
      await this.compactInPlace(data, undefined, t);
      return;
    }
    const body = src.delta();
    // Rotating: the whole state at the same instant as the delta (no change between the
    // two), so the snapshot = the durable state once this record is appended.
    const data = this.rotateNow() ? src.snapshot() : undefined;
    t = this.stage(data ? 'snapshot' : 'delta', t);
    const rec: JournalRecord = { seq: this.seq + 1 };
    for (const [k, v] of Object.entries(body) as Array<[keyof typeof body, unknown]>)
      if (v !== undefined && !(Array.isArray(v) && v.length === 0)) (rec as unknown as Record<string, unknown>)[k] = v;
    if (Object.keys(rec).length > 1) await this.append(rec, t); // else nothing changed: already durable
    if (data) this.compactBeside(data);
  }

  /** Appends `rec` (numbered `this.seq + 1`) to the active journal file, durably. */
  private async append(rec: JournalRecord, t0: number): Promise<void> {
    let t = t0;
    const line = Buffer.from(JSON.stringify(rec) + '\n');
    t = this.stage('serialize', t);
    const fh: FileHandle = await this.files.append(line);
    if (this.dsync) {
      this.stage('write.dsync', t); // the write and its sync, one call
    } else {
      t = this.stage('write', t);
      if (this.fsync) await fh.datasync();
      this.stage('fdatasync', t);
    }
    this.seq = rec.seq;
    this.armIdleCompaction();
  }

  /**
   * Starts the compaction beside the appends of `data` (the durable state at record
   * `this.seq`): appends go to the other journal file from now on; once the snapshot is
   * durable the file left is emptied.
   */
  private compactBeside(data: CheckpointData): void {
    const seq = this.seq;
    const left: JournalIndex = this.files.switchActive();
    this.durableBootId = data.bootId;
    this.background = (async () => {
      // The write's callers get their replies before the snapshot's JSON takes the event loop.
      await new Promise((r) => setImmediate(r));
      const start = performance.now();
      const bytes = await this.writeSnapshot(data, seq, start);
      const t = performance.now();
      await this.files.empty(left, this.fsync);
      this.stage('compact.truncate', t);
      this.snapshotBytes = bytes;
      this.opts.onWrite?.(performance.now() - start, bytes);
    })()
      .catch((e: unknown) => {
        this.compactNext = true; // the next write compacts in place (and empties both files)
        this.opts.onBackgroundError?.(e instanceof Error ? e : new Error(String(e)));
      })
      .finally(() => {
        this.background = undefined;
      });
  }

  /** Writes the whole state as the snapshot (journalSeq `seq`); returns its size (bytes). */
  private async writeSnapshot(data: CheckpointData, seq: number, t0: number): Promise<number> {
    const buf = Buffer.from(JSON.stringify({ ...data, journalSeq: seq }));
    this.stage('compact.serialize', t0);
    await writeSnapshotFile(this.path, buf, {
      fsync: this.fsync,
      onStage: (stage, ms) => this.opts.onStage?.(`compact.${stage}`, ms),
      // Both journal files exist before the directory fsync makes the rename durable, so
      // their names are as durable as the snapshot before any record is acknowledged.
      beforeRename: () => this.files.openAll(),
    });
    return buf.length;
  }

  /** Writes the whole state as the snapshot, then empties both journal files; `next`: its index (diff mode only). */
  private async compactInPlace(data: CheckpointData, next: StateIndex | undefined, t0: number): Promise<void> {
    const bytes = await this.writeSnapshot(data, this.seq, t0);
    // The snapshot holds every record up to this.seq: they may go (a crash before this
    // leaves records the loader skips by their seq).
    const t = performance.now();
    await this.files.empty(0, this.fsync);
    await this.files.empty(1, this.fsync);
    this.stage('compact.truncate', t);
    this.snapshotBytes = bytes;
    this.compactNext = false;
    this.compacted = true;
    this.durable = next;
    this.durableData = data;
    this.durableBootId = data.bootId;
    clearTimeout(this.idleTimer);
    this.opts.onWrite?.(performance.now() - t0, bytes);
  }

  /** After `idleCompactMs` without another write, folds the journal into the snapshot. */
  private armIdleCompaction(): void {
    const ms = this.opts.idleCompactMs ?? 5000;
    if (ms <= 0) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.files.bytes(0) + this.files.bytes(1) === 0) return;
      this.compactNext = true;
      void this.commit();
    }, ms);
    this.idleTimer.unref();
  }
}
