/**
 * bench: the checkpoint's durable write path alone, same run, rounds interleaved: the
 * journal (a diff line + fdatasync per group commit, compacted into the snapshot when it
 * outgrows it) against the whole snapshot per group commit (temp file + fsync + rename +
 * directory fsync: `CheckpointWriter` with `journal: false`, the write path before the
 * journal). The state is a busy node's: `--allocations` (250) allocations and 4096
 * remembered DELs (the datastore's cap, reached after 4096 pod deletions), each commit
 * an ADD or a DEL of a new container, as ipamd's request path makes them. On the real
 * disk under the OS temp dir. Prints the commit latency median / p99 at 1 and 64
 * concurrent committers, commits/s, and the journal/snapshot ratio; no pass/fail.
 *
 *   node dist/bench/checkpoint-write.js [--commits 2000] [--allocations 250] [--rounds 3]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CheckpointWriter, type CheckpointAllocation, type CheckpointData } from '../ipamd/checkpoint/index.js';
import { machineLine, row } from './bench-util.js';
import { quantile } from './stats.js';

/** A datastore stand-in: allocations and remembered DELs, changed like ADD/DEL change them. */
class NodeState {
  readonly allocations = new Map<string, CheckpointAllocation>();
  readonly released = new Map<string, number>();
  private n = 0;
  constructor(allocations: number) {
    for (let i = 0; i < 4096; i++)
      this.released.set(`${'f'.repeat(56)}${String(i).padStart(8, '0')}`, 1_700_000_000_000 + i);
    for (let i = 0; i < allocations; i++) this.add();
  }

  add(): string {
    const id = `${'a'.repeat(52)}${String(this.n++).padStart(12, '0')}`;
    this.allocations.set(id, {
      networkName: 'aws-cni',
      containerID: id,
      ifName: 'eth0',
      ipv4: `10.0.${(this.n >> 8) & 255}.${this.n & 255}`,
      eniId: 'eni-0123456789abcdef0',
      allocatedAt: Date.now(),
      pod: { namespace: 'default', name: `web-7d4b9c6f5-${id.slice(-5)}`, uid: '3f2a1c9e-8b7d-4e6f-a5c4-b3a291807f6e' },
    });
    return id;
  }

  del(id: string): void {
    this.allocations.delete(id);
    this.released.delete(id);
    this.released.set(id, Date.now());
    if (this.released.size > 4096) this.released.delete(this.released.keys().next().value!);
  }

  data = (): CheckpointData => ({
    version: 1,
    bootId: 'bench',
    allocations: [...this.allocations.values()].map((a) => ({ ...a })),
    cooldown: [],
    released: [...this.released].map(([containerID, releasedAt]) => ({ containerID, releasedAt })),
  });
}

interface Run {
  ms: number[];
  perSecond: number;
}

/** `commits` commits from `conc` concurrent committers, each an ADD then a DEL of its own container. */
async function run(journal: boolean, conc: number, commits: number, allocations: number, dir: string): Promise<Run> {
  const s = new NodeState(allocations);
  const w = new CheckpointWriter(path.join(dir, `ipam-${journal ? 'j' : 's'}-${conc}.json`), s.data, {
    journal,
    idleCompactMs: 0,
  });
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
        for (const journal of [false, true]) {
          const k = `${journal ? 'journal' : 'snapshot'}-${conc}`;
          results.set(k, [
            ...(results.get(k) ?? []),
            await run(journal, conc, conc === 1 ? commits / 4 : commits, allocations, dir),
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
      'whole snapshot p50 / p99 ms',
      'journal p50 / p99 ms',
      'whole snapshot commits/s',
      'journal commits/s',
      'p50 ratio journal/snapshot',
    ]),
  );
  console.log(row(Array(6).fill('---')));
  const med = (xs: number[]) => quantile(xs, 0.5);
  for (const conc of [1, 64]) {
    const f = (k: string) => {
      const rs = results.get(`${k}-${conc}`)!;
      return {
        p50: med(rs.map((x) => quantile(x.ms, 0.5))),
        p99: med(rs.map((x) => quantile(x.ms, 0.99))),
        ps: med(rs.map((x) => x.perSecond)),
      };
    };
    const s = f('snapshot');
    const j = f('journal');
    console.log(
      row([
        conc,
        `${s.p50.toFixed(2)} / ${s.p99.toFixed(2)}`,
        `${j.p50.toFixed(2)} / ${j.p99.toFixed(2)}`,
        s.ps.toFixed(0),
        j.ps.toFixed(0),
        `${(j.p50 / s.p50).toFixed(2)}×`,
      ]),
    );
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
