/**
 * Checkpoint stamps across a restart (checkpoint/boot-stamps.ts, docs/design.md#time): a
 * checkpoint records its writer's `monoAtBoot`, so the next ipamd of the same boot converts
 * the cooldown, allocation and remembered-DEL stamps exactly, whatever the wall clock did
 * while ipamd was down; a checkpoint from another boot gives its cooling addresses a full
 * cooldown; a checkpoint written by main (fad8665: no `monoAtBoot`) still loads and is read
 * as before (stamps clamped to now). Real files on disk, the real load and restore.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CheckpointWriter, loadCheckpoint, readBootId, type CheckpointData } from '../../ipamd/checkpoint/index.js';
import { rebaseStamp, stampScale } from '../../ipamd/checkpoint/boot-stamps.js';
import { datastoreCheckpointSource } from '../../ipamd/checkpoint/datastore-source.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { restoreFromCheckpoint } from '../../ipamd/startup/restore-checkpoint.js';
import pino from 'pino';

const COOLDOWN_MS = 30_000;
const HOUR = 3_600_000;
/** A checkpoint ipamd wrote on main (fad8665): 10.0.0.5 and .7 held, .6 released into cooldown. */
const MAIN_FILE = new URL('../../../test/fixtures/checkpoint-v1-main-fad8665.json', import.meta.url);

/** A datastore holding the ENI and addresses of `data`'s allocations and cooldown (as the ENI reconcile would). */
function datastoreFor(data: CheckpointData): Datastore {
  const ds = new Datastore(COOLDOWN_MS);
  const eniId = data.allocations[0]?.eniId ?? 'eni-1';
  ds.upsertEni({
    eniId,
    mac: '02:00:00:00:00:01',
    deviceNumber: 0,
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.4',
    isPrimary: true,
    createdAtMs: 0,
    capacity: 14,
  });
  ds.addIps(eniId, [...data.allocations.map((a) => a.ipv4), ...data.cooldown.map((c) => c.ip)]);
  return ds;
}

/** Restores `file` into a fresh datastore as an ipamd at `now` with `monoAtBoot` on boot `bootId` would. */
async function restored(file: string, now: number, monoAtBoot: number, bootId: string) {
  const load = await loadCheckpoint(file);
  assert.equal(load.kind, 'ok', JSON.stringify(load));
  if (load.kind !== 'ok') throw new Error('unreachable');
  const ds = datastoreFor(load.data);
  const gate = new ReleaseGate();
  const sum = restoreFromCheckpoint({
    load,
    bootId,
    ds,
    gate,
    log: pino({ level: 'silent' }),
    path: file,
    now,
    monoAtBoot,
  });
  return { ds, sum, data: load.data };
}

test('stamp scales: exact shift on the same boot, clamped legacy stamps, now from another boot', () => {
  const exact = stampScale({ bootId: 'b', monoAtBoot: 1000 }, 'b', 1000 + 6 * HOUR);
  assert.deepEqual(exact, { kind: 'exact', shift: 6 * HOUR });
  assert.equal(rebaseStamp(5000, exact, 10 * HOUR), 5000 + 6 * HOUR);
  assert.equal(rebaseStamp(5000, exact, 1000), 1000, 'never after now');
  assert.deepEqual(stampScale({ bootId: 'b' }, 'b', 7), { kind: 'legacy' });
  assert.equal(rebaseStamp(5000, { kind: 'legacy' }, 9000), 5000);
  assert.equal(rebaseStamp(5000, { kind: 'legacy' }, 4000), 4000);
  const other = stampScale({ bootId: 'a', monoAtBoot: 1 }, 'b', 7);
  assert.deepEqual(other, { kind: 'other-boot' });
  assert.equal(rebaseStamp(5000, other, 9000), 9000, 'a full cooldown from now');
});

test('a forward wall-clock step while ipamd is down leaves the rest of the cooldown', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'ckpt-boot-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ipam.json');
  const bootId = readBootId();
  // The first process: its clock reads 1e12 ms at release; boot was 1e12 − 5e6 ms on its scale.
  const released = 1e12;
  const first = datastoreFor({
    version: 1,
    bootId,
    allocations: [
      { networkName: 'n', containerID: 'c', ifName: 'eth0', ipv4: '10.0.0.5', eniId: 'eni-1', allocatedAt: 0 },
    ],
    cooldown: [],
  });
  const key = { networkName: 'n', containerID: 'c', ifName: 'eth0' };
  first.assign(key, undefined, released - 60_000);
  const ip = first.allocations()[0]!.ipv4;
  first.unassign(key, released);
  const src = datastoreCheckpointSource({
    ds: first,
    bootId,
    releasedCap: 8,
    runtime: () => undefined,
    now: () => released,
    monoAtBoot: released - 5e6,
  });
  const w = new CheckpointWriter(file, src, { fsync: false, idleCompactMs: 0 });
  await w.commit();
  await w.flush();
  assert.equal(JSON.parse(await readFile(file, 'utf8')).monoAtBoot, released - 5e6, 'the writer scale is recorded');

  // The next process starts 4 s (of boot time) later, after the wall clock stepped 6 h forward:
  // its clock reads 6 h + 4 s more, and boot is 6 h later on its scale.
  const now = released + 6 * HOUR + 4000;
  const next = await restored(file, now, released - 5e6 + 6 * HOUR, bootId);
  assert.equal(next.ds.ipState(ip, now), 'cooling', '4 s after its release the address still cools');
  assert.equal(next.ds.ipState(ip, now + COOLDOWN_MS - 4000 - 1), 'cooling');
  assert.equal(next.ds.ipState(ip, now + COOLDOWN_MS - 4000), 'available', 'and not a moment longer than its period');
  assert.equal(next.ds.unassignedEntries()[0]?.releasedAt, released + 6 * HOUR, 'the remembered DEL on the new scale');

  // The same file read on another boot: the address cools for a full period from now.
  const rebooted = await restored(file, now, 42, 'another-boot');
  assert.equal(rebooted.sum.kind, 'other-boot');
  assert.equal(rebooted.ds.allocations().length, 0);
  assert.equal(rebooted.ds.ipState(ip, now + COOLDOWN_MS - 1), 'cooling');
  assert.equal(rebooted.ds.ipState(ip, now + COOLDOWN_MS), 'available');
});

test('a checkpoint written by main (no monoAtBoot) still loads and restores as before', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'ckpt-main-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ipam.json');
  await copyFile(MAIN_FILE, file);
  // This boot's, so it is read as a same-boot restart.
  const bootId = readBootId();
  const json = JSON.parse(await readFile(file, 'utf8')) as CheckpointData;
  assert.equal(json.monoAtBoot, undefined, 'main wrote no monoAtBoot');
  await writeFile(file, JSON.stringify({ ...json, bootId }));
  const releasedAt = json.cooldown[0]!.releasedAt;
  const { ds, sum, data } = await restored(file, releasedAt + 10_000, 123, bootId);
  assert.equal(sum.kind, 'ok');
  assert.equal(sum.restored, 2);
  assert.deepEqual(
    ds.allocations().map((a) => [a.ipv4, a.pod?.name, a.allocatedAt]),
    data.allocations.map((a) => [a.ipv4, a.pod?.name, a.allocatedAt]),
    'stamps as they were',
  );
  assert.equal(ds.ipState('10.0.0.6', releasedAt + 10_000), 'cooling');
  assert.equal(ds.ipState('10.0.0.6', releasedAt + COOLDOWN_MS), 'available');
  assert.ok(ds.wasUnassigned('c0a2'), 'its remembered DEL');
});
