/**
 * The DEL spool applier (ipamd/cni-exec/spool-applier.ts) over real files, the real
 * Datastore and a prom-client registry: a spooled DEL releases its key through the
 * datastore's DEL path (remembered by wasUnassigned) after its host side was torn down and
 * before the file goes; an unknown key is a no-op that is still remembered; an entry
 * older than the key's allocation leaves it alone; corrupt entries are kept aside and do
 * not stop the others; a failed checkpoint write rolls back and keeps the files. The
 * file names and format are the shim's (spool.ts), checked against the C writer too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { SHIM_PATH } from '../../kit/cni-exec.js';
import { DelSpool } from '../../ipamd/cni-exec/spool-applier.js';
import { parseSpoolEntry, spoolDirFor, spoolFileName, writeSpoolEntry } from '../../ipamd/cni-exec/spool.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { waitFor } from '../../kit/wait.js';

const log = pino({ level: 'silent' });
const key = (c: string, ifName = 'eth0') => ({ networkName: 'aws-cni', containerID: c, ifName });

function store(): Datastore {
  const ds = new Datastore(30_000);
  ds.upsertEni({
    eniId: 'eni-0',
    mac: '02:00:00:00:00:00',
    deviceNumber: 0,
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.10',
    isPrimary: true,
    createdAtMs: 0,
    capacity: 9,
  });
  ds.addIps('eni-0', ['10.0.0.51', '10.0.0.52', '10.0.0.53']);
  return ds;
}

async function setup(t: { after(fn: () => unknown): void }) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-spool-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const ds = store();
  const registry = new Registry();
  const events: string[] = [];
  let failPersist = false;
  const spool = new DelSpool({
    dir,
    ds,
    log,
    registry,
    vethPrefix: 'eni',
    persist: async () => {
      events.push('persist');
      if (failPersist) throw new Error('disk full');
    },
    teardown: async (e, a) => {
      events.push(`teardown ${e.containerID} ${a.ipv4} held=${ds.lookup(e) !== undefined}`);
      return [];
    },
  });
  const counts = async () =>
    Object.fromEntries(
      (await registry.getSingleMetric('eni_ipam_spooled_dels_total')!.get()).values.map((v) => [
        v.labels.outcome,
        v.value,
      ]),
    );
  return {
    dir,
    ds,
    spool,
    events,
    counts,
    failPersist: (v: boolean) => {
      failPersist = v;
    },
  };
}

test('released, unknown and stale entries; teardown before release, the file removed after the checkpoint', async (t) => {
  const { dir, ds, spool, events, counts } = await setup(t);
  const now = Date.now();
  const a = ds.assign(key('gone'), undefined, now - 10_000);
  const b = ds.assign(key('reborn'), undefined, now);
  assert.ok(a.kind === 'assigned' && b.kind === 'assigned');
  await writeSpoolEntry(dir, { ...key('gone'), netns: '/var/run/netns/x', spooledAt: now - 5000 });
  await writeSpoolEntry(dir, { ...key('never-known'), netns: '', spooledAt: now - 5000 });
  await writeSpoolEntry(dir, { ...key('reborn'), netns: '', spooledAt: now - 5000 }); // DEL older than the allocation
  const r = await spool.applyPending('test');
  assert.deepEqual(r, { released: 1, unknown: 1, stale: 1, corrupt: 0, failed: 0 });
  assert.deepEqual(
    events,
    [`teardown gone ${a.allocation.ipv4} held=true`, 'persist'],
    'host side first, while the IP is still held; one checkpoint write',
  );
  assert.equal(ds.lookup(key('gone')), undefined);
  assert.equal(ds.lookup(key('reborn'))?.ipv4, b.allocation.ipv4, 'a newer allocation of the key is left alone');
  assert.equal(ds.wasUnassigned('gone'), true);
  assert.equal(
    ds.wasUnassigned('never-known'),
    true,
    'an unknown container is still remembered as released (never adopted)',
  );
  assert.equal(ds.wasUnassigned('reborn'), false);
  assert.deepEqual(await readdir(dir), []);
  assert.deepEqual(await counts(), { released: 1, unknown: 1, stale: 1 });
});

test('corrupt entries are kept aside and do not stop the others; a failed checkpoint rolls back and keeps the files', async (t) => {
  const { dir, ds, spool, counts, failPersist } = await setup(t);
  ds.assign(key('p'), undefined, 0);
  const good = await writeSpoolEntry(dir, { ...key('p'), netns: '', spooledAt: Date.now() });
  const full = await readFile(good, 'utf8');
  await writeFile(path.join(dir, spoolFileName(key('trunc'))), full.replace('"p"', '"trunc"').slice(0, 40));
  await writeFile(
    path.join(dir, spoolFileName(key('v2'))),
    JSON.stringify({ ...JSON.parse(full), containerID: 'v2', version: 2 }),
  );
  await writeFile(path.join(dir, spoolFileName(key('renamed'))), full); // content names another key
  await writeFile(path.join(dir, 'README'), 'not an entry');
  failPersist(true);
  const failed = await spool.applyPending('test');
  assert.deepEqual(failed, { released: 0, unknown: 0, stale: 0, corrupt: 3, failed: 1 });
  assert.equal(ds.lookup(key('p'))?.containerID, 'p', 'the release was rolled back');
  assert.deepEqual(
    (await readdir(dir)).sort(),
    ['README', 'corrupt', spoolFileName(key('p'))].sort(),
    'entry kept for the next scan',
  );
  const aside = await readdir(path.join(dir, 'corrupt'));
  assert.equal(aside.length, 3);
  assert.ok(
    aside.every((f) => /^del_aws-cni_(trunc|v2|renamed)_eth0\.json\.\d{4}-/.test(f)),
    aside.join(' '),
  );
  failPersist(false);
  assert.deepEqual(await spool.applyPending('test'), { released: 1, unknown: 0, stale: 0, corrupt: 0, failed: 0 });
  assert.equal(ds.lookup(key('p')), undefined);
  assert.deepEqual(await counts(), { corrupt: 3, failed: 1, released: 1 });
});

test('a DEL spooled while running is applied by the watcher', async (t) => {
  const { dir, ds, spool } = await setup(t);
  ds.assign(key('late'), undefined, 0);
  await spool.start();
  t.after(() => spool.stop());
  await writeSpoolEntry(dir, { ...key('late'), netns: '', spooledAt: Date.now() });
  await waitFor('the watcher to apply the spooled DEL', () => !ds.lookup(key('late')), 5000, 20).catch(() => undefined);
  assert.equal(ds.lookup(key('late')), undefined);
});

test('the C shim writes the same file name and format as spool.ts', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-spool-c-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'cni-exec.sock');
  const k = { networkName: 'net_1.x', containerID: 'abc_DEF-1.2', ifName: 'e+h%0' };
  const r = spawnSync(SHIM_PATH, [], {
    input: JSON.stringify({ cniVersion: '1.0.0', name: k.networkName, type: 'eni-ipam', execSocket: sock }),
    env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: k.containerID, CNI_IFNAME: k.ifName, CNI_NETNS: '/proc/1/ns/net' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const files = await readdir(spoolDirFor(sock));
  assert.deepEqual(files, [spoolFileName(k)]);
  assert.equal(files[0], 'del_net%5F1.x_abc%5FDEF-1.2_e%2Bh%250.json');
  const e = parseSpoolEntry(await readFile(path.join(spoolDirFor(sock), files[0]!), 'utf8'));
  assert.deepEqual({ ...e, spooledAt: 0 }, { version: 1, ...k, netns: '/proc/1/ns/net', spooledAt: 0 });
});
