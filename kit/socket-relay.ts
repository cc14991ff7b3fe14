/**
 * Byte relays between a TCP or Unix-socket listener and a TCP or Unix-socket target,
 * for tests that run a daemon inside a network namespace of their own: a Unix socket is
 * a file, so it is reachable from every network namespace that shares the mount
 * namespace, while `127.0.0.1:<port>` is not. Two relays (one in each namespace) joined
 * by a Unix socket carry a TCP service across without creating any link.
 *
 * Run as a script (`node socket-relay.js '<json [{from, to}]>'`) it starts every relay,
 * prints `ready` and one JSON line with the bound addresses, and exits when its stdin
 * closes or on SIGTERM, so it dies with the test that spawned it.
 */
import net from 'node:net';
import { rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** One end: TCP (host default 127.0.0.1; port 0 = ephemeral when listening) or a Unix socket path. */
export type RelayEnd = { port: number; host?: string } | { path: string };

/** A listening relay. */
export interface Relay {
  /** The address it listens on (TCP with the bound port, or the socket path). */
  listening: RelayEnd;
  /** Stops listening and drops open connections; removes its socket file. */
  close(): Promise<void>;
}

const connectOpts = (e: RelayEnd): net.NetConnectOpts =>
  'path' in e ? { path: e.path } : { host: e.host ?? '127.0.0.1', port: e.port };

/**
 * Listens on `from`; every accepted connection is piped both ways to a new connection
 * to `to`. An error on either side closes both.
 * @throws Error when `from` cannot be bound (a stale socket file at `from.path` is removed first).
 */
export async function startRelay(from: RelayEnd, to: RelayEnd): Promise<Relay> {
  const open = new Set<net.Socket>();
  const server = net.createServer((down) => {
    const up = net.connect(connectOpts(to));
    open.add(down).add(up);
    const drop = (): void => {
      down.destroy();
      up.destroy();
      open.delete(down);
      open.delete(up);
    };
    down.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
    down.pipe(up).pipe(down);
  });
  if ('path' in from) rmSync(from.path, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if ('path' in from) server.listen(from.path, resolve);
    else server.listen(from.port, from.host ?? '127.0.0.1', resolve);
  });
  const addr = server.address();
  const listening: RelayEnd =
    'path' in from ? from : { host: from.host ?? '127.0.0.1', port: (addr as net.AddressInfo).port };
  return {
    listening,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => {
          if ('path' in from) rmSync(from.path, { force: true });
          resolve();
        });
      }),
  };
}

/** Script entry: see the module docstring. */
async function main(spec: string): Promise<void> {
  const pairs = JSON.parse(spec) as Array<{ from: RelayEnd; to: RelayEnd }>;
  const relays: Relay[] = [];
  for (const p of pairs) relays.push(await startRelay(p.from, p.to));
  const quit = (): void => void Promise.all(relays.map((r) => r.close())).finally(() => process.exit(0));
  process.once('SIGTERM', quit);
  process.stdin.on('end', quit).on('error', quit).resume();
  process.stdout.write(`ready\n${JSON.stringify(relays.map((r) => r.listening))}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv[2] ?? '[]').catch((e: Error) => {
    process.stderr.write(`socket-relay: ${e.message}\n`);
    process.exit(1);
  });
}
