/**
 * bench: the checkpoint's durable write path alone, same run, rounds interleaved, four
 * ways: the whole snapshot per group commit (temp file + fsync + rename + directory
 * fsync: `CheckpointWriter` with `journal: false`, the write path before the journal);
 * the journal with each record the diff of two whole snapshots (O(state) per commit, the
 * write path before the datastore tracked its changes); and the journal with each record
 * what the datastore recorded as changed (`datastoreCheckpointSource`, O(changes): ipamd's
 * write path), the latter also with the journal opened O_DSYNC (one write per append
 * instead of a write and an fdatasync: ipamd's default). All compact the journal into the snapshot when it outgrows it. The
 * state is a busy node's, in the real datastore: `--allocations` (250) allocations and
 * 4096 remembered DELs (the datastore's cap, reached after 4096 pod deletions), each commit
 * an ADD or a DEL of a new container, as ipamd's request path makes them. On the real
 * disk under the OS temp dir. Prints the commit latency median / p99 at 1 and 64
 * concurrent committers and commits/s; no pass/fail.
 *
 *   node dist/bench/checkpoint-write.js [--commits 2000] [--allocations 250] [--rounds 3]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CheckpointWriter, type CheckpointData } from '../ipamd/checkpoint/index.js';
import { Datastore } from '../ipamd/datastore/datastore.js';
import { datastoreCheckpointSource } from '../ipamd/checkpoint/datastore-source.js';
import { benchEni, machineLine, row } from './bench-util.js';
import { quantile } from './stats.js';

/** The write paths compared. */
const MODES = ['snapshot', 'diff', 'delta', 'dsync'] as const;
type Mode = (typeof MODES)[number];
const MODE_TITLE: Record<Mode, string> = {
  snapshot: 'whole snapshot',
  diff: 'journal, snapshot diff',
  delta: 'journal, datastore changes',
  dsync: 'journal, datastore changes, O_DSYNC',
};

/** A datastore with `allocations` held and 4096 remembered DELs; ADD/DEL as ipamd makes them. */
class NodeState {
  readonly ds = new Datastore(0, 'ip');
  private n = 0;
  constructor(allocations: number) {
    for (let e = 0; e < 16; e++) {
      const eni = benchEni(e, 49);
      this.ds.upsertEni(eni);
      this.ds.addIps(
        eni.eniId,
        Array.from({ length: 49 }, (_, i) => `10.0.${e}.${i + 2}`),
      );
    }
    this.ds.restoreUnassigned(
      Array.from({ length: 4096 }, (_, i) => ({
        containerID: `${'f'.repeat(56)}${String(i).padStart(8, '0')}`,
        releasedAt: 1_700_000_000_000 + i,
      })),
    );
    for (let i = 0; i < allocations; i++) this.add();
  }

  private key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });

  add(): string {
    const id = `${'a'.repeat(52)}${String(this.n++).padStart(12, '0')}`;
    const r = this.ds.assign(
      this.key(id),
      { namespace: 'default', name: `web-7d4b9c6f5-${id.slice(-5)}`, uid: '3f2a1c9e-8b7d-4e6f-a5c4-b3a291807f6e' },
      Date.now(),
    );
    if (r.kind !== 'assigned') throw new Error(`bench datastore ran dry (${r.kind})`);
    return id;
  }

  del(id: string): void {
    this.ds.unassign(this.key(id), Date.now());
  }

  /** The whole state, as ipamd's snapshot before the datastore tracked its changes. */
  data = (): CheckpointData => ({
    version: 1,
    bootId: 'bench',
    allocations: this.ds.allocations(),
    cooldown: this.ds.coolingEntries(Date.now()),
    released: this.ds.unassignedEntries(),
  });
}

interface Run {
  ms: number[];
  perSecond: number;
}

/** `commits` commits from `conc` concurrent committers, each an ADD then a DEL of its own container. */
async function run(mode: Mode, conc: number, commits: number, allocations: number, dir: string): Promise<Run> {
  const s = new NodeState(allocations);
  const w = new CheckpointWriter(
    path.join(dir, `ipam-${mode}-${conc}.json`),
    mode === 'delta' || mode === 'dsync'
      ? datastoreCheckpointSource({ ds: s.ds, bootId: 'bench', releasedCap: 4096, runtime: () => undefined })
      : s.data,
    { journal: mode !== 'snapshot', dsync: mode === 'dsync', idleCompactMs: 0 },
  );
  await w.commit();
  const ms: number[] = [];
  let left = commits;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (left > 0) {
        left -= 2;
        const id = s.add();
        let a = performance.now();
        await w.commit();
        ms.push(performance.now() - a);
        s.del(id);
        a = performance.now();
        await w.commit();
        ms.push(performance.now() - a);
      }
    }),
  );
  const perSecond = ms.length / ((performance.now() - t0) / 1000);
  await w.flush();
  return { ms, perSecond };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      commits: { type: 'string', default: '2000' },
      allocations: { type: 'string', default: '250' },
      rounds: { type: 'string', default: '3' },
    },
  });
  const commits = Number(values.commits);
  const allocations = Number(values.allocations);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-ckpt-bench-'));
  const results = new Map<string, Run[]>();
  try {
    for (let r = 0; r < Number(values.rounds); r++) {
      for (const conc of [1, 64]) {
        for (const mode of MODES) {
          const k = `${mode}-${conc}`;
          results.set(k, [
            ...(results.get(k) ?? []),
            await run(mode, conc, conc === 1 ? commits / 4 : commits, allocations, dir),
          ]);
        }
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const load = os.loadavg()[0]!.toFixed(1);
  console.log(
    `checkpoint commit latency, ${allocations} allocations + 4096 remembered DELs, ${values.rounds} interleaved rounds (median of the rounds' figures), ${machineLine(os.cpus().length)}, load ${load}`,
  );
  console.log(
    row([
      'committers',
      ...MODES.map((m) => `${MODE_TITLE[m]} p50 / p99 ms`),
      ...MODES.map((m) => `${MODE_TITLE[m]} commits/s`),
    ]),
  );
  console.log(row(Array(1 + 2 * MODES.length).fill('---')));
  const med = (xs: number[]) => quantile(xs, 0.5);
  for (const conc of [1, 64]) {
    const f = (m: Mode) => {
      const rs = results.get(`${m}-${conc}`)!;
      return {
        p50: med(rs.map((x) => quantile(x.ms, 0.5))),
        p99: med(rs.map((x) => quantile(x.ms, 0.99))),
        ps: med(rs.map((x) => x.perSecond)),
      };
    };
    const fs = MODES.map(f);
    console.log(
      row([conc, ...fs.map((x) => `${x.p50.toFixed(2)} / ${x.p99.toFixed(2)}`), ...fs.map((x) => x.ps.toFixed(0))]),
    );
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
