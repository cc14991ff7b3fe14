/**
 * A checkpoint bigger than the node could ever hold is corrupt (docs/design.md#bounds-on-bad-input: a
 * valid 55 MB checkpoint with 200,000 allocations was accepted and every ADD then took
 * 446 ms instead of ~7 ms, rewriting it). The real loader, and a real ipamd in this
 * process (startDaemon) on the simulated cloud: the file is moved aside, state rebuilt,
 * ADDs stay fast.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checkpointBoundsFor, loadCheckpoint, readBootId, type CheckpointData } from '../../ipamd/checkpoint/index.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { testSimNode } from '../../kit/sim-node.js';

/** A schema-valid checkpoint of this boot with `n` allocations on `eni-x`. */
function bigCheckpoint(n: number): CheckpointData {
  const allocations = Array.from({ length: n }, (_, i) => ({
    networkName: 'aws-cni',
    containerID: `c${i.toString(16).padStart(63, '0')}`,
    ifName: 'eth0',
    ipv4: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    eniId: 'eni-0123456789abcdef0',
    allocatedAt: 1_700_000_000_000,
    pod: { namespace: 'default', name: `pod-${i}`, uid: `uid-${i}` },
  }));
  return { version: 1, bootId: readBootId(), allocations, cooldown: [] };
}

test('loadCheckpoint: more entries or bytes than the node can hold is corrupt, moved aside; a full node is fine', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ckb-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ipam.json');
  const bounds = checkpointBoundsFor(3, 10); // m5.large: 3 ENIs × 10 addresses
  assert.equal(bounds.maxEntries, 480);

  await writeFile(file, JSON.stringify(bigCheckpoint(480)));
  const full = await loadCheckpoint(file, bounds);
  assert.equal(full.kind, 'ok');

  await writeFile(file, JSON.stringify(bigCheckpoint(481)));
  const over = await loadCheckpoint(file, bounds);
  assert.equal(over.kind, 'corrupt');
  assert.match(
    over.kind === 'corrupt' ? over.reason : '',
    /implausible: 481 allocations entries, more than this node's ENIs can hold \(480\)/,
  );
  await assert.rejects(stat(file), { code: 'ENOENT' });

  await writeFile(
    file,
    JSON.stringify({
      ...bigCheckpoint(1),
      cooldown: Array.from({ length: 481 }, (_, i) => ({ ip: `10.1.${i >> 8}.${i & 255}`, releasedAt: 1 })),
    }),
  );
  const cool = await loadCheckpoint(file, bounds);
  assert.match(cool.kind === 'corrupt' ? cool.reason : '', /481 cooldown entries/);

  // Too many bytes: refused without being read (a 2 MB file of padding is not even JSON-parsed).
  await writeFile(file, `{"version":1,"pad":"${'x'.repeat(bounds.maxBytes)}"}`);
  const big = await loadCheckpoint(file, bounds);
  assert.match(
    big.kind === 'corrupt' ? big.reason : '',
    /implausible: \d+ bytes, more than a checkpoint of this node can take/,
  );
  assert.equal((await readdir(dir)).filter((f) => f.includes('.corrupt-')).length, 3);
});

test('ipamd given a 200,000-allocation checkpoint moves it aside, rebuilds, and serves ADDs from its warm pool', async (t) => {
  const { node } = await testSimNode(t, { seed: 11, env: { WARM_IP_TARGET: '3' } });
  const text = JSON.stringify(bigCheckpoint(200_000));
  assert.ok(text.length > 40e6, `${text.length} bytes`);
  await writeFile(node.checkpoint, text);
  await node.start();
  const aside = (await readdir(path.dirname(node.checkpoint))).filter((f) =>
    f.startsWith(`${path.basename(node.checkpoint)}.corrupt-`),
  );
  assert.equal(aside.length, 1, 'the implausible checkpoint was kept aside');
  assert.equal(node.daemonHandle!.ds.allocations().length, 0, 'none of its allocations was restored');
  assert.ok((await stat(node.checkpoint)).size < 10_000, 'the rewritten checkpoint is small');
  await waitFor('a warm IP', () => node.daemonHandle!.ds.counts(Date.now()).available >= 1);
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  // Served from the rebuilt warm pool (its speed is bench/'s to measure, not a test's).
  const r = await c.add('fresh');
  assert.equal(r.success, true);
});
