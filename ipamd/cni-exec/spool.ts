/**
 * The DEL spool: THE one description of its directory and file format (the shim writes
 * it in C, cni-plugin/shim/spool.c; ipamd applies it, spool-applier.ts; tests and tools
 * may write entries with {@link writeSpoolEntry}).
 *
 * When ipamd is not serving (its exec socket absent or refusing, or it answered "U"), the
 * shim cannot release a DEL's IP, and a DEL must not fail (the runtime would retry it
 * for ever and the pod would never go). So the shim records it here and reports success;
 * ipamd applies every entry before its first evidence pass at start (a spooled sandbox
 * is never adopted), and any entry that appears while it runs.
 *
 * Directory: `<directory of the exec socket>/del-spool` ({@link spoolDirFor}); by default
 * `/var/run/eni-ipam/del-spool` (the run dir, a hostPath in the DaemonSet). Mode 0700,
 * created by whichever side needs it first. Corrupt entries go to its `corrupt/`
 * subdirectory (kept for forensics, never applied).
 *
 * One file per allocation key `(networkName, containerID, ifName)`:
 *   `del_<network>_<containerID>_<ifName>.json`, each part percent-encoded (every byte
 *   outside `[A-Za-z0-9.-]` as `%XX`, upper-case hex, so `_` separates the parts
 *   unambiguously). A repeated DEL of the same key rewrites the same file.
 * Written atomically: temp file `.tmp-<pid>-<final name>` in the same directory, write,
 * fsync, rename over the final name, fsync of the directory. Readers ignore names that
 * do not start with `del_` or end in `.json`; ipamd removes temp files older than a minute
 * (left by a shim killed mid-write, whose DEL the runtime retries).
 *
 * Content: one JSON object (UTF-8, one line, `\n` at the end):
 *   `{"version":1,"networkName":"aws-cni","containerID":"<id>","ifName":"eth0",
 *     "netns":"/var/run/netns/cni-…","spooledAt":1795450804249}`
 *   version     1 (a newer version is treated as corrupt, kept aside)
 *   networkName the config's `name` (`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
 *   containerID CNI_CONTAINERID (`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
 *   ifName      CNI_IFNAME (1-15 bytes, no `/`, `:` or whitespace)
 *   netns       CNI_NETNS as given ('' when empty); informational
 *   spooledAt   wall clock (ms since the epoch, CLOCK_REALTIME) when the DEL was recorded:
 *               an allocation of the same key made after it is newer than this DEL and
 *               is left alone
 *
 * Applying an entry (spool-applier.ts) = the DEL ipamd would have served: the host side
 * of that IP (host veth by its computed name, the `<ip>/32` host route with it, the pod's
 * ip rules) is removed in the node netns, the allocation is released through the
 * datastore's DEL path (`Datastore.unassign`, so `wasUnassigned` remembers the container
 * even when it held nothing), the checkpoint is written, and only then is the file
 * deleted. An entry for a key ipamd does not hold is a no-op (removed).
 */
import { open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { mkdirParents } from '../../nodefs/dirs.js';
import path from 'node:path';
import { z } from 'zod';
import type { AllocationKey } from '../datastore/types.js';

/** Name of the spool directory beside the exec socket. */
export const SPOOL_DIR_NAME = 'del-spool';
/** Subdirectory where corrupt entries are kept. */
export const CORRUPT_DIR_NAME = 'corrupt';
/** Largest entry read, bytes (a real one is ~200; anything bigger is corrupt). */
export const MAX_ENTRY_BYTES = 64 * 1024;
/** Age (ms) after which a shim's temp file is removed: its DEL was never acknowledged. */
export const STALE_TEMP_MS = 60_000;

/** The spool directory for an exec socket path (its directory + `del-spool`). */
export function spoolDirFor(execSocket: string): string {
  return path.join(path.dirname(execSocket), SPOOL_DIR_NAME);
}

/** One spooled DEL. */
export interface SpoolEntry extends AllocationKey {
  version: 1;
  netns: string;
  /** ms since the epoch. */
  spooledAt: number;
}

const entrySchema = z.object({
  version: z.literal(1),
  networkName: z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/),
  containerID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/),
  ifName: z
    .string()
    .min(1)
    .max(15)
    .regex(/^[^/:\s]+$/),
  netns: z.string(),
  spooledAt: z.number().int().nonnegative(),
});

