/**
 * The checkpoint journal (ipamd/checkpoint/journal.ts, writer.ts): appends between
 * compactions, numbering that goes on across restarts, a torn last record ignored (and
 * only that), every other defect corrupt with both files kept aside, a stale journal
 * beside a snapshot from an older ipamd not applied. Real files in a temp dir.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CheckpointWriter, loadCheckpoint, readCheckpoint, type CheckpointData } from '../../ipamd/checkpoint/index.js';

async function tempFile(t: TestContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'eni-ipam-journal-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'ipam.json');
}

/** A mutable state the writer snapshots, like the datastore. */
class State {
  allocations = new Map<string, string>();
  released = new Map<string, number>();
  data = (): CheckpointData => ({
    version: 1,
    bootId: 'boot-1',
    allocations: [...this.allocations].map(([id, ip]) => ({
      networkName: 'aws-cni',
      containerID: id,
      ifName: 'eth0',
      ipv4: ip,
      eniId: 'eni-1',
      allocatedAt: 1,
    })),
    cooldown: [],
    released: [...this.released].map(([containerID, releasedAt]) => ({ containerID, releasedAt })),
  });
}

const ids = (d: CheckpointData) => d.allocations.map((a) => `${a.containerID}=${a.ipv4}`).sort();

test('between compactions each commit appends one record; load = snapshot + journal', async (t) => {
  const file = await tempFile(t);
  const s = new State();
  const w = new CheckpointWriter(file, s.data, { idleCompactMs: 0 });
  await w.commit(); // first write: the snapshot
  const snapSize = (await stat(file)).size;
  for (let i = 0; i < 20; i++) {
    s.allocations.set(`c${i}`, `10.0.0.${i + 1}`);
    if (i % 3 === 0) {
      s.allocations.delete(`c${i}`);
      s.released.set(`c${i}`, 100 + i);
    }
    await w.commit();
  }
  assert.equal((await stat(file)).size, snapSize, 'the snapshot was not rewritten');
  const lines = (await readFile(`${file}.journal`, 'utf8')).trim().split('\n');
  assert.equal(lines.length, 20);
  assert.deepEqual(
    lines.map((l) => (JSON.parse(l) as { seq: number }).seq),
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
  const r = await loadCheckpoint(file);
  assert.equal(r.kind, 'ok');
  if (r.kind !== 'ok') return;
  assert.deepEqual(ids(r.data), ids(s.data()));
  assert.deepEqual(r.data.released, s.data().released);
  assert.deepEqual(r.journal, { applied: 20, skipped: 0, tornBytes: 0 });
  assert.equal(r.data.journalSeq, 20);
  await w.flush();
  assert.equal((await stat(`${file}.journal`)).size, 0, 'flush folds the journal into the snapshot');
  const after = JSON.parse(await readFile(file, 'utf8')) as CheckpointData;
  assert.deepEqual(ids(after), ids(s.data()), 'the snapshot alone is the whole state after flush');
  assert.equal(after.journalSeq, 20);
});

test('numbering goes on across a restart; records already in the snapshot are skipped', async (t) => {
  const file = await tempFile(t);
  const s = new State();
  const w1 = new CheckpointWriter(file, s.data, { idleCompactMs: 0 });
  await w1.commit();
  s.allocations.set('a', '10.0.0.1');
  await w1.commit();
  s.allocations.set('b', '10.0.0.2');
  await w1.commit(); // journal: seq 1, 2 (no flush: a crash)
  const l1 = await loadCheckpoint(file);
  assert.equal(l1.kind === 'ok' && l1.data.journalSeq, 2);
  // The restarted writer compacts first (snapshot journalSeq 2) and continues at 3.
  const journalBefore = await readFile(`${file}.journal`);
  const w2 = new CheckpointWriter(file, s.data, { idleCompactMs: 0, startSeq: 2 });
  await w2.commit();
  assert.equal((JSON.parse(await readFile(file, 'utf8')) as CheckpointData).journalSeq, 2);
  // A crash between the compaction's rename and the truncation leaves the old records: skipped.
  await writeFile(`${file}.journal`, journalBefore);
  const l2 = await loadCheckpoint(file);
  assert.ok(l2.kind === 'ok');
  if (l2.kind === 'ok') assert.deepEqual(l2.journal, { applied: 0, skipped: 2, tornBytes: 0 });
  await writeFile(`${file}.journal`, '');
  s.allocations.delete('a');
  await w2.commit();
  const line = JSON.parse((await readFile(`${file}.journal`, 'utf8')).trim()) as { seq: number; del: unknown };
  assert.equal(line.seq, 3);
  assert.deepEqual(line.del, [['aws-cni', 'a', 'eth0']]);
  const l3 = await loadCheckpoint(file);
  assert.deepEqual(l3.kind === 'ok' && ids(l3.data), ['b=10.0.0.2']);
});

test('a torn last record is ignored, and only the last', async (t) => {
  const file = await tempFile(t);
  const s = new State();
  const w = new CheckpointWriter(file, s.data, { idleCompactMs: 0 });
  await w.commit();
  s.allocations.set('a', '10.0.0.1');
  await w.commit();
  s.allocations.set('b', '10.0.0.2');
  await w.commit();
  const good = await readFile(`${file}.journal`);
  const [rec1, rec2] = good.toString().trim().split('\n');
  const cases: Array<[string, string | Buffer, string[], number]> = [
    [
      'half a record, no newline',
      Buffer.concat([good, Buffer.from('{"seq":3,"put":[{"netw')]),
      ['a=10.0.0.1', 'b=10.0.0.2'],
      22,
    ],
    ['zeros after the last newline', Buffer.concat([good, Buffer.alloc(512)]), ['a=10.0.0.1', 'b=10.0.0.2'], 512],
    ['last line garbage with its newline', `${rec1}\n${rec2!.slice(0, 30)}\u0000\u0000\n`, ['a=10.0.0.1'], 33],
    ['a complete record missing only its newline', `${rec1}\n${rec2}`, ['a=10.0.0.1'], Buffer.byteLength(rec2!)],
  ];
  for (const [name, content, want, torn] of cases) {
    await writeFile(`${file}.journal`, content);
    const r = await loadCheckpoint(file);
    assert.equal(r.kind, 'ok', name);
    if (r.kind !== 'ok') continue;
    assert.deepEqual(ids(r.data), want, name);
    assert.equal(r.journal?.tornBytes, torn, name);
  }
});

test('a bad record before the last, a gap, or a journal without its snapshot: corrupt, both kept aside', async (t) => {
  const file = await tempFile(t);
  const dir = path.dirname(file);
  const s = new State();
  const w = new CheckpointWriter(file, s.data, { idleCompactMs: 0 });
  await w.commit();
  for (const id of ['a', 'b', 'c']) {
    s.allocations.set(id, `10.0.0.${id.charCodeAt(0) - 96}`);
    await w.commit();
  }
  await w.flush(); // compacts; the records below are written by hand
  const snapshot = await readFile(file);
  const seq = (JSON.parse(snapshot.toString()) as CheckpointData).journalSeq!;
  const rec = (n: number, id: string) =>
    JSON.stringify({
      seq: n,
      put: [
        { networkName: 'aws-cni', containerID: id, ifName: 'eth0', ipv4: '10.0.1.1', eniId: 'eni-1', allocatedAt: 1 },
      ],
    });
  const cases: Array<[string, string, RegExp]> = [
    [
      'bad record in the middle',
      `${rec(seq + 1, 'x')}\nnot json\n${rec(seq + 2, 'y')}\n`,
      /record 2 of 3 is not a valid record, and it is not the last/,
    ],
    ['a gap', `${rec(seq + 1, 'x')}\n${rec(seq + 3, 'y')}\n`, /seq \d+ follows \d+ \(a record is missing\)/],
    ['a repeated record', `${rec(seq + 1, 'x')}\n${rec(seq + 1, 'y')}\n`, /seq \d+ appears twice/],
  ];
  for (const [name, journal, reason] of cases) {
    await writeFile(file, snapshot);
    await writeFile(`${file}.journal`, journal);
    const r = await loadCheckpoint(file);
    assert.equal(r.kind, 'corrupt', name);
    if (r.kind !== 'corrupt') continue;
    assert.match(r.reason, reason, name);
    assert.deepEqual(await readFile(r.movedTo), snapshot, `${name}: snapshot kept byte for byte`);
    assert.equal(await readFile(r.journalMovedTo!, 'utf8'), journal, `${name}: journal kept byte for byte`);
    assert.deepEqual(await loadCheckpoint(file), { kind: 'missing' }, `${name}: nothing left at the path`);
  }
  await writeFile(`${file}.journal`, `${rec(1, 'x')}\n`);
  const orphan = await loadCheckpoint(file);
  assert.equal(orphan.kind, 'corrupt', 'a journal without its snapshot is not "missing" (no aws-node import over it)');
  if (orphan.kind === 'corrupt') assert.match(orphan.reason, /without its snapshot/);
  assert.ok((await readdir(dir)).some((f) => f.startsWith('ipam.json.journal.corrupt-')));
});

test('a journal beside a snapshot without journalSeq (an older ipamd wrote it) is stale: not applied, kept aside', async (t) => {
  const file = await tempFile(t);
  const s = new State();
  s.allocations.set('old', '10.0.0.9');
  const snap = { ...s.data() };
  await writeFile(file, JSON.stringify(snap));
  await writeFile(`${file}.journal`, `${JSON.stringify({ seq: 1, del: [['aws-cni', 'old', 'eth0']] })}\n`);
  const read = await readCheckpoint(file);
  assert.equal(read.kind === 'ok' && read.staleJournal, true);
  const r = await loadCheckpoint(file);
  assert.equal(r.kind, 'ok');
  if (r.kind !== 'ok') return;
  assert.deepEqual(ids(r.data), ['old=10.0.0.9'], 'the stale delete is not applied');
  assert.match(r.journal?.staleMovedTo ?? '', /ipam\.json\.journal\.stale-/);
  await assert.rejects(stat(`${file}.journal`), { code: 'ENOENT' });
});

test('the journal is compacted once it outgrows the snapshot, and when idle', async (t) => {
  const file = await tempFile(t);
  const s = new State();
  const compactions: number[] = [];
  const w = new CheckpointWriter(file, s.data, {
    compactBytes: 2048,
    idleCompactMs: 0,
    onWrite: (_ms, bytes) => compactions.push(bytes),
  });
  await w.commit();
  for (let i = 0; i < 60; i++) {
    s.allocations.set(`c${i}`, `10.0.${i >> 8}.${(i & 255) + 1}`);
    await w.commit();
    const [j, snap] = [(await stat(`${file}.journal`)).size, (await stat(file)).size];
    assert.ok(
      j < Math.max(2048, snap) + 1024,
      `the journal (${j} bytes) stays below the larger of 2 KiB and the snapshot (${snap}) + one record`,
    );
  }
  assert.ok(compactions.length >= 3, `${compactions.length} compactions`);
  const r = await loadCheckpoint(file);
  assert.equal(r.kind === 'ok' && r.data.allocations.length, 60);

  const idle = await tempFile(t);
  const w2 = new CheckpointWriter(idle, s.data, { idleCompactMs: 50 });
  await w2.commit();
  s.allocations.set('late', '10.0.3.3');
  await w2.commit();
  assert.ok((await stat(`${idle}.journal`)).size > 0);
  const deadline = Date.now() + 5000;
  while ((await stat(`${idle}.journal`)).size > 0 && Date.now() < deadline)
    await new Promise((r2) => setTimeout(r2, 20));
  assert.equal((await stat(`${idle}.journal`)).size, 0, 'compacted after 50 ms idle');
  assert.ok(
    (JSON.parse(await readFile(idle, 'utf8')) as CheckpointData).allocations.some((a) => a.containerID === 'late'),
  );
  await w2.flush();
});

test('a failed append fails its callers, and the next write compacts (no record after a partial one)', async (t) => {
  const file = await tempFile(t);
  const s = new State();
  let fail = false;
  const w = new CheckpointWriter(
    file,
    () => {
      if (fail) throw new Error('disk gone');
      return s.data();
    },
    { idleCompactMs: 0 },
  );
  await w.commit();
  s.allocations.set('a', '10.0.0.1');
  await w.commit();
  // Simulate the torn tail a failed append can leave, then a failing write.
  await appendFile(`${file}.journal`, '{"seq":2,"pu');
  fail = true;
  await assert.rejects(w.commit(), /disk gone/);
  fail = false;
  s.allocations.set('b', '10.0.0.2');
  await w.commit(); // after a failure: a compaction, the torn tail truncated
  assert.equal((await stat(`${file}.journal`)).size, 0);
  const r = await loadCheckpoint(file);
  assert.deepEqual(r.kind === 'ok' && ids(r.data), ['a=10.0.0.1', 'b=10.0.0.2']);
});
