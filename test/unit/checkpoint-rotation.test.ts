/**
 * The checkpoint's compaction beside the appends (ipamd/checkpoint/writer.ts): once the
 * active journal file is full, the writer switches to the other one and writes the snapshot
 * while commits go on. Shown with real files: commits resolve while the compaction is held
 * on a FIFO where its temp file goes; a compaction that fails loses nothing and the next
 * write compacts in place; records split across both journal files load in `seq` order; and
 * a writer in a child process SIGKILLed at random points (rotations every few commits,
 * commits in flight) always leaves the last acknowledged state or a later one on disk.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CheckpointWriter, loadCheckpoint, readCheckpoint, type CheckpointData } from '../../ipamd/checkpoint/index.js';
import { crashStateOf, crashStateIndex } from '../helpers/checkpoint-crash-child.js';
import { waitFor } from '../../kit/wait.js';

async function tempFile(t: TestContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'eni-ipam-rotation-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'ipam.json');
}

const size = async (f: string) => (await stat(f).catch(() => ({ size: 0 }))).size;

/** Resolves `p`, or rejects with `what` after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer!: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(what)), ms);
    }),
  ]);
}

test('commits resolve while a compaction is held; the failed compaction loses nothing', async (t) => {
  const file = await tempFile(t);
  let n = 0;
  const errors: Error[] = [];
  const w = new CheckpointWriter(file, () => crashStateOf(n), {
    compactBytes: 1024,
    idleCompactMs: 0,
    onBackgroundError: (e) => errors.push(e),
  });
  await w.commit(); // the first write compacts in place
  // The compaction's temp file becomes a FIFO: its open blocks until a reader comes.
  const tmp = path.join(path.dirname(file), `.ipam.json.${process.pid}.tmp`);
  execFileSync('mkfifo', [tmp]);
  /** Lets a held compaction through (its open returns; it writes into the pipe, then fsync on a pipe fails: EINVAL). */
  const release = async () => {
    const fh = await open(tmp, constants.O_RDONLY | constants.O_NONBLOCK).catch(() => undefined);
    if (!fh) return;
    const buf = Buffer.alloc(65536);
    await waitFor(
      'the held compaction to fail on the pipe',
      async () => {
        await fh.read(buf, 0, buf.length).catch(() => undefined);
        return errors.length > 0;
      },
      10_000,
      10,
    ).catch(() => undefined); // the caller asserts the error
    await fh.close();
  };
  try {
    while ((await size(`${file}.journal.b`)) === 0) {
      n++;
      await within(w.commit(), 10_000, `commit ${n} before the switch did not resolve`);
    }
    // Appends now go to journal.b while the compaction of the state at the switch is held.
    for (let i = 0; i < 20; i++) {
      n++;
      await within(w.commit(), 10_000, `commit ${n} waited for the held compaction`);
    }
    const mid = await readCheckpoint(file);
    assert.ok(mid.kind === 'ok', 'loadable while the compaction is held');
    assert.deepEqual(mid.data.allocations, crashStateOf(n).allocations, 'old snapshot + both journals = the state');
    await release();
    assert.equal(errors.length, 1, 'the failed compaction is reported (no committer waited for it)');
    const after = await readCheckpoint(file);
    assert.ok(after.kind === 'ok');
    assert.deepEqual(after.data.allocations, crashStateOf(n).allocations, 'nothing lost by the failure');
    n++;
    await w.commit(); // compacts in place, empties both journal files
    assert.equal(await size(`${file}.journal`), 0);
    assert.equal(await size(`${file}.journal.b`), 0);
    const snap = JSON.parse(await readFile(file, 'utf8')) as CheckpointData;
    assert.deepEqual(snap.allocations, crashStateOf(n).allocations, 'the snapshot alone holds the state');
  } finally {
    await release(); // a build whose commits wait for the compaction is held here, not forever
    await w.flush();
  }
});

