/**
 * nodefs/dirs.ts: directories made once per component, never in a loop. Node's own
 * recursive mkdir spins forever under /proc (ENOENT with the parent present); these must
 * fail at once there, and work as mkdir -p elsewhere.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { mkdirParents, mkdirParentsSync, pseudoFsOf } from '../../nodefs/dirs.js';

test('mkdirParents fails at once where a mkdir cannot succeed (under /proc and /sys), never looping', async () => {
  for (const d of ['/proc/eni-ipam-x/y', '/proc/self/x', '/sys/eni-ipam-x']) {
    const t0 = performance.now();
    await assert.rejects(mkdirParents(d), (e: NodeJS.ErrnoException) => typeof e.code === 'string', d);
    assert.throws(
      () => mkdirParentsSync(d),
      (e: NodeJS.ErrnoException) => typeof e.code === 'string',
      d,
    );
    assert.ok(performance.now() - t0 < 1000, `${d}: took ${performance.now() - t0} ms`);
  }
});

test('mkdirParents makes missing parents with the mode, accepts an existing directory, refuses a file in the way', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-dirs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const deep = path.join(dir, 'a', 'b', 'c');
  await mkdirParents(deep, 0o700);
  assert.equal((await stat(deep)).mode & 0o777, 0o700);
  await mkdirParents(deep); // exists: fine
  mkdirParentsSync(path.join(dir, 'a', 'x', 'y'));
  assert.ok((await stat(path.join(dir, 'a', 'x', 'y'))).isDirectory());
  await writeFile(path.join(dir, 'f'), '');
  await assert.rejects(mkdirParents(path.join(dir, 'f', 'g')), { code: 'ENOTDIR' });
  assert.throws(() => mkdirParentsSync(path.join(dir, 'f')), { code: 'ENOTDIR' });
  // Concurrent makers of one tree both succeed (EEXIST of a directory is success).
  await Promise.all([mkdirParents(path.join(dir, 'p', 'q')), mkdirParents(path.join(dir, 'p', 'q'))]);
});

test('pseudoFsOf names /proc, /sys and /dev, after normalizing', () => {
  assert.equal(pseudoFsOf('/proc/1/x'), '/proc');
  assert.equal(pseudoFsOf('/var/../sys/x'), '/sys');
  assert.equal(pseudoFsOf('/dev'), '/dev');
  assert.equal(pseudoFsOf('/devices/x'), undefined);
  assert.equal(pseudoFsOf('/var/run/eni-ipam'), undefined);
});
