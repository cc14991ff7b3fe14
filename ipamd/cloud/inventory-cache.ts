/**
 * The node's ENI inventory as EC2 last confirmed it, kept in a small file next to the
 * checkpoint so that a restart within the same boot can serve at once from it and IMDS,
 * without waiting for a DescribeNetworkInterfaces (a crash loop, a daemonset roll-out,
 * a fleet restarting together under EC2 throttling). EC2 is still the truth: the start
 * that used the file freezes releases until a background describe has confirmed it
 * (see `fast-start.ts`).
 *
 * What the file may list (the safety rule: no IP is handed out that EC2 has not
 * confirmed): only addresses the datastore holds, and the datastore only holds what an
 * EC2 describe or an EC2 assign answer showed. Addresses in `releasing` state (an
 * unassign reserved, sent, or of unknown outcome) are left out, and the EC2 port the
 * controller is given (`CacheGuardedEc2`, cache-guarded-ec2.ts) rewrites the file without
 * the addresses and ENIs an unassign or detach is about to give back **before** that call
 * leaves, so no restart can serve an address this ipamd
 * gave back. An assign's answer is written to the file (fsync) before the caller gets the
 * addresses, so before any of them can be handed out: every address a checkpoint of this
 * boot holds is in the file (other additions, e.g. describes, reach it on the next periodic
 * write; the confirm adds what a lagging file lacks).
 *
 * The file is ignored (slow start: the describe is awaited, as on a first boot) when it
 * is missing, unreadable or malformed, from another boot (`/proc/sys/kernel/random/boot_id`)
 * or instance, when IMDS lists a different set of ENIs than it does, or addresses on a
 * managed ENI that it does not (see {@link readInventoryCache}); the caller also refuses it
 * when the checkpoint holds an allocation whose address it does not list
 * ({@link uncoveredAllocation}).
 */
import { readFile, rm } from 'node:fs/promises';
import writeFileAtomic from 'write-file-atomic';
import { z } from 'zod';
import type { Ec2Eni } from './ec2.js';
import type { ImdsEni } from './imds.js';
import type { DatastoreViews } from '../datastore/roles.js';
import { expandPrefix } from '../datastore/prefixes.js';
import type { Logger } from '../log.js';

const EniSchema = z.object({
  eniId: z.string().min(1),
  mac: z.string().min(1),
  status: z.string(),
  subnetId: z.string(),
  vpcId: z.string(),
  description: z.string(),
  primaryIp: z.string().min(1),
  secondaryIps: z.array(z.string()),
  ipv4Prefixes: z.array(z.string()),
  attachment: z
    .object({
      attachmentId: z.string(),
      instanceId: z.string(),
      deviceIndex: z.number().int().min(0),
      status: z.string(),
      deleteOnTermination: z.boolean(),
    })
    .optional(),
  tags: z.record(z.string(), z.string()),
  securityGroupIds: z.array(z.string()),
});

const FileSchema = z.object({
  version: z.literal(1),
  bootId: z.string().min(1),
  instanceId: z.string().min(1),
  savedAt: z.string(),
  managed: z.array(EniSchema),
  unmanaged: z.array(EniSchema),
});

/** The file's content: ENIs as {@link Ec2Eni} (what discovery returns), with this boot and instance. */
export type InventoryFile = z.infer<typeof FileSchema>;

/** A usable cache, or why it was not used (for the log). */
export type InventoryCacheRead =
  { ok: true; managed: Ec2Eni[]; unmanaged: Ec2Eni[]; savedAt: string } | { ok: false; reason: string };

/**
 * Reads and checks the cache for this boot and instance against IMDS's ENI list: every
 * ENI IMDS lists must be in the file (managed or not) with the same MAC, every ENI of the
 * file must be listed by IMDS, and every secondary IP and /28 prefix IMDS lists on a
 * managed ENI must be in the file (IMDS lags EC2, so it may list fewer, never rightly
 * more: more means the file missed an assign, e.g. one whose answer a crash cut off, or
 * an unassign IMDS has not caught up with; either way EC2 is asked). Never throws.
 */
