/**
 * amazon-vpc-cni-k8s's checkpoint (docs/design.md#13-evidence-before-trust item 6: taking over a node from aws-node),
 * read-only: its format, and its conversion into ours. No I/O here but {@link readAwsNodeCheckpoint}.
 *
 * Format (aws-node `pkg/ipamd/datastore/data_store.go`, `CheckpointData` /
 * `CheckpointEntry`, written by its `JSONFile` checkpointer to
 * `AWS_VPC_K8S_CNI_BACKING_STORE`, default `/var/run/aws-node/ipam.json`):
 * `{"version":"vpc-cni-ipam/1","allocations":[{"networkName","containerID","ifName",
 * "ipv4"?,"ipv6"?,"allocationTimestamp","metadata":{"k8sPodNamespace"?,"k8sPodName"?,
 * "interfacesCount"?}}]}`. `allocationTimestamp` is ns since the epoch (Go
 * `time.UnixNano()`). `vpc-cni-ipam/1` is the only version aws-node has written and the
 * only one it reads (it refuses any other); so do we. The file holds no boot id: whether
 * it is from this boot is told by its mtime against the kernel's boot time (aws-node
 * rewrites it on every change; `/var/run` is a tmpfs on most distributions anyway).
 */
import { readFile, stat } from 'node:fs/promises';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import type { CheckpointAllocation, CheckpointData } from './schema.js';

/** The aws-node checkpoint version this code imports (aws-node's `CheckpointFormatVersion`). */
export const AWS_NODE_CHECKPOINT_VERSION = 'vpc-cni-ipam/1';

/** aws-node's default checkpoint path (its `defaultBackingStorePath`). */
export const AWS_NODE_CHECKPOINT_PATH = '/var/run/aws-node/ipam.json';

/** Largest aws-node checkpoint read, bytes (16 MiB; ~100,000 entries). A larger file is rejected, not read. */
export const AWS_NODE_CHECKPOINT_MAX_BYTES = 16 * 1024 * 1024;

const id = z.string().min(1, { error: 'expected a non-empty string' });
const entrySchema = z.object({
  networkName: id,
  containerID: id,
  ifName: id,
  ipv4: z.string().optional(),
  ipv6: z.string().optional(),
  allocationTimestamp: z.number().finite(),
  metadata: z
    .object({
      k8sPodNamespace: z.string().optional(),
      k8sPodName: z.string().optional(),
      interfacesCount: z.number().optional(),
    })
    .optional(),
});
const fileSchema = z.object({ version: z.string(), allocations: z.array(entrySchema).nullable() });

/** One aws-node entry not imported into the IPv4 checkpoint, and why (an IPv6-only entry goes to {@link AwsNodeIpv6Entry} instead). */
export interface SkippedEntry {
  containerID: string;
  reason: string;
}

/**
 * One IPv6 allocation of an aws-node checkpoint (its IPv6 mode), for an ipamd serving
 * `ipv6`/`dual` to import (lifecycle/parts-ipv6.ts); `allocatedAt` in ms since the epoch.
 * aws-node's IPv4 egress address of the pod lives in the egress plugin's host-local
 * store, not in its checkpoint, so none comes with it.
 */
export interface AwsNodeIpv6Entry {
  networkName: string;
  containerID: string;
  ifName: string;
  ipv6: string;
  allocatedAt: number;
  pod?: { namespace: string; name: string; uid: string };
}

/** Result of {@link convertAwsNodeCheckpoint}. */
export type AwsNodeConversion =
  | { ok: true; data: CheckpointData; skipped: SkippedEntry[]; renamedFrom: string[]; ipv6: AwsNodeIpv6Entry[] }
  | { ok: false; reason: string };

/**
 * Converts the text of an aws-node checkpoint into our {@link CheckpointData} for this
 * boot (`bootId`). Entries keep their `containerID`, `ifName`, IPv4 and pod
 * namespace/name (no uid: aws-node does not record it); `allocatedAt` = the aws-node
 * timestamp in ms; `eniId` '' (the datastore fills it from EC2). The network name becomes
 * `networkName` (ours): after the take-over the runtime's DELs come through our conflist,
 * with its name; the names changed are listed in `renamedFrom`. Pure.
 * @returns `ok: false` with a reason for content that is not JSON, not this schema, of
 *          another version, or with more than `maxEntries` allocations (the node's bound,
 *          checkpointBoundsFor) — the whole file is then left unimported; never throws.
 */
