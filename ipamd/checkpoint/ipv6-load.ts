/**
 * The IPv6 checkpoint read at start-up (docs/design.md#ip-families): content that cannot be
 * trusted is set aside for forensics, never deleted, as the IPv4 checkpoint's is (load.ts),
 * so ipamd rebuilds instead of crash-looping. Rebuilding is safe because the wired /128s
 * and egress addresses are adopted from the kernel before the first IPv6 ADD is answered
 * (service/v6-adopt.ts) and given back to the sandboxes the runtime shows holding them
 * (restore/v6-evidence.ts).
 */
import { rename, stat } from 'node:fs/promises';
import { Ipv6CheckpointCorrupt, ipv6JournalPath, readIpv6Checkpoint, type Ipv6CheckpointData } from './ipv6-file.js';
import { asideName } from './load.js';

/** What {@link loadIpv6Checkpoint} found. `movedTo`: where the snapshot and the journal now are. */
export type Ipv6CheckpointLoad =
  | { kind: 'missing' }
  | { kind: 'ok'; data: Ipv6CheckpointData }
  | { kind: 'corrupt'; reason: string; movedTo: string[] };

/**
 * Reads the IPv6 checkpoint `file` and its journal (ipv6-file.ts). When their content
 * cannot be trusted, each of the two that exists is renamed to `<name>.corrupt-<ISO time>`.
 * @throws Error for I/O failures (a file that exists but cannot be read, a failed rename):
 *   ipamd then refuses to start rather than guess.
 */
export async function loadIpv6Checkpoint(file: string, now = new Date()): Promise<Ipv6CheckpointLoad> {
  try {
    const data = await readIpv6Checkpoint(file);
    return data ? { kind: 'ok', data } : { kind: 'missing' };
  } catch (e) {
    if (!(e instanceof Ipv6CheckpointCorrupt)) throw e;
    const movedTo: string[] = [];
    for (const f of [file, ipv6JournalPath(file)]) {
      const there = await stat(f).then(
        () => true,
        () => false,
      );
      if (!there) continue;
      const to = await asideName(f, now);
      await rename(f, to);
      movedTo.push(to);
    }
    return { kind: 'corrupt', reason: e.message, movedTo };
  }
}