const pct = (s: string): string =>
  Buffer.from(s, 'utf8').reduce((out, b) => {
    const c = String.fromCharCode(b);
    return out + (/[A-Za-z0-9.-]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`);
  }, '');

/** The file name of a key's entry (see the module docstring). */
export function spoolFileName(key: AllocationKey): string {
  return `del_${pct(key.networkName)}_${pct(key.containerID)}_${pct(key.ifName)}.json`;
}

/**
 * Parses an entry's bytes. @throws Error naming what is wrong (not JSON, a field
 * missing or out of shape, an unknown version).
 */
export function parseSpoolEntry(text: string): SpoolEntry {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`not JSON (${(e as Error).message})`);
  }
  const r = entrySchema.safeParse(v);
  if (!r.success)
    throw new Error(r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '));
  return r.data;
}

/** A spool file read: a valid entry, or a corrupt one with the reason. */
export type SpoolRead = { file: string; entry: SpoolEntry } | { file: string; corrupt: string };

/**
 * Reads every entry of `dir` (a missing dir is empty), oldest name order irrelevant: sorted
 * by `spooledAt`. Removes shim temp files older than {@link STALE_TEMP_MS}.
 * @throws Error only when `dir` exists but cannot be listed.
 */
export async function readSpool(dir: string, now = Date.now()): Promise<SpoolRead[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const out: SpoolRead[] = [];
  for (const name of names.sort()) {
    const file = path.join(dir, name);
    if (name.startsWith('.tmp-')) {
      const st = await stat(file).catch(() => undefined);
      if (st && now - st.mtimeMs > STALE_TEMP_MS) await rm(file, { force: true });
      continue;
    }
    if (!name.startsWith('del_') || !name.endsWith('.json')) continue;
    try {
      const st = await stat(file);
      if (!st.isFile()) throw new Error('not a regular file');
      if (st.size > MAX_ENTRY_BYTES) throw new Error(`${st.size} bytes, more than ${MAX_ENTRY_BYTES}`);
      const entry = parseSpoolEntry(await readFile(file, 'utf8'));
      if (spoolFileName(entry) !== name) throw new Error(`content names ${spoolFileName(entry)}`);
      out.push({ file, entry });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // applied meanwhile
      out.push({ file, corrupt: (e as Error).message });
    }
  }
  return out.sort((a, b) => ('entry' in a ? a.entry.spooledAt : 0) - ('entry' in b ? b.entry.spooledAt : 0));
}

/** Moves a corrupt entry to `<dir>/corrupt/<name>.<ISO time>` (kept). @returns the new path. */
export async function moveAside(file: string, now = new Date()): Promise<string> {
  const dir = path.join(path.dirname(file), CORRUPT_DIR_NAME);
  await mkdirParents(dir, 0o700);
  const to = path.join(dir, `${path.basename(file)}.${now.toISOString().replace(/[:.]/g, '-')}`);
  await rename(file, to);
  return to;
}

/**
 * Writes an entry atomically (temp + fsync + rename + dir fsync), as the shim does. For
 * tests and tools. @returns the file path. @throws Error on I/O failure.
 */
export async function writeSpoolEntry(dir: string, e: Omit<SpoolEntry, 'version'>): Promise<string> {
  await mkdirParents(dir, 0o700);
  const name = spoolFileName(e);
  const file = path.join(dir, name);
  const tmp = path.join(dir, `.tmp-${process.pid}-${name}`);
  const body = `${JSON.stringify({ version: 1, networkName: e.networkName, containerID: e.containerID, ifName: e.ifName, netns: e.netns, spooledAt: e.spooledAt })}\n`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(body);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
  return file;
}
