/**
 * The IPv6 allocations' checkpoint (`<checkpoint>.ipv6`, beside the IPv4 checkpoint; issue
 * #31): `{"version":1,"bootId","prefix","allocations":[{"networkName","containerID",
 * "ifName","ipv6","egressV4","allocatedAt","pod"}],"cooling":[{"address","releasedAt"}],
 * "quarantined":[{"address","reason"}],"nextHost","nextEgress"}`. A file of its own keeps
 * the IPv4 format untouched (an IPv4 node never writes one; an older ipamd ignores it).
 * Written atomically and durably (snapshot-file.ts), one write at a time: a commit made
 * while a write runs waits for the next write, which holds its change (group commit).
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { V6State } from '../datastore/ipv6-allocations.js';
import { writeSnapshotFile } from './snapshot-file.js';

/** The file path of the IPv6 checkpoint beside the IPv4 one. */
export const ipv6CheckpointPath = (checkpointPath: string): string => `${checkpointPath}.ipv6`;

const pod = z.object({ namespace: z.string(), name: z.string(), uid: z.string() });
const fileSchema = z.object({
  version: z.literal(1),
  bootId: z.string(),
  prefix: z.string(),
  allocations: z.array(
    z.object({
      networkName: z.string().min(1),
      containerID: z.string().min(1),
      ifName: z.string().min(1),
      ipv6: z.string(),
      egressV4: z.string(),
      allocatedAt: z.number().finite().nonnegative(),
      pod: pod.optional(),
    }),
  ),
  cooling: z.array(z.object({ address: z.string(), releasedAt: z.number().finite() })),
  quarantined: z.array(z.object({ address: z.string(), reason: z.string() })),
  nextHost: z.string(),
  nextEgress: z.number(),
});

/** A loaded IPv6 checkpoint. */
export type Ipv6CheckpointData = z.infer<typeof fileSchema>;

/**
 * Reads the IPv6 checkpoint; undefined when there is none (first start, or an IPv4 node before).
 * @throws Error naming the file when it exists but cannot be read or parsed (ipamd then
 *   refuses to start rather than hand out addresses pods may hold).
 */
export async function readIpv6Checkpoint(file: string): Promise<Ipv6CheckpointData | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`IPv6 checkpoint ${file} cannot be read: ${(e as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Error(`IPv6 checkpoint ${file} is not JSON: ${(e as Error).message}`);
  }
  const r = fileSchema.safeParse(json);
  if (!r.success) throw new Error(`IPv6 checkpoint ${file} is invalid: ${r.error.issues[0]?.message ?? 'bad shape'}`);
  return r.data;
}

/** Group-committed writer of the IPv6 checkpoint. */
export class Ipv6CheckpointWriter {
  private running: Promise<void> | undefined;
  private next: Promise<void> | undefined;

  /** `state()` is read at the start of each write (the current allocations). */
  constructor(
    private readonly file: string,
    private readonly bootId: string,
    private readonly state: () => V6State,
    private readonly fsync = true,
  ) {}

  /**
   * Resolves once a write that began after this call is durable.
   * @throws the fs error of that write.
   */
  commit(): Promise<void> {
    if (!this.running) return this.start();
    this.next ??= this.running.then(
      () => this.start(),
      () => this.start(),
    );
    return this.next;
  }

  private start(): Promise<void> {
    this.next = undefined;
    const body = Buffer.from(JSON.stringify({ version: 1, bootId: this.bootId, ...this.state() }));
    const p = writeSnapshotFile(this.file, body, { fsync: this.fsync });
    this.running = p;
    const clear = () => {
      if (this.running === p) this.running = undefined;
    };
    p.then(clear, clear);
    return p;
  }
}
