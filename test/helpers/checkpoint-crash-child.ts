/**
 * A checkpoint writer to SIGKILL (test/unit/checkpoint-rotation.test.ts). Run as
 * `node checkpoint-crash-child.js <checkpoint file>`: loads the checkpoint, goes on from
 * the state it holds, and forever moves to the next state ({@link crashStateOf}) and
 * commits it, up to 4 commits in flight, with a journal file of 512 bytes (a compaction
 * beside the appends every few commits), printing `ack <n>` once state n is durable.
 * Imported, it gives the states to check against.
 */
import { pathToFileURL } from 'node:url';
import { CheckpointWriter, loadCheckpoint, type CheckpointData } from '../../ipamd/checkpoint/index.js';

/** Containers held in each state: the newest 40. */
const WINDOW = 40;

/** State n: containers c{n-39}…c{n} (those ≥ 1) held, each with an IP derived from its number. */
export function crashStateOf(n: number): CheckpointData {
  const allocations = [];
  for (let k = Math.max(1, n - WINDOW + 1); k <= n; k++)
    allocations.push({
      networkName: 'aws-cni',
      containerID: `c${k}`,
      ifName: 'eth0',
      ipv4: `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`,
      eniId: 'eni-1',
      allocatedAt: k,
    });
  return { version: 1, bootId: 'crash-child', allocations, cooldown: [] };
}

/** Which state `d` is (its newest container's number; 0 when none). */
export function crashStateIndex(d: CheckpointData): number {
  return Math.max(0, ...d.allocations.map((a) => Number(a.containerID.slice(1))));
}

async function main(file: string): Promise<void> {
  const load = await loadCheckpoint(file);
  if (load.kind === 'corrupt') throw new Error(`corrupt: ${load.reason}`);
  let n = load.kind === 'ok' ? crashStateIndex(load.data) : 0;
  const w = new CheckpointWriter(file, () => crashStateOf(n), {
    compactBytes: 512,
    idleCompactMs: 0,
    startSeq: load.kind === 'ok' ? (load.data.journalSeq ?? 0) : 0,
  });
  await w.commit();
  const inFlight = new Set<Promise<void>>();
  for (;;) {
    n++;
    const mine = n;
    const p: Promise<void> = w.commit().then(() => {
      process.stdout.write(`ack ${mine}\n`);
      inFlight.delete(p);
    });
    inFlight.add(p);
    if (inFlight.size >= 4) await Promise.race(inFlight);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  main(process.argv[2]!).catch((e: Error) => {
    process.stderr.write(`${e.stack}\n`);
    process.exit(1);
  });
