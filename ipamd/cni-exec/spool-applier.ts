/**
 * Applies the DELs the shim spooled while ipamd was not serving (format and directory:
 * spool.ts). At start, {@link DelSpool.applyPending} runs before the first evidence pass
 * (daemon.ts), so a sandbox whose DEL was spooled is released (and remembered by
 * `Datastore.wasUnassigned`) before any source could get it adopted. While running,
 * {@link DelSpool.start} watches the directory (inotify, plus a periodic rescan as a
 * backstop) and applies entries that appear (a DEL spooled in the window where ipamd's
 * socket refused).
 *
 * Per entry, in this order: (1) if the key holds an allocation made before the DEL was
 * spooled, its host side is removed in the node netns (host veth by its computed name,
 * the `<ip>/32` route with it, every ip rule naming the IP unless another device now
 * routes it; done while the IP is still held, so no new pod can hold it yet); (2) the key
 * is released through the datastore's DEL path (`Datastore.unassign`; a key holding
 * nothing is a no-op that is still remembered as released); (3) the checkpoint is written
 * (one write for a batch); (4) only then the file is deleted. If the checkpoint write
 * fails, the releases are rolled back and the files stay for the next scan. A corrupt
 * entry is logged and moved aside (kept); it never stops ipamd. An allocation made after
 * the entry was spooled (`allocatedAt > spooledAt`) is newer than the DEL: left alone.
 *
 * Counted in `eni_ipam_spooled_dels_total{outcome}`: released, unknown (the key held
 * nothing), stale (a newer allocation), corrupt, failed (checkpoint write failed; retried).
 */
import { monoNow } from '../clock.js';
import { watch, type FSWatcher } from 'node:fs';
import { rm } from 'node:fs/promises';
import { mkdirParents } from '../../nodefs/dirs.js';
import { Counter, type Registry } from 'prom-client';
import { LOCAL_NODE, teardownAttachment } from '../../cni-plugin/facade.js';
import type { Assignments } from '../datastore/roles.js';
import type { Allocation } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { moveAside, readSpool, type SpoolEntry } from './spool.js';

/** Default period of the backstop rescan while running, ms. */
export const RESCAN_INTERVAL_MS = 5_000;

/** Options of {@link DelSpool}. */
export interface DelSpoolOptions {
  /** The spool directory (spool.ts `spoolDirFor(execSocket)`). */
  dir: string;
  ds: Assignments;
  /** Makes the datastore's state durable (the checkpoint group commit). @throws on failure. */
  persist: () => Promise<void>;
  log: Logger;
  /** Registry for `eni_ipam_spooled_dels_total` (omit: not counted). */
  registry?: Registry;
  /** Host veth prefix (AWS_VPC_K8S_CNI_VETHPREFIX) for the computed host veth name. */
  vethPrefix: string;
  /** Netns path of the node side (default: ipamd's own). */
  nodeNetns?: string;
  /** Removes the host side of a released allocation (default: cni-plugin/host-teardown.ts). @returns warnings. */
  teardown?: (entry: SpoolEntry, allocation: Allocation) => Promise<string[]>;
  /** Backstop rescan period while running, ms (default {@link RESCAN_INTERVAL_MS}). */
  rescanMs?: number;
}

/** What one application did, by outcome. */
export interface SpoolApplyReport {
  released: number;
  unknown: number;
  stale: number;
  corrupt: number;
  failed: number;
}

/** The spool applier; see the module docstring. */
export class DelSpool {
  private readonly counter: Counter<'outcome'> | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private queued = false;
  private stopped = false;
  private afterRelease: (() => void) | undefined;

  constructor(private readonly o: DelSpoolOptions) {
    this.counter = o.registry
      ? new Counter({
          name: 'eni_ipam_spooled_dels_total',
          help: 'DELs the CNI shim spooled while ipamd was not serving, applied by ipamd, by outcome (released, unknown, stale, corrupt, failed)',
          labelNames: ['outcome'],
          registers: [o.registry],
        })
      : undefined;
  }

