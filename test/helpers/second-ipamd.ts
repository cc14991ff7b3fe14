/**
 * What the one-ipamd-per-node tests share: a fingerprint of the checkpoint files (to show a
 * second ipamd changed none of them) and a start of a second ipamd that is expected to be
 * refused.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { startIpamd } from '../../kit/ipamd-process.js';

/** Inode, size, mtime and bytes of each checkpoint file that exists (snapshot and both journals). */
export async function checkpointFingerprint(checkpoint: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const f of [checkpoint, `${checkpoint}.journal`, `${checkpoint}.journal.b`]) {
    const st = await stat(f).catch(() => undefined);
    if (!st) continue;
    out[path.basename(f)] =
      `ino ${st.ino} size ${st.size} mtime ${st.mtimeMs} ${(await readFile(f)).toString('base64')}`;
  }
  return out;
}

/**
 * Starts ipamd as {@link startIpamd} does and resolves with the error it exits with before
 * serving; undefined when it served (it is then stopped at once).
 */
export function startSecondIpamd(p: Parameters<typeof startIpamd>[0]): Promise<Error | undefined> {
  return startIpamd(p).then(
    async (d) => {
      await d.stop();
      return undefined;
    },
    (e: Error) => e,
  );
}
