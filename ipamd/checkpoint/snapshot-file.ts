/**
 * Writing the checkpoint's snapshot file atomically and durably (docs/design.md "Checkpoint"):
 * a temp file in the same directory (mode 0600), write, fsync, rename over the snapshot,
 * then fsync the directory so the rename survives a crash (rename(2), fsync(2): a rename is
 * durable once its directory is synced). The directory is created (mode 0700) if missing.
 */
import { constants } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { mkdirParents } from '../../nodefs/dirs.js';
import { basename, dirname, join } from 'node:path';

/** Options of {@link writeSnapshotFile}. */
export interface SnapshotFileOptions {
  /** fsync the file and the directory (default true). */
  fsync?: boolean;
  /** Called with each stage's duration (ms): `write`, `fsync`, `rename` (rename + directory fsync). */
  onStage?: (stage: 'write' | 'fsync' | 'rename', ms: number) => void;
  /** Runs after the directory exists and before the rename and directory fsync (e.g. creating files whose names that fsync is to make durable too). */
  beforeRename?: () => Promise<void>;
}

/**
 * Replaces `path` with `buf`, durably: afterwards a crash leaves either the old file or
 * the new one, never a mix (the temp file is removed on failure).
 * @throws the fs error, or Error on a short write.
 */
export async function writeSnapshotFile(path: string, buf: Buffer, o: SnapshotFileOptions = {}): Promise<void> {
  const fsync = o.fsync ?? true;
  let t = performance.now();
  const stage = (name: 'write' | 'fsync' | 'rename') => {
    const now = performance.now();
    o.onStage?.(name, now - t);
    t = now;
  };
  const dir = dirname(path);
  await mkdirParents(dir, 0o700);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.tmp`);
  let renamed = false;
  try {
    const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      const { bytesWritten } = await fh.write(buf, 0, buf.length);
      if (bytesWritten !== buf.length) throw new Error(`short write to ${tmp}: ${bytesWritten} of ${buf.length} bytes`);
      stage('write');
      if (fsync) await fh.sync();
      stage('fsync');
    } finally {
      await fh.close();
    }
    await o.beforeRename?.();
    await rename(tmp, path);
    renamed = true;
    if (fsync) await fsyncDir(dir);
    stage('rename');
  } finally {
    if (!renamed) await unlink(tmp).catch(() => undefined);
  }
}

/** fsyncs a directory so a rename (or a file created) in it survives a crash. */
async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