  /**
   * Applies every entry now (serialized with any scan in progress).
   * @param why for the log ("startup", "watch", "rescan").
   * @returns the counts. Never throws: an unreadable directory is logged and counted nowhere.
   */
  applyPending(why: string): Promise<SpoolApplyReport> {
    const run = this.chain.then(() => this.applyOnce(why));
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Watches the directory and rescans periodically, applying what appears.
   * @param afterRelease called after releases were made durable (e.g. the pool controller's trigger).
   */
  async start(afterRelease?: () => void): Promise<void> {
    this.afterRelease = afterRelease;
    await mkdirParents(this.o.dir, 0o700);
    try {
      this.watcher = watch(this.o.dir, () => this.soon('watch'));
      this.watcher.on('error', (e) =>
        this.o.log.warn({ err: e.message, dir: this.o.dir }, 'DEL spool: watch failed; the periodic rescan goes on'),
      );
    } catch (e) {
      this.o.log.warn(
        { err: (e as Error).message, dir: this.o.dir },
        'DEL spool: cannot watch the directory; relying on the periodic rescan',
      );
    }
    this.timer = setInterval(() => this.soon('rescan'), this.o.rescanMs ?? RESCAN_INTERVAL_MS);
    this.timer.unref();
    this.soon('start');
  }

  /** Stops watching and waits for a scan in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    clearInterval(this.timer);
    await this.chain;
  }

  private soon(why: string): void {
    if (this.queued || this.stopped) return;
    this.queued = true;
    setTimeout(() => {
      this.queued = false;
      if (!this.stopped) void this.applyPending(why);
    }, 50).unref();
  }

  private count(outcome: keyof SpoolApplyReport, r: SpoolApplyReport): void {
    r[outcome]++;
    this.counter?.inc({ outcome });
  }

  private async applyOnce(why: string): Promise<SpoolApplyReport> {
    const { ds, log } = this.o;
    const r: SpoolApplyReport = { released: 0, unknown: 0, stale: 0, corrupt: 0, failed: 0 };
    let reads;
    try {
      reads = await readSpool(this.o.dir);
    } catch (e) {
      log.error(
        { err: (e as Error).message, dir: this.o.dir },
        'DEL spool: cannot list the directory; spooled DELs not applied',
      );
      return r;
    }
    if (reads.length === 0) return r;
    const applied: Array<{
      file: string;
      entry: SpoolEntry;
      released?: Allocation;
      outcome: 'released' | 'unknown' | 'stale';
    }> = [];
    for (const x of reads) {
      if ('corrupt' in x) {
        const to = await moveAside(x.file).catch((e: Error) => `(not moved: ${e.message})`);
        log.error({ file: x.file, reason: x.corrupt, movedTo: to }, 'DEL spool: corrupt entry kept aside, not applied');
        this.count('corrupt', r);
        continue;
      }
      const e = x.entry;
      const held = ds.lookup(e);
      if (held && held.allocatedAt > e.spooledAt) {
        applied.push({ ...x, outcome: 'stale' });
        continue;
      }
      if (held) {
        const warnings = await this.teardown(e, held).catch((err: Error) => [`host teardown failed: ${err.message}`]);
        for (const w of warnings)
          log.warn({ containerID: e.containerID, ip: held.ipv4, warning: w }, 'DEL spool: host teardown');
      }
      const released = ds.unassign(e, monoNow());
      applied.push({ ...x, ...(released ? { released } : {}), outcome: released ? 'released' : 'unknown' });
    }
    if (applied.length === 0) return r;
    try {
      await this.o.persist();
    } catch (err) {
      for (const a of applied) if (a.released) ds.rollbackUnassign(a.released);
      for (let i = 0; i < applied.length; i++) this.count('failed', r);
      log.error(
        { err: (err as Error).message, entries: applied.length },
        'DEL spool: checkpoint write failed; releases rolled back, entries kept for the next scan',
      );
      return r;
    }
    for (const a of applied) {
      await rm(a.file, { force: true });
      this.count(a.outcome, r);
      log.info(
        {
          containerID: a.entry.containerID,
          ifName: a.entry.ifName,
          networkName: a.entry.networkName,
          ip: a.released?.ipv4 ?? null,
          outcome: a.outcome,
          spooledAt: new Date(a.entry.spooledAt).toISOString(),
          why,
        },
        'DEL spool: applied a DEL the shim recorded while ipamd was not serving',
      );
    }
    if (r.released > 0) this.afterRelease?.();
    return r;
  }

  private teardown(e: SpoolEntry, a: Allocation): Promise<string[]> {
    if (this.o.teardown) return this.o.teardown(e, a);
    return teardownAttachment({
      vethPrefix: this.o.vethPrefix,
      owner: { containerId: e.containerID, ifName: e.ifName, pod: a.pod },
      ipv4: a.ipv4,
      ...(this.o.nodeNetns ? { node: { ...LOCAL_NODE, nodeNetns: this.o.nodeNetns } } : {}),
    });
  }
}
