/**
 * Importing amazon-vpc-cni-k8s's checkpoint (docs/design.md#13-evidence-before-trust item 6): the format conversion and
 * the bad inputs (corrupt, another boot, unknown version, too large): never imported, a
 * copy kept aside, the original left in place. Real files in a temp dir.
 */
import { Ipv6Allocations } from '../../ipamd/datastore/ipv6-allocations.js';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { AWS_NODE_CHECKPOINT_VERSION, convertAwsNodeCheckpoint } from '../../ipamd/checkpoint/aws-node.js';
import {
  importAwsNodeCheckpoint,
  kernelBootTimeMs,
  markAwsNodeCheckpointImported,
} from '../../ipamd/startup/aws-node-import.js';

const log = pino({ level: 'silent' });
const BOOT = 'b00710d0-0000-4000-8000-000000000000';

/** An aws-node checkpoint as its JSONFile checkpointer writes it (allocationTimestamp in ns, written as the double JSON.parse reads it). */
function awsFile(
  entries: unknown[] = [
    {
      networkName: 'aws-cni',
      containerID: 'c1',
      ifName: 'eth0',
      ipv4: '10.0.0.11',
      allocationTimestamp: 1_700_000_000_123_456_768,
      metadata: { k8sPodNamespace: 'default', k8sPodName: 'web-1' },
    },
    {
      networkName: 'aws-cni',
      containerID: 'c2',
      ifName: 'eth0',
      ipv4: '10.0.0.12',
      allocationTimestamp: 1_700_000_001_000_000_000,
      metadata: {},
    },
    {
      networkName: 'aws-cni',
      containerID: 'c6',
      ifName: 'eth0',
      ipv6: '2600:1f14::5',
      allocationTimestamp: 1,
      metadata: {},
    },
  ],
): string {
  return JSON.stringify({ version: AWS_NODE_CHECKPOINT_VERSION, allocations: entries });
}

async function dir(t: TestContext): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'aws-node-ckpt-'));
  t.after(() => rm(d, { recursive: true, force: true }));
  return d;
}

test('convert: keys, IPv4, pod name/namespace and ms times kept; IPv6-only skipped; network renamed to ours', () => {
  const r = convertAwsNodeCheckpoint(awsFile(), { bootId: BOOT, networkName: 'eni-net' });
  assert.ok(r.ok);
  assert.deepEqual(r.data, {
    version: 1,
    bootId: BOOT,
    cooldown: [],
    allocations: [
      {
        networkName: 'eni-net',
        containerID: 'c1',
        ifName: 'eth0',
        ipv4: '10.0.0.11',
        eniId: '',
        allocatedAt: 1_700_000_000_123,
        pod: { namespace: 'default', name: 'web-1', uid: '' },
      },
      {
        networkName: 'eni-net',
        containerID: 'c2',
        ifName: 'eth0',
        ipv4: '10.0.0.12',
        eniId: '',
        allocatedAt: 1_700_000_001_000,
      },
    ],
  });
  assert.deepEqual(
    r.skipped.map((s) => s.containerID),
    ['c6'],
  );
  assert.deepEqual(r.renamedFrom, ['aws-cni']);
  // aws-node writes `null` for an empty list (Go nil slice).
  const empty = convertAwsNodeCheckpoint(JSON.stringify({ version: AWS_NODE_CHECKPOINT_VERSION, allocations: null }), {
    bootId: BOOT,
    networkName: 'aws-cni',
  });
  assert.ok(empty.ok && empty.data.allocations.length === 0);
});