test('records split across both journal files load in seq order, whichever file holds the newer', async (t) => {
  const file = await tempFile(t);
  const rec = (seq: number, id: string) =>
    JSON.stringify({
      seq,
      put: [
        {
          networkName: 'aws-cni',
          containerID: id,
          ifName: 'eth0',
          ipv4: `10.0.1.${seq}`,
          eniId: 'eni-1',
          allocatedAt: 1,
        },
      ],
    }) + '\n';
  const snapshot: CheckpointData = { version: 1, bootId: 'b', allocations: [], cooldown: [], journalSeq: 4 };
  await writeFile(file, JSON.stringify(snapshot));
  // .journal: an emptied-too-late file (seq ≤ 4, skipped) then the newest records;
  // .journal.b: the records between (written before the switch back).
  await writeFile(`${file}.journal`, rec(3, 'old') + rec(4, 'old') + rec(7, 'g') + rec(8, 'h') + '{"seq":9,"pu');
  await writeFile(`${file}.journal.b`, rec(5, 'e') + rec(6, 'f'));
  const r = await loadCheckpoint(file);
  assert.ok(r.kind === 'ok');
  assert.deepEqual(
    r.data.allocations.map((a) => `${a.containerID}=${a.ipv4}`),
    ['e=10.0.1.5', 'f=10.0.1.6', 'g=10.0.1.7', 'h=10.0.1.8'],
  );
  assert.deepEqual(r.journal, { applied: 4, skipped: 2, tornBytes: 12 });
  assert.equal(r.data.journalSeq, 8);
  // A gap between the files (seq 6 missing) is corrupt: both files are kept aside.
  await writeFile(`${file}.journal.b`, rec(5, 'e'));
  const bad = await loadCheckpoint(file);
  assert.ok(bad.kind === 'corrupt');
  assert.match(bad.reason, /seq 7 follows 5/);
});

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), '../helpers/checkpoint-crash-child.js');

/** Runs the child writer on `file` until it acknowledged `acks` commits, waits `delayMs`, SIGKILLs it; returns the last acknowledged state number. */
async function runAndKill(file: string, acks: number, delayMs: number): Promise<number> {
  const child = spawn(process.execPath, [CHILD, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  let last = -1;
  let count = 0;
  let buf = '';
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines)
        if (l.startsWith('ack ')) {
          last = Math.max(last, Number(l.slice(4)));
          count++;
        }
      if (count >= acks) resolve();
    });
    child.on('exit', (code) => reject(new Error(`child exited (${code}) before ${acks} acks`)));
  });
  // Not a wait: the kill lands `delayMs` into the writes on purpose (a crash at a chosen point).
  await new Promise((r) => setTimeout(r, delayMs));
  child.kill('SIGKILL');
  await exited;
  // Acks printed before the kill may still be in the pipe.
  for (const l of buf.split('\n')) if (l.startsWith('ack ')) last = Math.max(last, Number(l.slice(4)));
  return last;
}

test('SIGKILL at random points with rotations every few commits: the acknowledged state is on disk', async (t) => {
  const file = await tempFile(t);
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  let rotations = 0;
  for (let round = 0; round < 12; round++) {
    const acked = await runAndKill(file, 20 + Math.floor(rand() * 40), Math.floor(rand() * 60));
    if ((await size(`${file}.journal.b`)) > 0) rotations++;
    const r = await readCheckpoint(file);
    assert.ok(r.kind === 'ok', `round ${round}: ${r.kind === 'corrupt' ? r.reason : r.kind}`);
    const k = crashStateIndex(r.data);
    assert.ok(k >= acked, `round ${round}: state ${k} on disk, ${acked} acknowledged`);
    assert.deepEqual(r.data.allocations, crashStateOf(k).allocations, `round ${round}: exactly state ${k}`);
  }
  assert.ok(rotations > 0, 'some kills left records in journal.b');
});
