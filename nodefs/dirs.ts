/**
 * Directory creation and path facts shared by ipamd and the CNI plugin, safe on every
 * filesystem (docs/design.md#bounds-on-bad-input).
 *
 * Node's own `mkdir(p, { recursive: true })` (20.x) never returns when a directory's mkdir
 * fails with ENOENT although its parent exists, as under /proc or /sys: it goes back to the
 * parent (EEXIST) and tries the child again, forever — about 5,000 mkdir calls a second,
 * and `mkdirSync` blocks the event loop so even SIGTERM is never handled. {@link mkdirParents}
 * and {@link mkdirParentsSync} create each missing component once, top down, and throw the
 * first error: they never retry.
 */
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';

/** Pseudo filesystems that can never hold a file, directory or socket ipamd makes. */
export const PSEUDO_FS_ROOTS = ['/proc', '/sys', '/dev'] as const;

/** The pseudo filesystem root (`/proc`, `/sys`, `/dev`) holding the absolute path `p`, or undefined. */
export function pseudoFsOf(p: string): string | undefined {
  const n = path.posix.normalize(p);
  return PSEUDO_FS_ROOTS.find((root) => n === root || n.startsWith(`${root}/`));
}

/** The missing components of absolute `dir`, nearest the root first (empty when `dir` exists). */
function missingChain(dir: string, exists: (d: string) => boolean): string[] {
  const chain: string[] = [];
  for (let d = path.resolve(dir); !exists(d); d = path.dirname(d)) {
    chain.unshift(d);
    if (path.dirname(d) === d) break;
  }
  return chain;
}

const notADirectory = (d: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${d}'`), { code: 'ENOTDIR', path: d });

/**
 * Creates directory `dir` (absolute) and its missing parents with `mode` (e.g. 0o700),
 * each once. Resolves when `dir` is a directory (already, or made here).
 * @throws the first mkdir error (ENOENT under /proc, EACCES, EROFS, ENOSPC, …) or ENOTDIR
 *         when something that is not a directory stands in the way; never retries.
 */
export async function mkdirParents(dir: string, mode = 0o755): Promise<void> {
  const isDir = async (d: string) => (await stat(d).catch(() => undefined))?.isDirectory();
  const st = await stat(dir).catch(() => undefined);
  if (st) {
    if (!st.isDirectory()) throw notADirectory(dir);
    return;
  }
  // The chain of missing components, found upward, made downward: one mkdir each.
  const chain: string[] = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const s = await stat(d).catch(() => undefined);
    if (s) {
      if (!s.isDirectory()) throw notADirectory(d);
      break;
    }
    chain.unshift(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of chain) {
    try {
      await mkdir(d, { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !(await isDir(d))) throw e;
    }
  }
}

/** {@link mkdirParents}, synchronously (a few metadata calls at start-up). Same errors. */
export function mkdirParentsSync(dir: string, mode = 0o755): void {
  const statOf = (d: string) => {
    try {
      return statSync(d);
    } catch {
      return undefined;
    }
  };
  const st = statOf(dir);
  if (st) {
    if (!st.isDirectory()) throw notADirectory(dir);
    return;
  }
  const chain = missingChain(dir, (d) => {
    const s = statOf(d);
    if (s && !s.isDirectory()) throw notADirectory(d);
    return !!s;
  });
  for (const d of chain) {
    try {
      mkdirSync(d, { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !statOf(d)?.isDirectory()) throw e;
    }
  }
}

/**
 * Checks, writing nothing, that directory `dir` exists writable or can be created: its
 * nearest existing ancestor must be writable (access(2) W_OK). A read-only mount fails here
 * with EROFS, a directory of another owner with EACCES.
 * @throws the access(2) error (its `path` is the ancestor checked).
 */
export function assertCanWriteDirSync(dir: string): void {
  let d = path.resolve(dir);
  for (;;) {
    try {
      statSync(d);
      break;
    } catch {
      const up = path.dirname(d);
      if (up === d) break;
      d = up;
    }
  }
  accessSync(d, constants.W_OK);
}
