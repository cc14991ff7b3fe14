/**
 * The IPv6 checkpoint at start-up (ipamd/checkpoint/ipv6-load.ts): content that cannot be
 * trusted is set aside as `<name>.corrupt-<ISO time>`, never deleted, and reported as
 * corrupt; a file that cannot be read is an error (ipamd refuses to start).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Ipv6CheckpointWriter, ipv6JournalPath } from '../../ipamd/checkpoint/ipv6-file.js';
import { loadIpv6Checkpoint } from '../../ipamd/checkpoint/ipv6-load.js';
import { Ipv6Allocations } from '../../ipamd/datastore/ipv6-allocations.js';

const PREFIX = '2600:1f14:abc:de00:1::/80';

test('loadIpv6Checkpoint: missing, ok, corrupt snapshot or journal set aside, unreadable refused', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-v6load-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'checkpoint.json.ipv6');
  assert.deepEqual(await loadIpv6Checkpoint(file), { kind: 'missing' });

  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 1000 });
  v6.assign({ networkName: 'aws-cni', containerID: 'c1', ifName: 'eth0' }, undefined, 0, 5);
  const w = new Ipv6CheckpointWriter(file, 'boot-1', () => v6.state(0), false);
  await w.commit(); // the snapshot
  await w.commit(); // a journal line
  const ok = await loadIpv6Checkpoint(file);
  assert.equal(ok.kind, 'ok');
  assert.equal(ok.kind === 'ok' && ok.data.allocations.length, 1);

  // A bad journal line before the last: both files set aside with their bytes, nothing left in place.
  const snapshot = await readFile(file, 'utf8');
  await writeFile(ipv6JournalPath(file), 'garbage\n{"version":1}\n');
  const now = new Date('2026-11-28T15:00:00Z');
  const bad = await loadIpv6Checkpoint(file, now);
  assert.equal(bad.kind, 'corrupt');
  assert.match(bad.kind === 'corrupt' ? bad.reason : '', /journal line 1 is not JSON/);
  assert.deepEqual((await readdir(dir)).sort(), [
    'checkpoint.json.ipv6.corrupt-2026-11-28T15:00:00.000Z',
    'checkpoint.json.ipv6.journal.corrupt-2026-11-28T15:00:00.000Z',
  ]);
  assert.equal(await readFile(`${file}.corrupt-2026-11-28T15:00:00.000Z`, 'utf8'), snapshot, 'kept for forensics');
  assert.deepEqual(await loadIpv6Checkpoint(file), { kind: 'missing' }, 'the next start finds none');

  // A torn snapshot alone: set aside under a free name beside the earlier one.
  await writeFile(file, '{"version":1,');
  const torn = await loadIpv6Checkpoint(file, now);
  assert.deepEqual(torn.kind === 'corrupt' && torn.movedTo, [`${file}.corrupt-2026-11-28T15:00:00.000Z-1`]);

  // Unreadable (a directory where the file should be): an error, nothing moved.
  await mkdir(file);
  await assert.rejects(loadIpv6Checkpoint(file), /cannot be read/);
  assert.ok((await readdir(dir)).includes('checkpoint.json.ipv6'));
});
