/**
 * A grpc-js server listening on a Unix socket through a `net.Server` of ipamd's own, so the
 * number of open client connections is bounded (grpc-js has no cap: `maxConnections`,
 * connections handed over with `createConnectionInjector`): the socket's directory created,
 * a stale socket file removed (a live server on it refuses: rpc/server.ts
 * `removeStaleSocket`), the socket made mode 0660.
 */
import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { mkdirParents } from '../../nodefs/dirs.js';

/**
 * Binds `sock` for `server` (directory created with `dirMode`, stale socket removed, mode 0660).
 * @returns the listener (close it to stop accepting) and the socket file's inode, to tell
 *   later whether the file at `sock` is still this one.
 * @throws Error when another process serves on `sock`, `sock` is not a socket, or the bind fails.
 */
export async function listenUnixGrpc(
  server: grpc.Server,
  sock: string,
  o: { maxConnections: number; dirMode: number; onError: (e: Error) => void },
): Promise<{ listener: net.Server; ino: number }> {
  await mkdirParents(path.dirname(sock), o.dirMode);
  await removeStaleSocket(sock);
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const listener = net.createServer((conn) => injector.injectConnection(conn));
  listener.maxConnections = o.maxConnections;
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(sock, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  listener.on('error', o.onError);
  await fs.chmod(sock, 0o660);
  return { listener, ino: (await fs.lstat(sock)).ino };
}

/** Removes a leftover socket file; refuses if a live server still answers on it. */
export async function removeStaleSocket(sock: string): Promise<void> {
  const st = await fs.lstat(sock).catch(() => undefined);
  if (!st) return;
  if (!st.isSocket()) throw new Error(`${sock} exists and is not a socket; refusing to replace it`);
  const alive = await new Promise<boolean>((resolve) => {
    const c = net.connect(sock);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
  if (alive) throw new Error(`another process is serving on ${sock}; is ipamd already running?`);
  await fs.rm(sock, { force: true });
}
