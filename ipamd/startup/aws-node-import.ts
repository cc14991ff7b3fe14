/**
 * Taking over a node from aws-node (docs/design.md#13-evidence-before-trust item 6): when ipamd finds no checkpoint of
 * its own, amazon-vpc-cni-k8s's checkpoint (ENI_IPAM_AWS_NODE_CHECKPOINT_PATH, default
 * `/var/run/aws-node/ipam.json`) written during this boot is imported as if it were
 * ours: its allocations then go through {@link restoreFromCheckpoint} and every evidence
 * pass like any checkpoint's (the runtime, Kubernetes and the kernel vouch for them or
 * the GC releases them after the grace, under the same brakes), and the IPs it does not
 * name stay unverified until a clean evidence pass. The ENIs aws-node created carry the
 * tags ours do (`node.k8s.amazonaws.com/instance_id`, eni-ownership.ts), so discovery
 * already adopts them.
 *
 * A file that is corrupt, from another boot, of an unknown version or too large is not
 * imported: a copy is kept beside our checkpoint (`aws-node-ipam.json.rejected-<ISO
 * time>`), the original is left as it is, and the reason is logged; ipamd then starts as
 * with no checkpoint at all (every IP found on the ENIs unverified, releases frozen until
 * a clean evidence pass), so nothing is released because of the file.
 *
 * Once our own checkpoint holds the import, the aws-node file is renamed
 * `<path>.imported-by-eni-ipam-<ISO time>`, so it is never imported a second time (e.g.
 * after our checkpoint were lost later, when it would be stale).
 */
import { copyFile, readFile, rename } from 'node:fs/promises';
import { mkdirParents } from '../../nodefs/dirs.js';
import path from 'node:path';
import {
  convertAwsNodeCheckpoint,
  readAwsNodeCheckpoint,
  type AwsNodeIpv6Entry,
  type SkippedEntry,
} from '../checkpoint/aws-node.js';
import type { CheckpointLoad } from '../checkpoint/index.js';
import type { Logger } from '../log.js';

/** What the import found. */
export type AwsNodeImport =
  | { kind: 'missing' }
  | {
      kind: 'imported';
      load: Extract<CheckpointLoad, { kind: 'ok' }>;
      skipped: SkippedEntry[];
      /** Its IPv6 allocations (for an ipamd serving IPv6 to import; lifecycle/parts-ipv6.ts). */
      ipv6: AwsNodeIpv6Entry[];
    }
  | { kind: 'rejected'; reason: string; keptAt?: string };

/**
 * The kernel's boot time in ms since the epoch (`btime` of /proc/stat, in whole seconds,
 * proc(5)). @throws Error when /proc/stat has no btime line; the fs error if unreadable.
 */
export async function kernelBootTimeMs(statPath = '/proc/stat'): Promise<number> {
  const m = /^btime\s+(\d+)$/m.exec(await readFile(statPath, 'utf8'));
  if (!m) throw new Error(`${statPath} has no btime line`);
  return Number(m[1]) * 1000;
}

/**
 * Reads and converts the aws-node checkpoint at `p.path`; see the module docstring.
 * `asideDir` is where a rejected file's copy goes (our checkpoint's directory).
 * Logs what it did. Never throws: an I/O error reading the file is a rejection too.
 */
export async function importAwsNodeCheckpoint(p: {
  path: string;
  asideDir: string;
  bootId: string;
  networkName: string;
  log: Logger;
  now?: Date;
  bootTimeMs?: number;
  /** Most allocations this node can hold (checkpointBoundsFor); more makes the file implausible. */
  maxEntries?: number;
}): Promise<AwsNodeImport> {
  const { log } = p;
  const reject = async (reason: string): Promise<AwsNodeImport> => {
    const keptAt = path.join(p.asideDir, `aws-node-ipam.json.rejected-${(p.now ?? new Date()).toISOString()}`);
    try {
      await mkdirParents(p.asideDir, 0o700);
      await copyFile(p.path, keptAt);
    } catch (e) {
      log.error(
        { path: p.path, reason, err: (e as Error).message },
        'aws-node checkpoint not imported; could not keep a copy of it (the original is left in place)',
      );
      return { kind: 'rejected', reason };
    }
    log.error(
      { path: p.path, reason, keptAt },
      'aws-node checkpoint not imported (a copy is kept; the original is left in place): starting as with no checkpoint, nothing is released because of it',
    );
    return { kind: 'rejected', reason, keptAt };
  };
  let read;
  try {
    read = await readAwsNodeCheckpoint(p.path, p.bootTimeMs ?? (await kernelBootTimeMs()));
  } catch (e) {
    return reject(`unreadable: ${(e as Error).message}`);
  }
  if (read.kind === 'missing') return { kind: 'missing' };
  if (read.kind === 'bad') return reject(read.reason);
  const conv = convertAwsNodeCheckpoint(read.text, {
    bootId: p.bootId,
    networkName: p.networkName,
    ...(p.maxEntries !== undefined ? { maxEntries: p.maxEntries } : {}),
  });
  if (!conv.ok) return reject(conv.reason);
  if (conv.skipped.length > 0) log.warn({ skipped: conv.skipped }, 'aws-node checkpoint entries not imported');
  if (conv.renamedFrom.length > 0)
    log.warn(
      { from: conv.renamedFrom, to: p.networkName },
      "aws-node allocations imported under this ipamd's network name (the runtime's DELs now come through its conflist)",
    );
  log.info(
    { path: p.path, allocations: conv.data.allocations.length, writtenAt: new Date(read.mtimeMs).toISOString() },
    'importing the aws-node checkpoint (no checkpoint of our own): its allocations are restored and checked like ours',
  );
  return { kind: 'imported', load: { kind: 'ok', data: conv.data }, skipped: conv.skipped, ipv6: conv.ipv6 };
}

/**
 * Renames the imported aws-node file to `<path>.imported-by-eni-ipam-<ISO time>` (call
 * once our checkpoint holds the import). @returns the new name. @throws the fs error.
 */
export async function markAwsNodeCheckpointImported(file: string, now = new Date()): Promise<string> {
  const to = `${file}.imported-by-eni-ipam-${now.toISOString()}`;
  await rename(file, to);
  return to;
}
