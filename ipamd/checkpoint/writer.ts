/**
 * Durable checkpoint writes with group commit (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 3): concurrent changes
 * share one write+fsync+rename, and each caller learns whether the write holding its
 * change succeeded.
 */
import { mkdir, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import writeFileAtomic from 'write-file-atomic';
import type { CheckpointData } from './schema.js';

/** Options of {@link CheckpointWriter}. */
export interface CheckpointWriterOptions {
  /** fsync the file and its directory (default true). */
  fsync?: boolean;
  /** Called after each successful write with its duration (ms) and size (bytes). */
  onWrite?: (ms: number, bytes: number) => void;
}

interface Batch {
  promise: Promise<void>;
  resolve: () => void;
  reject: (e: Error) => void;
}

function newBatch(): Batch {
  let resolve!: () => void, reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => { resolve = res; reject = rej; });
  // A batch nobody awaits (e.g. only flush()) must not crash the process.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * Writes `snapshot()` to `path` atomically (write-file-atomic: temp file in the same
 * directory, fsync, rename; then the directory is fsynced; the parent directory is
 * created with mode 0700 if missing; the file gets mode 0600).
 *
 * Group commit: at most one write runs at a time; every {@link commit} made while a
 * write is in flight joins the next write, whose snapshot is taken when it starts.
 */
export class CheckpointWriter {
  private writing?: Promise<void>;
  private pending?: Batch;
  private readonly fsync: boolean;

  /**
   * @param path checkpoint file; @param snapshot returns the state to persist (called
   * when a write starts); @param opts see {@link CheckpointWriterOptions}.
   */
  constructor(private readonly path: string, private readonly snapshot: () => CheckpointData, private readonly opts: CheckpointWriterOptions = {}) {
    this.fsync = opts.fsync ?? true;
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

  /** Waits until no write is in flight or pending. Never rejects (errors go to committers). */
  async flush(): Promise<void> {
    while (this.writing || this.pending) {
      await Promise.allSettled([this.writing, this.pending?.promise]);
    }
  }

  private kick(): void {
    if (this.writing || !this.pending) return;
    const batch = this.pending;
    this.pending = undefined;
    const w = this.writeOnce().then(batch.resolve, (e: unknown) => batch.reject(e instanceof Error ? e : new Error(String(e))));
    this.writing = w.finally(() => {
      this.writing = undefined;
      this.kick();
    });
  }

  private async writeOnce(): Promise<void> {
    const t0 = performance.now();
    const data = Buffer.from(JSON.stringify(this.snapshot()));
    const dir = dirname(this.path);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.path, data, { fsync: this.fsync, mode: 0o600 });
    if (this.fsync) await fsyncDir(dir);
    this.opts.onWrite?.(performance.now() - t0, data.length);
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
