/**
 * One ipamd per checkpoint directory. Before ipamd reads or writes anything on the node
 * (instance-limits cache, ENI inventory cache, checkpoint, DEL spool), it binds a Linux
 * abstract Unix socket named after the directory's device and inode. The kernel lets one
 * socket hold a name and frees it when its process exits, SIGKILL included (unix(7),
 * "Abstract sockets"), so there is no stale lock to clean up and no window between a check
 * and a take.
 *
 * Abstract names belong to a network namespace. The chart runs ipamd with
 * `hostNetwork: true`, so every ipamd of a node shares one; the gRPC socket's own
 * "another process is serving" check (rpc/server.ts) stays as a second line.
 */
import { statSync } from 'node:fs';
import net from 'node:net';
import { mkdirParentsSync } from '../../nodefs/dirs.js';

/** A held lock; {@link release} frees the name (idempotent). */
export interface CheckpointLock {
  /** The abstract socket name, without its leading NUL (for logs). */
  readonly name: string;
  release(): Promise<void>;
}

/**
 * The abstract socket name for checkpoint directory `dir`: `eni-ipam/ipamd/<dev>:<ino>`,
 * the same whatever path the directory is mounted at in a container.
 * @throws the fs error when `dir` cannot be created or stat'ed.
 */
export function checkpointLockName(dir: string): string {
  // Synchronous: two metadata calls at the very start, which through libuv's thread pool
  // would queue behind other daemons' fsyncs in a fleet simulation (one process, 4 threads).
  mkdirParentsSync(dir, 0o700);
  const st = statSync(dir);
  return `eni-ipam/ipamd/${st.dev}:${st.ino}`;
}

/**
 * Takes the lock of checkpoint directory `dir`.
 * @throws Error naming the directory when another live process holds it (EADDRINUSE);
 *         the socket or fs error otherwise.
 */
export async function acquireCheckpointLock(dir: string): Promise<CheckpointLock> {
  const name = checkpointLockName(dir);
  const server = net.createServer((conn) => conn.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'EADDRINUSE'
          ? new Error(
              `another ipamd holds the checkpoint directory ${dir} (abstract socket @${name}); is ipamd already running? Two ipamds on one node would overwrite each other's checkpoint (the chart's updateStrategy must not surge)`,
            )
          : e,
      ),
    );
    server.listen(`\0${name}`, () => resolve());
  });
  // Held whatever happens to its accepts (e.g. EMFILE): an unheard 'error' would end ipamd.
  server.on('error', () => undefined);
  server.unref();
  let released: Promise<void> | undefined;
  return {
    name,
    release: () => (released ??= new Promise<void>((r) => server.close(() => r()))),
  };
}

/**
 * Runs `start` while holding the lock of checkpoint directory `dir` (see
 * {@link acquireCheckpointLock}); the lock is freed when `start` throws, or after the
 * returned service's `stop` (whether it resolves or throws).
 * @throws what {@link acquireCheckpointLock} or `start` throws.
 */
export async function whileHoldingCheckpointLock<T extends { stop(graceMs?: number): Promise<void> }>(
  dir: string,
  start: () => Promise<T>,
): Promise<T> {
  const lock = await acquireCheckpointLock(dir);
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
