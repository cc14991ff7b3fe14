/**
 * ipamd/startup/checkpoint-lock.ts: one holder per checkpoint directory, whatever path
 * reaches it and whatever network namespace takes it (a flock on the directory's lock
 * file); a second taker names the holder; freed by release, by a failed start, and by the
 * kernel when the holder is SIGKILLed. The two-ipamd case across namespaces, with real
 * ipamds, is in test/integration/one-ipamd-cross-netns.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { acquireCheckpointLock, whileHoldingCheckpointLock } from '../../ipamd/startup/checkpoint-lock.js';

const holder = (dir: string) => ({
  pid: 4242,
  netns: 'net:[1]',
  socket: '/run/a.sock',
  checkpoint: `${dir}/ipam.json`,
  logFile: 'stdout',
  since: '2026-01-01T00:00:00.000Z',
});

test('one holder per directory, through any path to it; release frees it', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ckpt-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const link = path.join(os.tmpdir(), `${path.basename(dir)}-link`);
  await symlink(dir, link);
  t.after(() => rm(link, { force: true }));
  const a = await acquireCheckpointLock(dir, holder(dir));
  await assert.rejects(acquireCheckpointLock(link), (e: Error) =>
    e.message.startsWith(
      `another ipamd is running on this node (pid 4242, netns net:[1], socket /run/a.sock, checkpoint ${dir}/ipam.json, log stdout, since 2026-01-01T00:00:00.000Z; lock file ${link}/ipamd.lock)`,
    ),
  );
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

/**
 * A child process (in a network namespace of its own with `unshareNet`) that takes the lock
 * of `dir` and keeps it until SIGKILLed (registered on `t`). Resolves once it holds it.
 */
async function holderChild(
  t: { after(fn: () => unknown): void },
  dir: string,
  unshareNet: boolean,
): Promise<{ pid: number; kill: () => Promise<unknown> }> {
  const mod = (f: string) => JSON.stringify(new URL(`../../ipamd/startup/${f}`, import.meta.url).href);
  const code = `const m = await import(${mod('checkpoint-lock.js')}); const g = await import(${mod('guard-holder.js')}); await m.acquireCheckpointLock(${JSON.stringify(dir)}, g.selfHolder({ socket: 's', checkpoint: 'c', logFile: 'stdout' })); console.log('held'); setInterval(() => {}, 1000);`;
  const argv = [process.execPath, '--input-type=module', '-e', code];
  const child = unshareNet
    ? spawn('unshare', ['--net', ...argv], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((r) => child.once('exit', r));
  t.after(() => child.kill('SIGKILL'));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve());
    child.once('exit', (c) => reject(new Error(`holder exited ${c} before taking the lock`)));
  });
  return {
    pid: child.pid!,
    kill: () => {
      child.kill('SIGKILL');
      return exited;
    },
  };
}

test('the kernel frees the lock of a SIGKILLed holder', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ckpt-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const holder = await holderChild(t, dir, false);
  await assert.rejects(
    acquireCheckpointLock(dir),
    new RegExp(`another ipamd is running on this node \\(pid ${holder.pid}, `),
  );
  await holder.kill();
  await (await acquireCheckpointLock(dir)).release();
});

test('a holder in another network namespace holds the directory too', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ckpt-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // A network namespace of its own (unshare(1)): an abstract socket would not meet it.
  const holder = await holderChild(t, dir, true);
  const theirs = readlinkSync(`/proc/${holder.pid}/ns/net`);
  assert.notEqual(theirs, readlinkSync('/proc/self/ns/net'), 'the holder runs in a network namespace of its own');
  await assert.rejects(acquireCheckpointLock(dir), (e: Error) => e.message.includes(`netns ${theirs}`));
  await holder.kill();
  await (await acquireCheckpointLock(dir)).release();
});
