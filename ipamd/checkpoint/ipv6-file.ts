/**
 * The IPv6 allocations' checkpoint (`<checkpoint>.ipv6`, beside the IPv4 checkpoint; issue
 * #31): `{"version":1,"bootId","prefix","allocations":[{"networkName","containerID",
 * "ifName","ipv6","egressV4","allocatedAt","pod"}],"cooling":[{"address","releasedAt"}],
 * "quarantined":[{"address","reason"}],"nextHost","nextEgress","monoAtBoot"}` (stamps on the
 * writer's clock, `monoAtBoot` converting them: checkpoint/boot-stamps.ts). A file of its own keeps
 * the IPv4 format untouched (an IPv4 node never writes one; an older ipamd ignores it).
 *
 * Writes, one at a time (a commit made while a write runs waits for the next write, which
 * holds its change: group commit), append the whole state with a record number `seq` as
 * one line to the journal `<checkpoint>.ipv6.journal`, opened O_DSYNC: one write that
 * returns once durable, instead of the snapshot's temp file, two fsyncs and a rename
 * (an IPv6 ADD waited 6-9 ms for that against 1-2 ms for the IPv4 journal; the state is a
 * few KiB). The first write, a write after a failed one, and a write that finds the
 * journal past {@link IPV6_JOURNAL_COMPACT_BYTES} instead write the snapshot `<checkpoint>.ipv6`
 * atomically and durably (snapshot-file.ts) and then empty the journal. Reading takes
 * the record with the highest `seq` of the snapshot and the journal; only the journal's
 * last line may be torn (a crash mid-append: that write was never acknowledged).
 */
import { constants } from 'node:fs';
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { monoAtBoot } from '../clock.js';
import type { V6State } from '../datastore/ipv6-allocations.js';
import { writeSnapshotFile } from './snapshot-file.js';

/** The file path of the IPv6 checkpoint beside the IPv4 one. */
export const ipv6CheckpointPath = (checkpointPath: string): string => `${checkpointPath}.ipv6`;

/** The journal beside the IPv6 checkpoint `file`. */
export const ipv6JournalPath = (file: string): string => `${file}.journal`;

/** Journal size (bytes) past which the next write compacts into the snapshot. */
export const IPV6_JOURNAL_COMPACT_BYTES = 1 << 20;

const pod = z.object({ namespace: z.string(), name: z.string(), uid: z.string() });
const fileSchema = z.object({
  version: z.literal(1),
  /** Record number (absent: 0, a file of an ipamd before the journal). */
  seq: z.number().int().nonnegative().optional(),
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
  /** The writer's `monoAtBoot` (ipamd/clock.ts, ms): converts the stamps on restore (boot-stamps.ts); absent in older files. */
  monoAtBoot: z.number().finite().optional().catch(undefined),
});

/** A loaded IPv6 checkpoint. */
export type Ipv6CheckpointData = z.infer<typeof fileSchema>;

/** The IPv6 checkpoint's content cannot be trusted (not JSON, a bad shape, a bad journal line); I/O errors are plain Errors. */
export class Ipv6CheckpointCorrupt extends Error {}

/** One record (the snapshot, a journal line) parsed; `what` names it in the errors. @throws Ipv6CheckpointCorrupt */
function parseRecord(text: string, what: string): Ipv6CheckpointData {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Ipv6CheckpointCorrupt(`IPv6 checkpoint ${what} is not JSON: ${(e as Error).message}`);
  }
  const r = fileSchema.safeParse(json);
  if (!r.success)
    throw new Ipv6CheckpointCorrupt(`IPv6 checkpoint ${what} is invalid: ${r.error.issues[0]?.message ?? 'bad shape'}`);
  return r.data;
}

/** The file's text, or undefined when it does not exist. @throws Error naming it otherwise. */
async function readIfThere(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`IPv6 checkpoint ${file} cannot be read: ${(e as Error).message}`);
  }
}

