/**
 * One ipamd per instance in a network namespace (docs/design.md#one-ipamd-per-node).
 * Before ipamd opens its log or reads or writes anything on the node, it reads which EC2
 * instance it runs on (instance-identity.ts) and binds the Linux abstract Unix socket
 * `@eni-ipam/ipamd/<instance id>/<hash>`. Abstract names live in the network namespace,
 * not on a filesystem: every hostNetwork ipamd of a node meets the same name whatever its
 * socket, checkpoint and log paths and however its IMDS endpoint is spelled, and the kernel
 * frees the name when the holder dies (SIGKILL included), so there is no stale lock
 * (unix(7), "Abstract sockets"). Across network namespaces the state directory's lock
 * (checkpoint-lock.ts) holds.
 *
 * The hash is of the instance identity document's account, region, instance id and
 * pending time: on EC2 the instance id alone names the node; simulated clouds (tests,
 * demos) reuse instance ids from one seed to the next, and their launch times tell them
 * apart.
 *
 * The holder answers each connection with one JSON line naming itself
 * ({@link GuardHolder}), so a second ipamd exits with a line naming the running one.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import { GuardHeldError, parseHolder, type GuardHolder } from './guard-holder.js';
import type { InstanceIdentity } from './instance-identity.js';

export { describeHolder, type GuardHolder } from './guard-holder.js';

/** The guard's abstract names start with this (shown by `ss -xlp | grep eni-ipam/ipamd`). */
export const NODE_GUARD_NAME = 'eni-ipam/ipamd';

/** A held guard; {@link NodeGuard.release} frees the name (idempotent). */
export interface NodeGuard {
  /** The abstract socket name, without its leading NUL. */
  readonly name: string;
  release(): Promise<void>;
}

/**
 * The guard's name for instance `id` (its IMDS identity): `eni-ipam/ipamd/<instance
 * id>/<16 hex digits>`, under the 107 bytes of a socket name.
 */
export function nodeGuardName(id: InstanceIdentity): string {
  const h = createHash('sha256')
    .update(JSON.stringify([id.accountId, id.region, id.instanceId, id.pendingTime]))
    .digest('hex')
    .slice(0, 16);
  return `${NODE_GUARD_NAME}/${id.instanceId.slice(0, 64)}/${h}`;
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
      resolve(parseHolder(buf) ?? 'silent');
    });
  });
}

/**
 * Takes the node guard `name` for `me`; a holder that dies while we ask is replaced (up to
 * 3 tries, no waiting in between: each try is a bind and a connect).
 * @throws GuardHeldError (its message describeHolder's line) when another ipamd holds it;
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
      if (h !== 'gone' || attempt >= 3)
        throw new GuardHeldError(`abstract socket @${name}`, h === 'gone' ? 'silent' : h);
    }
  }
}
