/**
 * ipamd/startup/checkpoint-lock.ts: one holder per checkpoint directory, whatever path
 * reaches it; freed by release, by a failed start, and by the kernel when the holder is
 * SIGKILLed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { acquireCheckpointLock, whileHoldingCheckpointLock } from '../../ipamd/startup/checkpoint-lock.js';

test('one holder per directory, through any path to it; release frees it', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ckpt-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const link = path.join(os.tmpdir(), `${path.basename(dir)}-link`);
  await symlink(dir, link);
  t.after(() => rm(link, { force: true }));
  const a = await acquireCheckpointLock(dir);
  await assert.rejects(acquireCheckpointLock(link), /another ipamd holds the checkpoint directory/);
  await a.release();
  await a.release(); // idempotent
  const b = await acquireCheckpointLock(link);
  await b.release();
});

test('a failed start frees the lock; a stop frees it even when it throws', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ckpt-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await assert.rejects(
    whileHoldingCheckpointLock(dir, () => Promise.reject(new Error('discovery failed'))),
    /discovery failed/,
  );
  const s = await whileHoldingCheckpointLock(dir, async () => ({
    stop: () => Promise.reject(new Error('flush failed')),
  }));
  await assert.rejects(acquireCheckpointLock(dir), /another ipamd/);
  await assert.rejects(s.stop(), /flush failed/);
  await (await acquireCheckpointLock(dir)).release();
});

test('the kernel frees the lock of a SIGKILLed holder', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ckpt-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const mod = new URL('../../ipamd/startup/checkpoint-lock.js', import.meta.url).href;
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(mod)}); await m.acquireCheckpointLock(${JSON.stringify(dir)}); console.log('held'); setInterval(() => {}, 1000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise((r) => child.once('exit', r));
  t.after(() => child.kill('SIGKILL'));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve());
    child.once('exit', (code) => reject(new Error(`holder exited ${code} before taking the lock`)));
  });
  await assert.rejects(acquireCheckpointLock(dir), /another ipamd/);
  child.kill('SIGKILL');
  await exited;
  await (await acquireCheckpointLock(dir)).release();
});