/**
 * Reads the IPv6 checkpoint: the record with the highest `seq` of the snapshot `file` and
 * its journal; undefined when there is neither (first start, or an IPv4 node before).
 * @throws Ipv6CheckpointCorrupt naming the file when one cannot be parsed, or a journal
 *   line other than the last (ipv6-load.ts sets them aside); Error when one exists but
 *   cannot be read.
 */
export async function readIpv6Checkpoint(file: string): Promise<Ipv6CheckpointData | undefined> {
  const text = await readIfThere(file);
  let best = text === undefined ? undefined : parseRecord(text, file);
  const journal = ipv6JournalPath(file);
  const lines = ((await readIfThere(journal)) ?? '').split('\n');
  lines.forEach((line, i) => {
    if (line === '') return;
    let r: Ipv6CheckpointData;
    try {
      r = parseRecord(line, `${journal} line ${i + 1}`);
    } catch (e) {
      if (i === lines.length - 1) return; // the last line, torn by a crash mid-append: never acknowledged
      throw e;
    }
    if (!best || (r.seq ?? 0) > (best.seq ?? 0)) best = r;
  });
  return best;
}

/** Group-committed writer of the IPv6 checkpoint (journal appends, compactions; module docstring). */
export class Ipv6CheckpointWriter {
  private running: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private journal: FileHandle | undefined;
  private journalBytes = 0;
  private seq = 0;

  /**
   * `state()` is read at the start of each write (the current allocations); `startSeq`: the
   * loaded checkpoint's `seq`, so numbering goes on; `onStage` gets each write's stage
   * durations in ms (`serialize`, then `append` or snapshot-file.ts's `write`, `fsync`,
   * `rename`, and `truncate`).
   */
  constructor(
    private readonly file: string,
    private readonly bootId: string,
    private readonly state: () => V6State,
    private readonly fsync = true,
    private readonly onStage?: (stage: string, ms: number) => void,
    startSeq = 0,
    /** This process's `monoAtBoot` (ms), in every record: the stamps' scale. */
    private readonly atBoot = monoAtBoot(),
  ) {
    this.seq = startSeq;
  }

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
    const p = this.write();
    this.running = p;
    const clear = () => {
      if (this.running === p) this.running = undefined;
    };
    p.then(clear, clear);
    return p;
  }

  private async write(): Promise<void> {
    let t = performance.now();
    const stage = (name: string) => {
      const now = performance.now();
      this.onStage?.(name, now - t);
      t = now;
    };
    const body = Buffer.from(
      JSON.stringify({ version: 1, seq: ++this.seq, bootId: this.bootId, monoAtBoot: this.atBoot, ...this.state() }),
    );
    stage('serialize');
    const j = this.journal;
    if (j && this.journalBytes + body.length < IPV6_JOURNAL_COMPACT_BYTES) {
      this.journal = undefined; // a failed append leaves a partial line: the next write compacts
      const line = Buffer.concat([body, Buffer.from('\n')]);
      try {
        const { bytesWritten } = await j.write(line, 0, line.length);
        if (bytesWritten !== line.length) throw new Error(`short write to ${ipv6JournalPath(this.file)}`);
      } catch (e) {
        await j.close().catch(() => undefined);
        throw e;
      }
      this.journalBytes += line.length;
      this.journal = j;
      stage('append');
      return;
    }
    this.journal = undefined;
    await j?.close().catch(() => undefined);
    await writeSnapshotFile(this.file, body, { fsync: this.fsync, ...(this.onStage ? { onStage: this.onStage } : {}) });
    t = performance.now();
    // Emptied only once the snapshot is durable; its records are older than the snapshot's seq anyway.
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_APPEND;
    this.journal = await open(ipv6JournalPath(this.file), flags | (this.fsync ? constants.O_DSYNC : 0), 0o600);
    this.journalBytes = 0;
    stage('truncate');
  }
}