export function convertAwsNodeCheckpoint(
  text: string,
  p: { bootId: string; networkName: string; maxEntries?: number },
): AwsNodeConversion {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: `not valid JSON (${text.length} bytes; truncated?): ${(e as Error).message}` };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return { ok: false, reason: 'not a JSON object' };
  const version = (json as { version?: unknown }).version;
  if (version !== AWS_NODE_CHECKPOINT_VERSION) {
    return {
      ok: false,
      reason: `unknown version ${String(JSON.stringify(version)).slice(0, 80)} (this ipamd imports "${AWS_NODE_CHECKPOINT_VERSION}")`,
    };
  }
  const r = fileSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0]!;
    return { ok: false, reason: `schema invalid at ${i.path.map(String).join('.') || '(root)'}: ${i.message}` };
  }
  const n = r.data.allocations?.length ?? 0;
  if (p.maxEntries !== undefined && n > p.maxEntries)
    return {
      ok: false,
      reason: `implausible: ${n} allocations, more than this node's ENIs can hold (${p.maxEntries})`,
    };
  const allocations: CheckpointAllocation[] = [];
  const skipped: SkippedEntry[] = [];
  const renamed = new Set<string>();
  const ipv6: AwsNodeIpv6Entry[] = [];
  for (const [n, e] of (r.data.allocations ?? []).entries()) {
    const ns = e.metadata?.k8sPodNamespace ?? '';
    const name = e.metadata?.k8sPodName ?? '';
    const pod = ns || name ? { pod: { namespace: ns, name, uid: '' } } : {};
    const allocatedAt = Math.max(0, Math.floor(e.allocationTimestamp / 1e6));
    if (e.ipv6) {
      if (e.networkName !== p.networkName) renamed.add(e.networkName);
      const key = { networkName: p.networkName, containerID: e.containerID, ifName: e.ifName };
      ipv6.push({ ...key, ipv6: e.ipv6, allocatedAt, ...pod });
    }
    if (!e.ipv4) {
      skipped.push({
        containerID: e.containerID,
        reason: e.ipv6
          ? `IPv6-only allocation ${e.ipv6} (imported only by an ipamd in ipv6 or dual mode)`
          : 'no address',
      });
      continue;
    }
    if (!ipaddr.IPv4.isValidFourPartDecimal(e.ipv4))
      return { ok: false, reason: `schema invalid at allocations.${n}.ipv4: expected an IPv4 dotted quad` };
    if (e.networkName !== p.networkName) renamed.add(e.networkName);
    allocations.push({
      networkName: p.networkName,
      containerID: e.containerID,
      ifName: e.ifName,
      ipv4: e.ipv4,
      eniId: '',
      allocatedAt,
      ...pod,
    });
  }
  return {
    ok: true,
    data: { version: 1, bootId: p.bootId, allocations, cooldown: [] },
    skipped,
    renamedFrom: [...renamed],
    ipv6,
  };
}

/** Result of {@link readAwsNodeCheckpoint}. */
export type AwsNodeRead =
  | { kind: 'missing' }
  | { kind: 'ok'; text: string; mtimeMs: number }
  | { kind: 'bad'; reason: string; mtimeMs?: number };

/**
 * Reads the aws-node checkpoint at `path` and tells whether it is from this boot
 * (`mtime >= bootTimeMs`, ms since epoch). No file → `missing`; a file from an earlier
 * boot, larger than {@link AWS_NODE_CHECKPOINT_MAX_BYTES} or not a regular file → `bad`
 * with the reason. Never throws for content.
 * @throws the fs error for I/O failures other than ENOENT (EACCES, EIO…).
 */
export async function readAwsNodeCheckpoint(path: string, bootTimeMs: number): Promise<AwsNodeRead> {
  let st;
  try {
    st = await stat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw e;
  }
  if (!st.isFile()) return { kind: 'bad', reason: 'not a regular file' };
  if (st.size > AWS_NODE_CHECKPOINT_MAX_BYTES)
    return {
      kind: 'bad',
      reason: `${st.size} bytes, more than the ${AWS_NODE_CHECKPOINT_MAX_BYTES} a checkpoint may hold`,
      mtimeMs: st.mtimeMs,
    };
  if (st.mtimeMs < bootTimeMs) {
    return {
      kind: 'bad',
      reason: `from another boot (last written ${new Date(st.mtimeMs).toISOString()}, the kernel booted ${new Date(bootTimeMs).toISOString()}): no sandbox survives a reboot`,
      mtimeMs: st.mtimeMs,
    };
  }
  return { kind: 'ok', text: await readFile(path, 'utf8'), mtimeMs: st.mtimeMs };
}
