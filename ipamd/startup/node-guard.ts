/**
 * One ipamd per node, whatever its directories (docs/design.md#one-ipamd-per-node). Before
 * ipamd opens its log or reads or writes anything on the node, it binds the Linux abstract
 * Unix socket `@eni-ipam/ipamd`. Abstract names live in the network namespace, not on a
 * filesystem: every hostNetwork ipamd of a node meets the same name whatever its socket,
 * checkpoint and log paths, and the kernel frees the name when the holder dies (SIGKILL
 * included), so there is no stale lock (unix(7), "Abstract sockets").
 *
 * The holder answers each connection with one JSON line naming itself ({@link GuardHolder}),
 * so a second ipamd exits with a line naming the running one. The checkpoint-directory
 * lock (checkpoint-lock.ts) stays as a second line.
 *
 * Simulated nodes in one namespace (tests, demos) each have an IMDS endpoint of their own:
 * any endpoint but the instance's real one (169.254.169.254, [fd00:ec2::254]) is part of
 * the name, so they never meet, while two ipamds of one simulated instance do.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';

/** The guard's abstract name on a real node (shown by `ss -xlp | grep eni-ipam`). */
export const NODE_GUARD_NAME = 'eni-ipam/ipamd';

/** What the holder tells a second ipamd about itself. */
export interface GuardHolder {
  pid: number;
  /** ENI_IPAM_SOCKET, ENI_IPAM_CHECKPOINT_PATH and AWS_VPC_K8S_CNI_LOG_FILE of the holder. */
  socket: string;
  checkpoint: string;
  logFile: string;
  /** When it took the guard (ISO 8601). */
  since: string;
}

/** A held guard; {@link NodeGuard.release} frees the name (idempotent). */
export interface NodeGuard {
  /** The abstract socket name, without its leading NUL. */
  readonly name: string;
  release(): Promise<void>;
}

const REAL_IMDS = new Set(['http://169.254.169.254', 'http://[fd00:ec2::254]']);

/**
 * The guard's name for IMDS endpoint `imdsEndpoint` (AWS_EC2_METADATA_SERVICE_ENDPOINT):
 * {@link NODE_GUARD_NAME} for the instance's own IMDS, else with a short hash of the
 * endpoint appended (a simulated instance).
 */
export function nodeGuardName(imdsEndpoint: string): string {
  const e = imdsEndpoint.trim().replace(/\/+$/, '').toLowerCase();
  if (REAL_IMDS.has(e)) return NODE_GUARD_NAME;
  return `${NODE_GUARD_NAME}@${createHash('sha256').update(e).digest('hex').slice(0, 16)}`;
}

/** Binds `\0name`; resolves with the server, or rejects with the socket error (EADDRINUSE when held). */
function bind(name: string, me: GuardHolder): Promise<net.Server> {
  const line = `${JSON.stringify(me)}\n`;
  const server = net.createServer((conn) => {
    conn.on('error', () => undefined);
    conn.end(line);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(`\0${name}`, () => {
      server.off('error', reject);
      server.on('error', () => undefined); // held whatever happens to its accepts (e.g. EMFILE)
      server.unref();
      resolve(server);
    });
  });
}

/**
 * Asks the holder of `\0name` who it is (one JSON line), within `timeoutMs`.
 * @returns the holder, 'gone' when nobody listens any more, or 'silent' when it did not answer.
 */
export function askHolder(name: string, timeoutMs = 2000): Promise<GuardHolder | 'gone' | 'silent'> {
  return new Promise((resolve) => {
    let buf = '';
    const c = net.connect(`\0${name}`);
    const timer = setTimeout(() => {
      c.destroy();
      resolve('silent');
    }, timeoutMs);
    c.setEncoding('utf8');
    c.on('data', (d: string) => (buf += d));
    c.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code === 'ECONNREFUSED' || e.code === 'ENOENT' ? 'gone' : 'silent');
    });
    c.on('end', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(buf.split('\n')[0] ?? '') as GuardHolder);
      } catch {
        resolve('silent');
      }
    });
  });
}

/** The one line a second ipamd exits with. */
export function describeHolder(name: string, h: GuardHolder | 'silent'): string {
  const who =
    h === 'silent'
      ? 'a process that did not say which'
      : `pid ${h.pid}, socket ${h.socket}, checkpoint ${h.checkpoint}, log ${h.logFile}, since ${h.since}`;
  return `another ipamd is running on this node (${who}; abstract socket @${name}): one ipamd per node, whatever its directories; stop it first (two would hand out each other's addresses)`;
}

/**
 * Takes the node guard `name` for `me`; a holder that dies while we ask is replaced (up to
 * 3 tries, no waiting in between: each try is a bind and a connect).
 * @throws Error whose message is {@link describeHolder}'s line when another ipamd holds it;
 *         the socket error otherwise.
 */
export async function acquireNodeGuard(name: string, me: GuardHolder): Promise<NodeGuard> {
  for (let attempt = 1; ; attempt++) {
    try {
      const server = await bind(name, me);
      let released: Promise<void> | undefined;
      return { name, release: () => (released ??= new Promise<void>((r) => server.close(() => r()))) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      const h = await askHolder(name);
      if (h !== 'gone' || attempt >= 3) throw new Error(describeHolder(name, h === 'gone' ? 'silent' : h));
    }
  }
}
