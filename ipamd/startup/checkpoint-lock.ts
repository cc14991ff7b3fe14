/**
 * One ipamd per state directory (docs/design.md#one-ipamd-per-node): before ipamd reads or
 * writes anything in the directory of its checkpoint (the checkpoint and its journal, the
 * instance-limits and ENI inventory caches, the DEL spool), it takes an exclusive
 * `flock(2)` on `<dir>/ipamd.lock` and writes who it is into that file.
 *
 * A flock belongs to the open file (the inode), not to a network, mount or PID namespace,
 * so every ipamd that shares the directory meets it: in another network namespace, through
 * another mount of the directory (a hostPath seen at another path in a container), through
 * a symlink, or in the same process (each take opens the file anew, and flocks of two open
 * files conflict). The kernel drops it when the holder's last descriptor closes, SIGKILL
 * included, so no lock goes stale; the file itself stays (removing it would let two
 * processes lock two different inodes of one name).
 *
 * Node.js has no flock in its core. The lock is taken by util-linux's `flock(1)` (an
 * essential Debian package, in the image's pinned contents) on a descriptor ipamd opened
 * and hands it as fd 3: the lock is on the open file description both share, so it stays
 * with ipamd's descriptor after `flock` exits. A native addon (fs-ext) would need a
 * compiler or prebuilt binaries at image build and cannot go in the one-file bundle;
 * the fcntl-based ones (os-lock, fs-native-extensions) take POSIX record locks, which do
 * not conflict within one process and are dropped when any descriptor of the file closes.
 */
import { spawn } from 'node:child_process';
import { closeSync, constants, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { mkdirParentsSync } from '../../nodefs/dirs.js';
import { GuardHeldError, parseHolder, type GuardHolder } from './guard-holder.js';

/** The lock file's name in the state directory. */
export const LOCK_FILE = 'ipamd.lock';

/** flock(1)'s exit code when another open file holds the lock (`--conflict-exit-code`). */
const CONFLICT = 75;

/** A held lock; {@link release} frees it (idempotent). */
export interface CheckpointLock {
  /** The lock file (for logs). */
  readonly file: string;
  release(): Promise<void>;
}

/**
 * flock(1) takes an exclusive, non-blocking lock on descriptor `fd` (its fd 3).
 * @returns 'held', or 'busy' when another open file of the inode holds it.
 * @throws Error when flock(1) cannot run or fails otherwise (its stderr in the message).
 */
function flockNonBlocking(fd: number): Promise<'held' | 'busy'> {
  return new Promise((resolve, reject) => {
    const c = spawn('flock', ['--nonblock', '--exclusive', '--conflict-exit-code', String(CONFLICT), '3'], {
      stdio: ['ignore', 'ignore', 'pipe', fd],
    });
    let err = '';
    c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    c.once('error', (e) => reject(new Error(`flock(1) (util-linux) could not run: ${e.message}`)));
    c.once('close', (code, sig) => {
      if (code === 0) resolve('held');
      else if (code === CONFLICT) resolve('busy');
      else reject(new Error(`flock(1) failed (${code ?? sig}): ${err.trim()}`));
    });
  });
}

/** The holder's record in `file`, read twice (a holder may be between truncate and write); 'silent' if none. */
async function readHolder(file: string): Promise<GuardHolder | 'silent'> {
  for (let i = 0; i < 2; i++) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      // unreadable: as silent
    }
    const h = parseHolder(text);
    if (h) return h;
    if (i === 0) await new Promise((r) => setTimeout(r, 100)); // a second look, once, after the holder's write
  }
  return 'silent';
}

/**
 * Takes the lock of state directory `dir` (created 0700 if missing) and, with `me`, writes
 * the holder record into the lock file.
 * @throws GuardHeldError naming the holder when another open file holds it;
 *         the fs or flock(1) error otherwise.
 */
export async function acquireCheckpointLock(dir: string, me?: GuardHolder): Promise<CheckpointLock> {
  // Synchronous: a few metadata calls at the very start, which through libuv's thread pool
  // would queue behind other daemons' fsyncs in a fleet simulation (one process, 4 threads).
  mkdirParentsSync(dir, 0o700);
  const file = path.join(dir, LOCK_FILE);
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  try {
    if ((await flockNonBlocking(fd)) === 'busy') throw new GuardHeldError(`lock file ${file}`, await readHolder(file));
    ftruncateSync(fd, 0);
    if (me) writeSync(fd, `${JSON.stringify(me)}\n`, 0);
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  let released: Promise<void> | undefined;
  return {
    file,
    release: () =>
      (released ??= (async () => {
        try {
          ftruncateSync(fd, 0); // no record of a holder that is gone
        } finally {
          closeSync(fd); // the last descriptor of the open file: the kernel drops the lock
        }
      })()),
  };
}

/**
 * Runs `start` while holding the lock of state directory `dir` (see
 * {@link acquireCheckpointLock}), or `held` when the caller took it already (ipamd-main
 * takes it before it opens its log); the lock is freed when `start` throws, or after the
 * returned service's `stop` (whether it resolves or throws).
 * @throws what {@link acquireCheckpointLock} or `start` throws.
 */
export async function whileHoldingCheckpointLock<T extends { stop(graceMs?: number): Promise<void> }>(
  dir: string,
  start: () => Promise<T>,
  held?: CheckpointLock,
): Promise<T> {
  const lock = held ?? (await acquireCheckpointLock(dir));
  let service: T;
  try {
    service = await start();
  } catch (e) {
    await lock.release();
    throw e;
  }
  const stop = service.stop.bind(service);
  service.stop = async (graceMs?: number) => {
    try {
      await stop(graceMs);
    } finally {
      await lock.release();
    }
  };
  return service;
}
