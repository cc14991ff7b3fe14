/**
 * The checkpoint's optional `runtime` identity (docs/design.md#13-evidence-before-trust item 2): recorded and read back;
 * old checkpoints without it still load; a malformed one is dropped, never a corrupt file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadCheckpoint } from '../../ipamd/checkpoint/index.js';

const base = {
  version: 1,
  bootId: 'b-1',
  allocations: [
    { networkName: 'aws-cni', containerID: 'c1', ifName: 'eth0', ipv4: '10.0.0.5', eniId: 'eni-1', allocatedAt: 1 },
  ],
  cooldown: [],
};

test('checkpoint runtime identity: round trip, absent in old files, malformed dropped', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'ckpt-rt-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ipam.json');
  const rows: Array<[string, unknown, unknown]> = [
    [
      'recorded',
      { ...base, runtime: { name: 'containerd', version: '1.6.20' } },
      { name: 'containerd', version: '1.6.20' },
    ],
    ['old checkpoint without it', base, undefined],
    ['malformed (empty name)', { ...base, runtime: { name: '', version: '1' } }, undefined],
    ['malformed (a string)', { ...base, runtime: 'containerd://1.6.20' }, undefined],
  ];
  for (const [name, json, want] of rows) {
    await writeFile(file, JSON.stringify(json));
    const r = await loadCheckpoint(file);
    assert.equal(r.kind, 'ok', name);
    if (r.kind !== 'ok') continue;
    assert.deepEqual(r.data.runtime, want, name);
    assert.equal(r.data.allocations.length, 1, name);
  }
});