export async function readInventoryCache(
  file: string,
  want: { bootId: string; instanceId: string; imdsEnis: readonly ImdsEni[] },
): Promise<InventoryCacheRead> {
  let data: InventoryFile;
  try {
    const parsed = FileSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
    if (!parsed.success) return { ok: false, reason: `malformed (${parsed.error.issues[0]?.message ?? 'schema'})` };
    data = parsed.data;
  } catch (e) {
    return {
      ok: false,
      reason: (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : `unreadable (${(e as Error).message})`,
    };
  }
  if (data.bootId !== want.bootId) return { ok: false, reason: 'from another boot' };
  if (data.instanceId !== want.instanceId) return { ok: false, reason: `for another instance (${data.instanceId})` };
  const cached = new Map([...data.managed, ...data.unmanaged].map((e) => [e.eniId, e]));
  for (const i of want.imdsEnis) {
    const c = cached.get(i.eniId);
    if (!c) return { ok: false, reason: `IMDS lists ENI ${i.eniId} the file does not` };
    if (c.mac.toLowerCase() !== i.mac.toLowerCase())
      return { ok: false, reason: `ENI ${i.eniId} has MAC ${i.mac} in IMDS, ${c.mac} in the file` };
  }
  const listed = new Set(want.imdsEnis.map((i) => i.eniId));
  for (const id of cached.keys())
    if (!listed.has(id)) return { ok: false, reason: `the file lists ENI ${id} that IMDS does not` };
  if (!data.managed.some((e) => e.attachment?.deviceIndex === 0))
    return { ok: false, reason: 'no primary ENI in the file' };
  const managed = new Map(data.managed.map((e) => [e.eniId, e]));
  for (const i of want.imdsEnis) {
    const c = managed.get(i.eniId);
    if (!c) continue;
    const ips = new Set([c.primaryIp, ...c.secondaryIps]);
    const ip = i.localIpv4s.find((a) => !ips.has(a));
    if (ip !== undefined) return { ok: false, reason: `IMDS lists IP ${ip} on ENI ${i.eniId} that the file does not` };
    const prefixes = new Set(c.ipv4Prefixes);
    const prefix = i.ipv4Prefixes.find((a) => !prefixes.has(a));
    if (prefix !== undefined)
      return { ok: false, reason: `IMDS lists prefix ${prefix} on ENI ${i.eniId} that the file does not` };
  }
  return { ok: true, managed: data.managed as Ec2Eni[], unmanaged: data.unmanaged as Ec2Eni[], savedAt: data.savedAt };
}

/** Addresses and ENIs to leave out of a write (an unassign or detach about to be sent). */
export interface InventoryExclusions {
  ips?: ReadonlySet<string>;
  prefixes?: ReadonlySet<string>;
  attachmentIds?: ReadonlySet<string>;
}

/** Addresses an assign answer just gave an ENI, written before the datastore holds them. */
export interface InventoryAdditions {
  eniId: string;
  ips?: readonly string[];
  prefixes?: readonly string[];
}

/**
 * The first allocation of `allocations` (IPv4 addresses held by pods in a checkpoint)
 * whose address is neither a secondary IP nor inside a /28 prefix of `managed`, or
 * undefined when the file covers them all. Serving from a file that lacks a held address
 * would restore that pod's allocation as pending (not served back to it) until EC2
 * confirms: the start describes EC2 instead. Pure.
 */
export function uncoveredAllocation(managed: readonly Ec2Eni[], allocations: readonly string[]): string | undefined {
  const ips = new Set<string>();
  for (const e of managed) {
    for (const ip of e.secondaryIps) ips.add(ip);
    for (const p of e.ipv4Prefixes) for (const ip of expandPrefix(p)) ips.add(ip);
  }
  return allocations.find((ip) => !ips.has(ip));
}

/**
 * The managed ENIs as the datastore holds them now, in {@link Ec2Eni} shape: each ENI's
 * EC2 metadata from `described` (the last describe; ENIs the datastore gained since
 * without one are left out: the confirm adopts them), its secondary IPs and prefixes
 * from the datastore, without `releasing` addresses and without `exclude`. Pure.
 */
export function managedFromDatastore(
  ds: DatastoreViews,
  described: ReadonlyMap<string, Ec2Eni>,
  now: number,
  exclude: InventoryExclusions = {},
  add?: InventoryAdditions,
): Ec2Eni[] {
  const out: Ec2Eni[] = [];
  for (const info of ds.listEnis()) {
    const base = described.get(info.eniId);
    if (!base || (base.attachment && exclude.attachmentIds?.has(base.attachment.attachmentId))) continue;
    const secondaryIps: string[] = [];
    const releasingPrefixes = new Set<string>();
    for (const ip of ds.eniIps(info.eniId)) {
      const prefix = ds.prefixOf(ip);
      const gone = ds.ipState(ip, now) === 'releasing' || exclude.ips?.has(ip);
      if (prefix !== undefined) {
        if (gone) releasingPrefixes.add(prefix);
      } else if (!gone) secondaryIps.push(ip);
    }
    const ipv4Prefixes = ds
      .eniPrefixes(info.eniId)
      .filter((p) => !releasingPrefixes.has(p) && !exclude.prefixes?.has(p));
    if (add?.eniId === info.eniId) {
      for (const ip of add.ips ?? []) if (!secondaryIps.includes(ip)) secondaryIps.push(ip);
      for (const p of add.prefixes ?? []) if (!ipv4Prefixes.includes(p)) ipv4Prefixes.push(p);
    }
    out.push({ ...base, secondaryIps, ipv4Prefixes });
  }
  return out;
}

/**
 * Keeps the cache file in step with the datastore: {@link write} on demand, a cheap
 * change check every `intervalMs` (1 s) that writes when the ENI/address counts moved,
 * and the writes `CacheGuardedEc2` asks for around EC2's assigns and releases. Writes
 * are serialized; one that fails deletes the file (a later start then waits for EC2, as on a first boot).
 */
export class InventoryCacheWriter {
  private readonly described = new Map<string, Ec2Eni>();
  private chain: Promise<void> = Promise.resolve();
  private timer?: NodeJS.Timeout;
  private lastSignature = '';
  /**
   * Attachment ids of ENIs detached (or being detached) and not yet seen deleted. While any
   * is listed the file is kept deleted, so a restart describes EC2 (a slow start) and finds
   * the detaching ENI as an orphan to delete, rather than serving from a file that no
   * longer lists it and leaving it to the leaked-ENI sweep.
   */
  private readonly detached = new Set<string>();

  /**
   * @param o.file the cache file; o.bootId, o.instanceId recorded in it; o.unmanaged the
   *        attached ENIs ipamd leaves alone (kept as discovered); o.managed the managed
   *        ENIs as last described (their EC2 metadata); o.ds the datastore.
   */
  constructor(
    private readonly o: {
      file: string;
      bootId: string;
      instanceId: string;
      ds: DatastoreViews;
      managed: readonly Ec2Eni[];
      unmanaged: readonly Ec2Eni[];
      log: Logger;
      intervalMs?: number;
    },
  ) {
    for (const e of o.managed) this.described.set(e.eniId, e);
  }

  /** Records EC2's description of ENIs (a describe, a new ENI): their metadata for later writes. */
  noteDescribed(enis: readonly Ec2Eni[]): void {
    for (const e of enis) this.described.set(e.eniId, e);
  }

  /** The attachment id of a described ENI, or undefined. */
  private signature(now: number): string {
    let s = '';
    for (const e of this.o.ds.listEnis()) {
      const ips = this.o.ds.eniIps(e.eniId);
      s += `${e.eniId}:${ips.length}:${ips.filter((ip) => this.o.ds.ipState(ip, now) === 'releasing').length};`;
    }
    return s;
  }

  /** Records a detach about to be sent: the file is deleted until that ENI is deleted. */
  noteDetach(attachmentId: string): Promise<void> {
    this.detached.add(attachmentId);
    return this.write();
  }

  /** Records an ENI deleted (or found gone); writes resume once no detached ENI is left. */
  noteDeleted(eniId: string): void {
    const att = this.described.get(eniId)?.attachment?.attachmentId;
    if (att !== undefined && this.detached.delete(att) && this.detached.size === 0) void this.write();
  }

  /**
   * Writes the file now (after any write in flight), leaving out `exclude` and adding
   * `add` (an assign's answer the datastore does not hold yet). Never throws.
   */
  write(exclude?: InventoryExclusions, add?: InventoryAdditions): Promise<void> {
    const run = async (): Promise<void> => {
      const now = Date.now();
      const sig = this.signature(now);
      if (this.detached.size > 0) {
        await rm(this.o.file, { force: true }).catch(() => undefined);
        this.lastSignature = sig;
        return;
      }
      const data: InventoryFile = {
        version: 1,
        bootId: this.o.bootId,
        instanceId: this.o.instanceId,
        savedAt: new Date(now).toISOString(),
        managed: managedFromDatastore(this.o.ds, this.described, now, exclude, add),
        unmanaged: [...this.o.unmanaged],
      };
      try {
        await writeFileAtomic(this.o.file, JSON.stringify(data), { fsync: true, mode: 0o600 });
        this.lastSignature = exclude || add ? '' : sig;
      } catch (e) {
        this.o.log.warn(
          { file: this.o.file, err: (e as Error).message },
          'could not write the ENI inventory cache; deleted it (the next start waits for EC2)',
        );
        await rm(this.o.file, { force: true }).catch(() => undefined);
        this.lastSignature = '';
      }
    };
    this.chain = this.chain.then(run, run);
    return this.chain;
  }

  /** Starts the periodic change check. */
  start(): void {
    this.timer = setInterval(() => {
      if (this.signature(Date.now()) !== this.lastSignature) void this.write();
    }, this.o.intervalMs ?? 1000);
    this.timer.unref();
  }

  /** Stops the check and writes a last time. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.write();
  }
}
