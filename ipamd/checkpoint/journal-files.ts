/**
 * The checkpoint's two journal files (journal.ts {@link JOURNAL_SUFFIXES}) as the writer
 * uses them: records are appended to the active file; a compaction beside the appends
 * makes the other (empty) file active, folds the one it left into the snapshot, then empties
 * it. The reader merges both by record number, so either may hold the newer records.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { JOURNAL_SUFFIXES } from './journal.js';

/** Index of a journal file in {@link JOURNAL_SUFFIXES}. */
export type JournalIndex = 0 | 1;

/** The two journal files beside snapshot `path`; opened lazily, O_APPEND (and O_DSYNC with `dsync`), mode 0600. */
export class JournalFiles {
  private readonly paths: readonly [string, string];
  private readonly handles: [Promise<FileHandle> | undefined, Promise<FileHandle> | undefined] = [undefined, undefined];
  /** Bytes appended to each file since this process last emptied it. */
  private readonly sizes: [number, number] = [0, 0];
  private current: JournalIndex = 0;

  /** @param path the snapshot file; @param dsync open `O_DSYNC` (an append is durable when its write returns). */
  constructor(
    path: string,
    private readonly dsync: boolean,
  ) {
    this.paths = [path + JOURNAL_SUFFIXES[0], path + JOURNAL_SUFFIXES[1]];
  }

  /** The file appends go to. */
  get active(): JournalIndex {
    return this.current;
  }

  /** Bytes appended to file `i` since it was last emptied (default: the active file). */
  bytes(i: JournalIndex = this.current): number {
    return this.sizes[i];
  }

  /** Path of file `i` (default: the active file). */
  path(i: JournalIndex = this.current): string {
    return this.paths[i];
  }

  /**
   * Opens both files, creating missing ones: call before the directory fsync that is to
   * make their names durable (a record in a file whose name is not durable could vanish
   * with it on power loss).
   * @throws the fs error.
   */
  async openAll(): Promise<void> {
    await this.handle(0);
    await this.handle(1);
  }

  /**
   * Appends `line` to the active file in one write.
   * @returns the handle written to (for an fdatasync when not `dsync`).
   * @throws the fs error, or Error on a short write (a partial record may be on disk).
   */
  async append(line: Buffer): Promise<FileHandle> {
    const i = this.current;
    const fh = await this.handle(i);
    const { bytesWritten } = await fh.write(line, 0, line.length);
    if (bytesWritten !== line.length)
      throw new Error(`short write to ${this.paths[i]}: ${bytesWritten} of ${line.length} bytes`);
    this.sizes[i] += line.length;
    return fh;
  }

  /** Makes the other file active (it must be empty: the caller's invariant); returns the one left. */
  switchActive(): JournalIndex {
    const left = this.current;
    this.current = left === 0 ? 1 : 0;
    return left;
  }

  /**
   * Empties file `i` (truncate to 0, then fsync with `fsync`).
   * @throws the fs error.
   */
  async empty(i: JournalIndex, fsync: boolean): Promise<void> {
    const fh = await this.handle(i);
    await fh.truncate(0);
    if (fsync) await fh.sync();
    this.sizes[i] = 0;
  }

  /** Closes both files (errors ignored). */
  async close(): Promise<void> {
    for (const i of [0, 1] as const) {
      const h = this.handles[i];
      this.handles[i] = undefined;
      await h?.then((fh) => fh.close()).catch(() => undefined);
    }
  }

  /** File `i`'s handle, opened once (a failed open is tried again next time). */
  private handle(i: JournalIndex): Promise<FileHandle> {
    const flags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (this.dsync ? constants.O_DSYNC : 0);
    const h = (this.handles[i] ??= open(this.paths[i], flags, 0o600));
    h.catch(() => {
      if (this.handles[i] === h) this.handles[i] = undefined;
    });
    return h;
  }
}
