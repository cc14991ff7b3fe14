/**
 * The checkpoint store: round-trip, corruption quarantine, group commit, failure
 * propagation, and atomicity under concurrent readers. Real files in a temp dir.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, readdir, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import {
  CheckpointWriter,
  loadCheckpoint,
  readBootId,
  readCheckpoint,
  type CheckpointData,
} from '../../ipamd/checkpoint/index.js';

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'eni-ipam-ckpt-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function sample(n = 2): CheckpointData {
  return {
    version: 1,
    bootId: '0b5e2c1d-8d1f-4a57-9a7e-3c9f1a2b4c5d',
    allocations: Array.from({ length: n }, (_, i) => ({
      networkName: 'aws-cni',
      containerID: `c${i}`,
      ifName: 'eth0',
      ipv4: `10.0.${i >> 8}.${i & 255}`,
      eniId: 'eni-0abc',
      allocatedAt: 1_700_000_000_000 + i,
      ...(i % 2 ? { pod: { namespace: 'default', name: `p${i}`, uid: `u${i}` } } : {}),
    })),
    cooldown: [{ ip: '10.0.9.9', releasedAt: 1_700_000_000_500 }],
  };
}

test('readBootId returns the kernel boot id', () => {
  assert.match(readBootId(), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
});

test('round-trip: write then load gives the same data; parent dir 0700, file 0600', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'sub', 'deeper', 'ipam.json');
  const data = sample(5);
  const writes: Array<[number, number]> = [];
  const w = new CheckpointWriter(file, () => data, { onWrite: (ms, bytes) => writes.push([ms, bytes]) });
  await w.commit();
  assert.deepEqual(await loadCheckpoint(file), { kind: 'ok', data: { ...data, journalSeq: 0 } });
  assert.equal((await stat(path.join(dir, 'sub', 'deeper'))).mode & 0o777, 0o700);
  assert.equal((await stat(file)).mode & 0o777, 0o600);
  assert.equal(writes.length, 1);
  assert.equal(writes[0]![1], (await stat(file)).size, 'onWrite reports the bytes written');
  assert.ok(writes[0]![0] >= 0);
  assert.deepEqual(
    (await readdir(path.join(dir, 'sub', 'deeper'))).sort(),
    ['ipam.json', 'ipam.json.journal', 'ipam.json.journal.b'],
    'no temp file left behind',
  );
});

test('missing file is "missing"; other I/O errors throw', async (t) => {
  const dir = await tempDir(t);
  assert.deepEqual(await loadCheckpoint(path.join(dir, 'nope.json')), { kind: 'missing' });
  await assert.rejects(loadCheckpoint(dir), { code: 'EISDIR' });
  const notDir = path.join(dir, 'plain');
  await writeFile(notDir, 'x');
  await assert.rejects(loadCheckpoint(path.join(notDir, 'ipam.json')), { code: 'ENOTDIR' });
});

test('each kind of corruption is moved aside, kept intact, and reported', async (t) => {
  const dir = await tempDir(t);
  const good = JSON.stringify(sample(3));
  const noBoot = sample(1) as Partial<CheckpointData>;
  delete noBoot.bootId;
  const kinds: Array<[string, Buffer | string, RegExp]> = [
    ['truncated JSON', good.slice(0, good.length - 17), /not valid JSON/],
    ['4 KiB of zeros', Buffer.alloc(4096), /all zero bytes \(4096 bytes\)/],
    ['empty file', '', /empty/],
    ['version 2', JSON.stringify({ ...sample(1), version: 2 }), /unknown version 2/],
    ['no version', JSON.stringify({ bootId: 'b', allocations: [], cooldown: [] }), /unknown version/],
    ['missing bootId', JSON.stringify(noBoot), /schema invalid at bootId/],
    [
      'missing allocation field',
      JSON.stringify({
        ...sample(0),
        allocations: [{ networkName: 'n', containerID: 'c', ifName: 'eth0', ipv4: '10.0.0.1', allocatedAt: 1 }],
      }),
      /allocations\[0\]\.eniId/,
    ],
    [
      'bad IPv4',
      JSON.stringify({ ...sample(0), allocations: [{ ...sample(1).allocations[0], ipv4: '10.0.0.256' }] }),
      /allocations\[0\]\.ipv4: expected an IPv4/,
    ],
    [
      'empty container id',
      JSON.stringify({ ...sample(0), allocations: [{ ...sample(1).allocations[0], containerID: '' }] }),
      /containerID: expected a non-empty/,
    ],
    [
      'bad cooldown time',
      JSON.stringify({ ...sample(0), cooldown: [{ ip: '10.0.0.1', releasedAt: 'yesterday' }] }),
      /cooldown\[0\]\.releasedAt/,
    ],
    ['not an object', '[1,2]', /not a JSON object/],
  ];
  for (const [name, content, reason] of kinds) {
    await t.test(name, async () => {
      const file = path.join(dir, `${name.replace(/\W+/g, '-')}.json`);
      await writeFile(file, content);
      const r = await loadCheckpoint(file);
      assert.equal(r.kind, 'corrupt');
      if (r.kind !== 'corrupt') return;
      assert.match(r.reason, reason);
      assert.ok(!r.reason.includes('\n'), 'reason is one line');
      assert.ok(r.movedTo.startsWith(`${file}.corrupt-`), r.movedTo);
      await assert.rejects(stat(file), { code: 'ENOENT' }, 'the bad file is no longer at the checkpoint path');
      assert.deepEqual(await readFile(r.movedTo), Buffer.from(content), 'kept byte for byte');
      assert.deepEqual(await loadCheckpoint(file), { kind: 'missing' });
    });
  }
  await t.test('two corrupt files in a row get distinct names', async () => {
    const file = path.join(dir, 'twice.json');
    const moved: string[] = [];
    for (let i = 0; i < 3; i++) {
      await writeFile(file, 'garbage');
      const r = await loadCheckpoint(file);
      assert.equal(r.kind, 'corrupt');
      if (r.kind === 'corrupt') moved.push(r.movedTo);
    }
    assert.equal(new Set(moved).size, 3);
  });
});

test('group commit: concurrent commits share writes, and each change is on disk when its promise resolves', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  let state = 0;
  let snapshots = 0;
  const snapshot = (): CheckpointData => {
    snapshots++;
    return { ...sample(0), bootId: `snap-${snapshots}`, allocations: sample(state).allocations };
  };
  const w = new CheckpointWriter(file, snapshot);
  const N = 200;
  const done: Array<Promise<void>> = [];
  for (let i = 1; i <= N; i++) {
    state = i; // the caller's change
    done.push(
      w.commit().then(async () => {
        const r = await readCheckpoint(file);
        assert.equal(r.kind, 'ok');
        const onDisk = (r as { data: CheckpointData }).data;
        assert.ok(
          onDisk.allocations.length >= i,
          `change ${i} is durable when its commit resolves (disk has ${onDisk.allocations.length})`,
        );
      }),
    );
    if (i % 7 === 0) await tick();
  }
  await Promise.all(done);
  assert.ok(snapshots < N / 4, `${N} commits took ${snapshots} writes`);
  assert.ok(snapshots >= 2, 'commits made during a write waited for the next one');
  const final = await loadCheckpoint(file);
  assert.equal(final.kind === 'ok' && final.data.allocations.length, N);
});

test('a commit made during a write waits for the next write, whose snapshot is taken at its start', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  let state = 0;
  const taken: number[] = [];
  const w = new CheckpointWriter(file, () => {
    taken.push(state);
    return { ...sample(0), allocations: sample(state).allocations };
  });
  state = 1;
  const a = w.commit();
  await tick(); // write 1 has started with state 1
  state = 2;
  const b = w.commit();
  state = 3;
  const c = w.commit();
  await Promise.all([a, b, c]);
  assert.deepEqual(taken, [1, 3], 'b and c shared one write holding both changes');
  await w.flush();
});

test('a failed write rejects exactly its callers; later commits succeed again', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  let n = 0;
  const w = new CheckpointWriter(file, () => {
    n++;
    if (n === 2) throw new Error('snapshot boom');
    return sample(n);
  });
  const a = w.commit();
  await tick();
  const b = w.commit();
  const c = w.commit();
  await a;
  await assert.rejects(b, /snapshot boom/);
  await assert.rejects(c, /snapshot boom/);
  await w.commit();
  const r = await loadCheckpoint(file);
  assert.equal(r.kind === 'ok' && r.data.allocations.length, 3);
});

test('a write into an uncreatable location rejects every caller of that write', async (t) => {
  const dir = await tempDir(t);
  const plain = path.join(dir, 'plain-file');
  await writeFile(plain, 'not a directory');
  const w = new CheckpointWriter(path.join(plain, 'sub', 'ipam.json'), () => sample(1));
  const results = await Promise.allSettled([w.commit(), w.commit(), w.commit()]);
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    if (r.status === 'rejected') assert.match((r.reason as NodeJS.ErrnoException).code ?? '', /ENOTDIR|EEXIST/);
  }
  await w.flush(); // never rejects
  assert.equal(await readFile(plain, 'utf8'), 'not a directory');
});

test('a failed rename rejects the callers and leaves no temp file behind', async (t) => {
  const dir = await tempDir(t);
  const target = path.join(dir, 'ipam.json');
  await mkdir(path.join(target, 'occupied'), { recursive: true }); // a directory where the file should go
  const w = new CheckpointWriter(target, () => sample(2));
  const results = await Promise.allSettled([w.commit(), w.commit()]);
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    if (r.status === 'rejected')
      assert.match((r.reason as NodeJS.ErrnoException).code ?? '', /EISDIR|ENOTEMPTY|EEXIST/);
  }
  // The journal files are created (empty) before the rename, so the directory fsync after it covers their names.
  assert.deepEqual(
    (await readdir(dir)).sort(),
    ['ipam.json', 'ipam.json.journal', 'ipam.json.journal.b'],
    'the temp file was removed',
  );
  for (const j of ['ipam.json.journal', 'ipam.json.journal.b'])
    assert.equal((await stat(path.join(dir, j))).size, 0, `${j} is empty`);
  assert.deepEqual(await readdir(target), ['occupied'], 'the directory is untouched');
});

test('flush waits for the pending write', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  const w = new CheckpointWriter(file, () => sample(4), { fsync: false });
  void w.commit();
  await w.flush();
  const r = await loadCheckpoint(file);
  assert.equal(r.kind, 'ok');
  await w.flush(); // idle flush returns at once
});

test('the file is never observed half-written while writes run', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  let round = 0;
  const w = new CheckpointWriter(file, () => ({ ...sample(3000 + (round % 7) * 500), bootId: `round-${round}` }));
  await w.commit();
  let writing = true;
  let reads = 0;
  const reader = (async () => {
    while (writing) {
      const text = await readFile(file, 'utf8');
      const data = JSON.parse(text) as CheckpointData; // throws on a partial file
      assert.match(data.bootId, /^round-\d+$/);
      assert.equal(data.allocations.length, 3000 + (Number(data.bootId.slice(6)) % 7) * 500);
      reads++;
    }
  })();
  try {
    for (round = 1; round <= 40; round++) await w.commit();
  } finally {
    writing = false;
    await reader;
  }
  assert.ok(reads > 5, `reader ran concurrently (${reads} reads)`);
  const leftovers = (await readdir(dir)).filter((f) => !/^ipam\.json(\.journal(\.b)?)?$/.test(f));
  assert.deepEqual(leftovers, [], 'no temp files left');
});

test('what the datastore may hold loads back: ENI not yet known, empty pod metadata', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  const data: CheckpointData = {
    ...sample(0),
    allocations: [
      {
        networkName: 'aws-cni',
        containerID: 'c1',
        ifName: 'eth0',
        ipv4: '10.0.0.7',
        eniId: '',
        allocatedAt: 0,
        pod: { namespace: '', name: '', uid: '' },
      },
    ],
  };
  await new CheckpointWriter(file, () => data, { fsync: false }).commit();
  assert.deepEqual(await loadCheckpoint(file), { kind: 'ok', data: { ...data, journalSeq: 0 } });
});

test('unknown extra fields are tolerated and dropped', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  await mkdir(dir, { recursive: true });
  await writeFile(file, JSON.stringify({ ...sample(1), futureField: true }));
  const r = await loadCheckpoint(file);
  assert.deepEqual(r, { kind: 'ok', data: sample(1) });
});

test('remembered DELs (`released`) round-trip; a checkpoint written before the field existed still loads', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'ipam.json');
  const withReleased: CheckpointData = {
    ...sample(1),
    released: [{ containerID: 'gone', releasedAt: 1_700_000_000_900 }],
  };
  await writeFile(file, JSON.stringify(withReleased));
  const r = await loadCheckpoint(file);
  assert.equal(r.kind, 'ok');
  assert.deepEqual(r.kind === 'ok' && r.data.released, withReleased.released);
  const old = sample(1);
  await writeFile(file, JSON.stringify(old));
  const r2 = await loadCheckpoint(file);
  assert.equal(r2.kind, 'ok', 'an old checkpoint without `released` loads');
  assert.equal(r2.kind === 'ok' && r2.data.released, undefined);
  await writeFile(file, JSON.stringify({ ...old, released: [{ containerID: '', releasedAt: 1 }] }));
  const r3 = await loadCheckpoint(file);
  assert.equal(r3.kind, 'corrupt');
  assert.match(r3.kind === 'corrupt' ? r3.reason : '', /released\[0\]\.containerID/);
});
