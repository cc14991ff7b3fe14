/**
 * Carries loopback TCP services between the test's network namespace and a namespace
 * the test created (e.g. a node namespace running ipamd), without any link between the
 * two: a relay process inside the namespace (`nsenter --net`, socket-relay.ts) and
 * relays in the test process meet on Unix sockets in a temp dir.
 *
 * - `inward` ports: a service on `127.0.0.1:<p>` here answers on `127.0.0.1:<p>` inside
 *   the namespace too (same port, so endpoint URLs stay valid: the simulated EC2/IMDS), or,
 *   given as `{ inner, outer }`, the service on `127.0.0.1:<outer>` here answers on
 *   `127.0.0.1:<inner>` inside (each node of a cluster reaches its own instance's IMDS on
 *   the one port the DaemonSet names).
 * - `outward` ports: a service on `127.0.0.1:<q>` inside answers here on
 *   `127.0.0.1:<local>` (ipamd's introspection).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRelay, type Relay, type RelayEnd } from './socket-relay.js';

const RELAY_SCRIPT = fileURLToPath(new URL('./socket-relay.js', import.meta.url));

/** A running bridge. */
export interface NetnsBridge {
  /** Port inside the namespace → port on 127.0.0.1 here, for every `outward` port. */
  outward: Map<number, number>;
  /** Stops both sides (idempotent). */
  close(): Promise<void>;
}

/**
 * Starts the bridge. `dir` must exist and be private to the test (socket files go there).
 * The namespace must have `lo` up.
 * @throws Error (after stopping what started) when a relay cannot bind or the inner
 *   relay does not report ready within 10 s.
 */
export async function bridgeNetns(o: {
  netnsPath: string;
  dir: string;
  inward: Array<number | { inner: number; outer: number }>;
  outward: number[];
}): Promise<NetnsBridge> {
  const inward = o.inward.map((p) => (typeof p === 'number' ? { inner: p, outer: p } : p));
  const sock = (kind: string, port: number): string => path.join(o.dir, `${kind}-${port}.sock`);
  const local: Relay[] = [];
  const inner: Array<{ from: RelayEnd; to: RelayEnd }> = [];
  for (const p of inward) inner.push({ from: { port: p.inner }, to: { path: sock('in', p.inner) } });
  for (const q of o.outward) inner.push({ from: { path: sock('out', q) }, to: { port: q } });
  const env = { ...process.env };
  delete env['NODE_EXTRA_CA_CERTS'];
  const child = spawn('nsenter', [`--net=${o.netnsPath}`, process.execPath, RELAY_SCRIPT, JSON.stringify(inner)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env,
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      child.stdin?.end();
      child.kill('SIGTERM');
      await exited;
      await Promise.all(local.map((r) => r.close()));
    })());
  try {
    for (const p of inward) local.push(await startRelay({ path: sock('in', p.inner) }, { port: p.outer }));
    const outward = new Map<number, number>();
    for (const q of o.outward) {
      const r = await startRelay({ port: 0 }, { path: sock('out', q) });
      local.push(r);
      outward.set(q, (r.listening as { port: number }).port);
    }
    let out = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`netns relay not ready after 10 s: ${err}`)), 10_000);
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (/^ready\n.*\n/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`netns relay exited: ${err}`));
      });
    });
    return { outward, close };
  } catch (e) {
    await close();
    throw e;
  }
}
