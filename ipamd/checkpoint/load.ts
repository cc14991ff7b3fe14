/**
 * Reading the checkpoint at start-up (docs/design.md#checkpoint, docs/design.md#4-restore-after-restart step 1). A file that
 * cannot be trusted is moved aside for forensics (never deleted) and reported, so the
 * daemon rebuilds its state instead of crash-looping.
 */
import { readFileSync } from 'node:fs';
import { readFile, rename, stat } from 'node:fs/promises';
import { checkpointSchema, CHECKPOINT_VERSION, type CheckpointData } from './schema.js';

/**
 * What a checkpoint of this node can plausibly hold (docs/design.md#13-evidence-before-trust: a valid 55 MB checkpoint
 * with 200,000 allocations was accepted and every ADD then rewrote it, 7 → 446 ms).
 * Beyond either bound the file is treated as corrupt (moved aside, state rebuilt).
 */
export interface CheckpointBounds {
  /** Most allocations (and, separately, cooldown entries) a checkpoint may list. */
  maxEntries: number;
  /** Largest file in bytes (checked before the file is read). */
  maxBytes: number;
}

/** Bytes one allocation may take in the file, generously (key ≤ ~400, pod ≤ ~360, the rest ~150). */
const BYTES_PER_ENTRY = 1024;

/**
 * The bounds of a node with `maxEnis` ENIs of `ipv4PerEni` addresses each (the instance
 * type's limits, IMDS/EC2): at most every address of every ENI as /28 prefixes
 * (`maxEnis × ipv4PerEni × 16`, prefix delegation's capacity, whatever the current mode,
 * so switching modes never makes a checkpoint "corrupt"), and 1 KiB per entry for the
 * allocations and the cooldown list, plus 64 KiB.
 */
export function checkpointBoundsFor(maxEnis: number, ipv4PerEni: number): CheckpointBounds {
  const maxEntries = Math.max(1, maxEnis * ipv4PerEni * 16);
  return { maxEntries, maxBytes: 2 * maxEntries * BYTES_PER_ENTRY + 64 * 1024 };
}

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

/** Why `text` is not a valid version-1 checkpoint within `bounds`, or the data. */
function parse(buf: Buffer, bounds?: CheckpointBounds): { data: CheckpointData } | { reason: string } {
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
  const data = r.data as CheckpointData;
  if (bounds) {
    for (const [field, n] of [['allocations', data.allocations.length], ['cooldown', data.cooldown.length]] as const) {
      if (n > bounds.maxEntries) return { reason: `implausible: ${n} ${field} entries, more than this node's ENIs can hold (${bounds.maxEntries})` };
    }
  }
  return { data };
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
 * - empty, truncated, zero-filled, non-JSON, schema-invalid or unknown-version content, or
 *   (with `bounds`) a file larger than `bounds.maxBytes` (not read) or listing more than
 *   `bounds.maxEntries` allocations or cooldown entries →
 *   the file is renamed to `<path>.corrupt-<ISO time>` and `{kind:'corrupt', reason, movedTo}`.
 * Never throws for bad content.
 * @throws the fs error for I/O failures other than ENOENT (e.g. EACCES, EISDIR, a failed rename).
 */
export async function loadCheckpoint(path: string, bounds?: CheckpointBounds): Promise<CheckpointLoad> {
  let r: { data: CheckpointData } | { reason: string };
  try {
    const size = bounds ? (await stat(path)).size : 0;
    r = bounds && size > bounds.maxBytes
      ? { reason: `implausible: ${size} bytes, more than a checkpoint of this node can take (${bounds.maxBytes})` }
      : parse(await readFile(path), bounds);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw e;
  }
  if ('data' in r) return { kind: 'ok', data: r.data };
  const movedTo = await asideName(path, new Date());
  await rename(path, movedTo);
  return { kind: 'corrupt', reason: r.reason, movedTo };
}