test('convert refuses unknown versions, non-JSON and schema errors with a reason naming the problem', () => {
  const p = { bootId: BOOT, networkName: 'aws-cni' };
  const cases: Array<[string, RegExp]> = [
    [JSON.stringify({ version: 'vpc-cni-ipam/2', allocations: [] }), /unknown version "vpc-cni-ipam\/2"/],
    [JSON.stringify({ version: 1, allocations: [] }), /unknown version 1/],
    [awsFile().slice(0, 60), /not valid JSON/],
    ['[]', /not a JSON object/],
    [
      awsFile([{ networkName: 'aws-cni', containerID: '', ifName: 'eth0', ipv4: '10.0.0.1', allocationTimestamp: 1 }]),
      /allocations\.0\.containerID/,
    ],
    [
      awsFile([
        { networkName: 'aws-cni', containerID: 'x', ifName: 'eth0', ipv4: '10.0.0.300', allocationTimestamp: 1 },
      ]),
      /allocations\.0\.ipv4/,
    ],
  ];
  const many = convertAwsNodeCheckpoint(awsFile(), { ...p, maxEntries: 1 });
  assert.match(!many.ok ? many.reason : '', /implausible: 3 allocations, more than this node's ENIs can hold \(1\)/);
  for (const [text, why] of cases) {
    const r = convertAwsNodeCheckpoint(text, p);
    assert.equal(r.ok, false, text);
    assert.match(!r.ok ? r.reason : '', why);
  }
});

test('import: a file from this boot is imported, then renamed so it is never imported twice', async (t) => {
  const d = await dir(t);
  const file = path.join(d, 'ipam.json');
  await writeFile(file, awsFile());
  const r = await importAwsNodeCheckpoint({
    path: file,
    asideDir: path.join(d, 'ours'),
    bootId: BOOT,
    networkName: 'aws-cni',
    log,
  });
  assert.equal(r.kind, 'imported');
  assert.deepEqual(r.kind === 'imported' && r.load.data.allocations.map((a) => a.ipv4), ['10.0.0.11', '10.0.0.12']);
  const to = await markAwsNodeCheckpointImported(file, new Date('2026-01-02T03:04:05.000Z'));
  assert.deepEqual(await readdir(d), [path.basename(to)]);
  assert.match(to, /ipam\.json\.imported-by-eni-ipam-2026-01-02T03:04:05\.000Z$/);
  assert.equal(
    (await importAwsNodeCheckpoint({ path: file, asideDir: d, bootId: BOOT, networkName: 'aws-cni', log })).kind,
    'missing',
  );
});

test('import: corrupt, unknown-version, other-boot and oversized files are not imported; a copy is kept aside, the original untouched', async (t) => {
  const d = await dir(t);
  const bootTimeMs = await kernelBootTimeMs();
  assert.ok(bootTimeMs > 0 && bootTimeMs < Date.now());
  const cases: Array<{ name: string; text: string; old?: boolean; reason: RegExp }> = [
    { name: 'truncated', text: awsFile().slice(0, 40), reason: /not valid JSON/ },
    { name: 'zeros', text: '\0'.repeat(64), reason: /not valid JSON/ },
    {
      name: 'version',
      text: JSON.stringify({ version: 'vpc-cni-ipam/9', allocations: [] }),
      reason: /unknown version/,
    },
    { name: 'other-boot', text: awsFile(), old: true, reason: /from another boot/ },
  ];
  for (const [i, c] of cases.entries()) {
    const file = path.join(d, `${c.name}.json`);
    const aside = path.join(d, `aside-${i}`);
    await writeFile(file, c.text);
    if (c.old) await utimes(file, new Date(bootTimeMs - 3_600_000), new Date(bootTimeMs - 3_600_000));
    const r = await importAwsNodeCheckpoint({
      path: file,
      asideDir: aside,
      bootId: BOOT,
      networkName: 'aws-cni',
      log,
      now: new Date('2026-01-01T00:00:00.000Z'),
    });
    assert.equal(r.kind, 'rejected', c.name);
    assert.match(r.kind === 'rejected' ? r.reason : '', c.reason, c.name);
    assert.equal(
      r.kind === 'rejected' && r.keptAt,
      path.join(aside, 'aws-node-ipam.json.rejected-2026-01-01T00:00:00.000Z'),
    );
    assert.equal(
      await readFile(path.join(aside, 'aws-node-ipam.json.rejected-2026-01-01T00:00:00.000Z'), 'utf8'),
      c.text,
      `${c.name}: copy kept`,
    );
    assert.equal(await readFile(file, 'utf8'), c.text, `${c.name}: original untouched`);
  }
  // Larger than a checkpoint may hold: refused before it is read.
  const big = path.join(d, 'big.json');
  await writeFile(big, Buffer.alloc(16 * 1024 * 1024 + 1, 0x20));
  const r = await importAwsNodeCheckpoint({
    path: big,
    asideDir: path.join(d, 'aside-big'),
    bootId: BOOT,
    networkName: 'aws-cni',
    log,
  });
  assert.match(r.kind === 'rejected' ? r.reason : '', /more than the 16777216/);
  // A directory where the file should be: rejected, nothing to copy, still no throw.
  const r2 = await importAwsNodeCheckpoint({
    path: d,
    asideDir: path.join(d, 'aside-dir'),
    bootId: BOOT,
    networkName: 'aws-cni',
    log,
  });
  assert.match(r2.kind === 'rejected' ? r2.reason : '', /not a regular file/);
});

test('convert: IPv6 allocations come out for an ipamd serving IPv6; outside the /80 they are quarantined', () => {
  const text = JSON.stringify({
    version: AWS_NODE_CHECKPOINT_VERSION,
    allocations: [
      {
        networkName: 'aws-cni',
        containerID: 'v1',
        ifName: 'eth0',
        ipv6: '2600:1f14:abc:de00:7::a',
        allocationTimestamp: 1_700_000_000_123_456_768,
        metadata: { k8sPodNamespace: 'default', k8sPodName: 'web-6' },
      },
      { networkName: 'aws-cni', containerID: 'v2', ifName: 'eth0', ipv6: '2600:1f14:999::b', allocationTimestamp: 0 },
    ],
  });
  const r = convertAwsNodeCheckpoint(text, { bootId: BOOT, networkName: 'eni-net' });
  assert.ok(r.ok);
  assert.deepEqual(r.data.allocations, [], 'nothing for the IPv4 checkpoint');
  assert.deepEqual(r.ipv6[0], {
    networkName: 'eni-net',
    containerID: 'v1',
    ifName: 'eth0',
    ipv6: '2600:1f14:abc:de00:7::a',
    allocatedAt: 1_700_000_000_123,
    pod: { namespace: 'default', name: 'web-6', uid: '' },
  });
  const v6 = new Ipv6Allocations({ prefix: '2600:1f14:abc:de00:7::/80', egressV4: true, cooldownMs: 0 });
  const back = v6.restore({ allocations: r.ipv6.map((e) => ({ ...e, egressV4: '' })) });
  assert.deepEqual(
    back.restored.map((a) => a.containerID),
    ['v1'],
  );
  assert.deepEqual(
    back.quarantined.map((q) => q.address),
    ['2600:1f14:999::b'],
  );
  for (let i = 0; i < 20; i++)
    assert.notEqual(
      v6.assign({ networkName: 'eni-net', containerID: `n${i}`, ifName: 'eth0' }, undefined, 0, 0).allocation.ipv6,
      '2600:1f14:abc:de00:7::a',
    );
});
