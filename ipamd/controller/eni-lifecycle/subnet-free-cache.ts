/**
 * The last free-address reading of each subnet of the node's ENIs (one DescribeSubnets
 * each, the `eni_ipam_subnet_free_addresses` gauge; see eni-lifecycle.ts), kept in a
 * small file beside the checkpoint (`subnet-free.json`) so that a restart does not
 * describe again what the process before it read a moment ago: the gauge is re-read
 * only when the node changed what it holds in the subnet or the reading is older than
 * the refresh period, across restarts as within one process. A fleet restarting
 * together then spends no DescribeSubnets on a gauge.
 *
 * A gauge hint, not state: nothing is decided from it, so a missing, unreadable or
 * malformed file (or entry) is ignored (the subnet is described, as before) and a write
 * that fails is only logged at debug. Written atomically (rename), without fsync.
 *
 * In memory a reading's `at` is a monotonic stamp (ipamd/clock.ts monoNow, fractional ms);
 * in the file it is wall-clock epoch ms (whole), the only clock two processes share: the
 * writer converts with wallOf, the reader back to its own monotonic clock.
 */
import { monoNow, wallOf } from '../../clock.js';
import { readFile } from 'node:fs/promises';
import writeFileAtomic from 'write-file-atomic';
import { z } from 'zod';

/** One subnet's reading: when (monotonic ms), the addresses this node held in it then, the free count EC2 gave. */
export interface SubnetReading {
  at: number;
  held: number;
  free: number;
}

const ReadingSchema = z.object({
  at: z.number().int().nonnegative(),
  held: z.number().int().nonnegative(),
  free: z.number().int().nonnegative(),
});
const FileSchema = z.object({ version: z.literal(1), subnets: z.record(z.string().min(1), z.unknown()) });

/**
 * The readings in `file` taken within `maxAgeMs` before `now` (wall-clock epoch ms; none
 * from the future), by subnet id, their `at` turned into this process's monotonic ms.
 * Malformed entries are left out; a missing, unreadable or malformed file gives an empty
 * map. Never throws.
 */
export async function readSubnetReadings(
  file: string,
  now: number,
  maxAgeMs: number,
): Promise<Map<string, SubnetReading>> {
  const out = new Map<string, SubnetReading>();
  try {
    const f = FileSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
    if (!f.success) return out;
    for (const [id, v] of Object.entries(f.data.subnets)) {
      const r = ReadingSchema.safeParse(v);
      if (r.success && r.data.at <= now && now - r.data.at < maxAgeMs)
        out.set(id, { ...r.data, at: monoNow() - (now - r.data.at) });
    }
  } catch {
    /* missing or unreadable: no readings */
  }
  return out;
}

/** Writes `readings` to `file` (atomic rename, no fsync). @returns the error message, or undefined. Never throws. */
export async function writeSubnetReadings(
  file: string,
  readings: ReadonlyMap<string, SubnetReading>,
): Promise<string | undefined> {
  try {
    const wall = Object.fromEntries([...readings].map(([id, r]) => [id, { ...r, at: Math.round(wallOf(r.at)) }]));
    await writeFileAtomic(file, JSON.stringify({ version: 1, subnets: wall }), {
      fsync: false,
      mode: 0o600,
    });
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}
