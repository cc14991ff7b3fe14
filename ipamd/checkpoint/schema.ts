/**
 * The checkpoint file format (docs/design.md#checkpoint), version 1, and its zod schema:
 * `{"version":1,"bootId","allocations":[{"networkName","containerID","ifName","ipv4",
 * "eniId","allocatedAt","pod":{"namespace","name","uid"}}],"cooldown":[{"ip","releasedAt"}],
 * "released":[{"containerID","releasedAt"}],"runtime":{"name","version"},"monoAtBoot"}`. Times
 * are ms on the writer's clock (ipamd/clock.ts: the epoch scale); `monoAtBoot` converts them
 * to ms since boot (boot-stamps.ts). No I/O.
 *
 * `released` (docs/design.md#13-evidence-before-trust item 5: the containers ipamd served a DEL for, so a sandbox still
 * stopping is not re-adopted after a restart), `runtime` and `monoAtBoot` were added without a version
 * bump: both are optional, so a checkpoint written before them loads, and an older ipamd
 * reading a newer file drops the unknown fields (zod strips extra keys). `journalSeq`
 * likewise: the snapshot stays a complete version-1 file, and the changes since it sit
 * in the journal beside it (journal.ts).
 */
import ipaddr from 'ipaddr.js';
import { z } from 'zod';

/**
 * One allocation as stored: key `(networkName, containerID, ifName)` (non-empty), its IPv4,
 * its ENI (`''` while the IP is on no known ENI yet), and the pod as reported (fields may be empty).
 */
export interface CheckpointAllocation {
  networkName: string;
  containerID: string;
  ifName: string;
  ipv4: string;
  eniId: string;
  /** ms since epoch. */
  allocatedAt: number;
  pod?: { namespace: string; name: string; uid: string };
}

/** The whole checkpoint file, version 1. `cooldown[].releasedAt` is ms since epoch. */
export interface CheckpointData {
  version: 1;
  bootId: string;
  allocations: CheckpointAllocation[];
  cooldown: Array<{ ip: string; releasedAt: number }>;
  /** Containers ipamd served a DEL (or GC) for and that the runtime may still list; optional (absent in older files). */
  released?: ReadonlyArray<{ containerID: string; releasedAt: number }>;
  /**
   * The CRI runtime (`Version`: runtime_name, runtime_version) an evidence pass of this
   * boot found plausible (restore/plausibility.ts). Optional: checkpoints written before
   * it existed, or before any pass trusted the runtime, have none.
   */
  runtime?: { name: string; version: string };
  /**
   * The last journal record (`<file>.journal`, journal.ts) this snapshot already holds.
   * Optional: a snapshot without it (written by an ipamd before the journal, or by
   * another program) has no journal of its own, and a journal found beside it is stale.
   */
  journalSeq?: number;
  /**
   * The writer's `monoAtBoot` (ipamd/clock.ts, ms): the stamps above minus it are ms since
   * boot, so the next process of the same boot converts them exactly whatever the wall clock
   * did meanwhile (boot-stamps.ts). Optional: a file without it (an older ipamd, aws-node's)
   * is read as before, its stamps clamped to now.
   */
  monoAtBoot?: number;
}

/** The only version this code reads and writes. */
export const CHECKPOINT_VERSION = 1;

const ipv4 = z.string().refine((s) => ipaddr.IPv4.isValidFourPartDecimal(s), { error: 'expected an IPv4 dotted quad' });
const id = z.string().min(1, { error: 'expected a non-empty string' });
const epochMs = z.number().finite().nonnegative();

/** zod schema of one {@link CheckpointAllocation}. */
export const checkpointAllocationSchema = z.object({
  // The allocation key (networkName, containerID, ifName) must be complete.
  networkName: id,
  containerID: id,
  ifName: id,
  ipv4,
  // Empty while the IP is on no known ENI yet (a sandbox adopted from the runtime before
  // IMDS/EC2 list its IP); the datastore fills it in when the IP shows up.
  eniId: z.string(),
  allocatedAt: epochMs,
  // Pod metadata as the runtime reported it: informational, any field may be empty (a
  // runtime may not pass K8S_POD_UID; CRI labels may be missing).
  pod: z.object({ namespace: z.string(), name: z.string(), uid: z.string() }).optional(),
});

/** zod schema of {@link CheckpointData} (unknown extra fields are dropped). */
export const checkpointSchema = z.object({
  version: z.literal(CHECKPOINT_VERSION),
  bootId: id,
  allocations: z.array(checkpointAllocationSchema),
  cooldown: z.array(z.object({ ip: ipv4, releasedAt: epochMs })),
  released: z.array(z.object({ containerID: id, releasedAt: epochMs })).optional(),
  // Informational: a malformed value is dropped (the pass records it again), never a reason to distrust the file.
  runtime: z.object({ name: id, version: z.string() }).optional().catch(undefined),
  journalSeq: z.number().int().nonnegative().optional(),
  // A malformed value is dropped: the stamps are then read as a file without it would be.
  monoAtBoot: z.number().finite().optional().catch(undefined),
});
