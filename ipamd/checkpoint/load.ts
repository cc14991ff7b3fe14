/**
 * Reading the checkpoint at start-up (DESIGN §3 "Checkpoint", §4 step 1). A file that
 * cannot be trusted is moved aside for forensics (never deleted) and reported, so the
 * daemon rebuilds its state instead of crash-looping.
 */
import { readFileSync } from 'node:fs';
import { readFile, rename, stat } from 'node:fs/promises';
import { checkpointSchema, CHECKPOINT_VERSION, type CheckpointData } from './schema.js';

/** Result of {@link loadCheckpoint}. `movedTo` is where a corrupt file was kept. */
export type CheckpointLoad =
  | { kind: 'ok'; data: CheckpointData }
  | { kind: 'missing' }
  | { kind: 'corrupt'; reason: string; movedTo: string };

/**
 * The kernel's boot id (`/proc/sys/kernel/random/boot_id`, trimmed): a checkpoint from
 * another boot means no sandbox is alive any more.
 * @throws the fs error if the file cannot be read.
 */
export function readBootId(): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
}

/** Why `text` is not a valid version-1 checkpoint, or the data. */
function parse(buf: Buffer): { data: CheckpointData } | { reason: string } {
  if (buf.length === 0) return { reason: 'file is empty (0 bytes)' };
  if (buf.every((b) => b === 0)) return { reason: `file is all zero bytes (${buf.length} bytes)` };
  let json: unknown;
  try {
    json = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    return { reason: `not valid JSON (${buf.length} bytes; truncated?): ${(e as Error).message}` };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { reason: 'not a JSON object' };
  const version = (json as { version?: unknown }).version;
  if (version !== CHECKPOINT_VERSION) return { reason: `unknown version ${JSON.stringify(version) ?? 'undefined'} (this ipamd reads version ${CHECKPOINT_VERSION})` };
  const r = checkpointSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0]!;
    const where = i.path.length ? i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '') : '(root)';
    return { reason: `schema invalid at ${where}: ${i.message}${r.error.issues.length > 1 ? ` (and ${r.error.issues.length - 1} more)` : ''}` };
  }
  return { data: r.data as CheckpointData };
}

/** A free name `<path>.corrupt-<ISO time>[-n]` next to the file. */
async function asideName(path: string, now: Date): Promise<string> {
  const base = `${path}.corrupt-${now.toISOString()}`;
  for (let n = 0; ; n++) {
    const name = n === 0 ? base : `${base}-${n}`;
    try {
      await stat(name);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return name;
      throw e;
    }
  }
}

/**
 * Loads the checkpoint at `path`.
 * - no file → `{kind:'missing'}`;
 * - valid version-1 content → `{kind:'ok', data}`;
 * - empty, truncated, zero-filled, non-JSON, schema-invalid or unknown-version content →
 *   the file is renamed to `<path>.corrupt-<ISO time>` and `{kind:'corrupt', reason, movedTo}`.
 * Never throws for bad content.
 * @throws the fs error for I/O failures other than ENOENT (e.g. EACCES, EISDIR, a failed rename).
 */
export async function loadCheckpoint(path: string): Promise<CheckpointLoad> {
  let buf: Buffer;
  try {
    buf = await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw e;
  }
  const r = parse(buf);
  if ('data' in r) return { kind: 'ok', data: r.data };
  const movedTo = await asideName(path, new Date());
  await rename(path, movedTo);
  return { kind: 'corrupt', reason: r.reason, movedTo };
}
