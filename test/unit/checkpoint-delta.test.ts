/**
 * The O(changes) journal (ipamd/datastore/changes.ts, ipamd/checkpoint/datastore-source.ts):
 * a change of the datastore that the journal does not record must be impossible. Random
 * operations on a real Datastore (every mutating method, IP and prefix mode); after each
 * group of them the source's delta is applied to the state the disk would hold
 * (journal.ts applyRecord), and that state must equal the datastore's: the same
 * allocations, the same newest remembered DELs in the same order, and a cooldown list
 * holding every address still cooling with its time, whose other entries only name
 * addresses that are known, unheld and released at that time (changes.ts: harmless on
 * restore). Then the same through the real writer and files: readCheckpoint = the datastore.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CheckpointWriter, loadCheckpoint, readCheckpoint, type CheckpointData } from '../../ipamd/checkpoint/index.js';
import { applyRecord, indexState, stateData } from '../../ipamd/checkpoint/journal.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import type { IpRecord } from '../../ipamd/datastore/records.js';
import type { EniInfo } from '../../ipamd/datastore/types.js';
import { datastoreCheckpointSource } from '../../ipamd/checkpoint/datastore-source.js';

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const eni = (dev: number): EniInfo => ({
  eniId: `eni-${dev}`,
  mac: `02:00:00:00:00:0${dev}`,
  deviceNumber: dev,
  subnetId: 'subnet-1',
  subnetCidr: '10.0.0.0/16',
  primaryIp: `10.0.${dev}.250`,
  isPrimary: dev === 0,
  createdAtMs: 0,
  capacity: 64,
});
const key = (c: string) => ({ networkName: 'aws-cni', containerID: c, ifName: 'eth0' });
const COOLDOWN_MS = 100;

/** Drives random operations on `ds` (mode `unit`); `clock.now` advances as it goes. */
function driver(ds: Datastore, unit: 'ip' | 'prefix', r: () => number, clock: { now: number }) {
  const pick = <T>(xs: readonly T[]): T | undefined => (xs.length ? xs[Math.floor(r() * xs.length)] : undefined);
  let nextContainer = 0;
  let nextBlock = 0;
  const enis = [0, 1, 2];
  for (const d of enis) ds.upsertEni(eni(d));
  const addAddresses = () => {
    const d = pick(enis)!;
    const b = nextBlock++;
    if (unit === 'prefix') ds.addPrefixes(`eni-${d}`, [`10.${1 + d}.${b >> 4}.${(b & 15) * 16}/28`]);
    else
      ds.addIps(
        `eni-${d}`,
        [0, 1, 2, 3].map((i) => `10.${1 + d}.${b}.${10 + i}`),
      );
  };
  for (let i = 0; i < 3; i++) addAddresses();
  const containers: string[] = [];
  const ipsOf = (eniId: string) => (unit === 'prefix' ? ds.eniPrefixes(eniId) : ds.eniIps(eniId));
  const ops: Array<() => void> = [
    () => {
      // ADD: a new container, or one DEL'd before (its remembered DEL is forgotten)
      const c = r() < 0.8 || !containers.length ? `c${nextContainer++}` : pick(containers)!;
      containers.push(c);
      const res = ds.assign(key(c), { namespace: 'ns', name: `p-${c}`, uid: `u-${c}` }, clock.now);
      if (res.kind === 'assigned' && r() < 0.1) ds.rollbackAssign(res.allocation);
    },
    () => {
      const a = pick(ds.allocations());
      const gone = ds.unassign(a ? a : key(`unknown${nextContainer++}`), clock.now);
      if (gone && r() < 0.1) ds.rollbackUnassign(gone);
    },
    () => ds.unassign(key(`c${Math.floor(r() * (nextContainer + 1))}`), clock.now),
    addAddresses,
    () => {
      // adopt from a restore source: an address on a known ENI, or one not seen yet (pending)
      const ip =
        r() < 0.5 ? pick(enis.flatMap((d) => ds.eniIps(`eni-${d}`))) : `10.9.${nextBlock}.${nextBlock++ & 255}`;
      if (ip) ds.restoreAllocation({ ...key(`adopt${nextContainer++}`), ipv4: ip, eniId: '', allocatedAt: clock.now });
    },
    () => {
      // the pending IPs show up on an ENI
      const p = pick(ds.pendingAllocations());
      if (p && unit === 'ip') ds.addIps(`eni-${pick(enis)!}`, [p.ipv4]);
    },
    () => {
      // shrink: reserve, send, and EC2 confirms (or fails)
      const e = `eni-${pick(enis)!}`;
      if (unit === 'prefix') {
        const ps = ds.markPrefixReleaseSent(ds.reservePrefixesForRelease(e, 1, clock.now));
        if (r() < 0.7) ds.completePrefixRelease(ps);
        else ds.cancelPrefixRelease(ps);
      } else {
        const ips = ds.markReleaseSent(ds.reserveForRelease(e, 2, clock.now));
        if (r() < 0.7) ds.completeRelease(ips);
        else ds.cancelRelease(ips);
      }
    },
    () => {
      // EC2 took an address a pod holds (the allocation turns pending), or removeIps/removePrefixes
      const e = `eni-${pick(enis)!}`;
      const x = pick(ipsOf(e));
      if (!x) return;
      if (unit === 'prefix') ds.removePrefixes([x], clock.now);
      else if (r() < 0.5) ds.completeRelease([x]);
      else ds.removeIps([x], clock.now);
    },
    () => {
      // the runtime no longer lists some released containers
      const listed = new Set(containers.filter(() => r() < 0.5));
      ds.expireUnassigned(listed, clock.now - 20);
    },
    () => {
      const ip = pick(ds.eniIps(`eni-${pick(enis)!}`));
      if (ip) ds.restoreCooldown(ip, clock.now - Math.floor(r() * 200), clock.now);
    },
    () => {
      const ip = pick(ds.eniIps(`eni-${pick(enis)!}`));
      if (!ip) return;
      if (r() < 0.5) ds.quarantine(ip, clock.now, 'test');
      else ds.liftQuarantine(ip);
    },
    () => {
      // an ENI freed whole (only when every address is available)
      const d = pick([1, 2].filter((x) => enis.includes(x)));
      if (d === undefined) return;
      try {
        ds.removeEni(`eni-${d}`, clock.now);
        enis.splice(enis.indexOf(d), 1);
      } catch {
        /* still holds something */
      }
    },
    () => {
      // restored remembered DELs (start-up)
      ds.restoreUnassigned([{ containerID: `c${Math.floor(r() * nextContainer)}`, releasedAt: clock.now - 5 }]);
    },
  ];
  const weights = [8, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0.3, 0.3];
  const total = weights.reduce((a, b) => a + b, 0);
  return () => {
    let x = r() * total;
    let i = 0;
    while ((x -= weights[i]!) > 0) i++;
    clock.now += Math.floor(r() * 30);
    ops[i]!();
  };
}

/** The datastore's records (tests only): for the cooldown check below. */
const ipIndexOf = (ds: Datastore) =>
  (ds as unknown as { addresses: { ipIndex: Map<string, IpRecord> } }).addresses.ipIndex;

/** Asserts the disk state `disk` equals the datastore `ds` (see the module docstring). */
function assertSame(disk: CheckpointData, ds: Datastore, cap: number, now: number, where: string): void {
  const sortKey = (a: { containerID: string; ifName: string }) => `${a.containerID}/${a.ifName}`;
  const norm = (xs: CheckpointData['allocations']) =>
    [...xs].sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : 1)).map((a) => JSON.stringify(a, Object.keys(a).sort()));
  assert.deepEqual(norm(disk.allocations), norm(ds.allocations()), `${where}: allocations`);
  const released = ds.unassignedEntries().slice(-cap);
  assert.deepEqual(disk.released, [...released], `${where}: remembered DELs (newest ${cap}, in order)`);
  const onDisk = new Map(disk.cooldown.map((c) => [c.ip, c.releasedAt]));
  for (const c of ds.coolingEntries(now))
    assert.equal(onDisk.get(c.ip), c.releasedAt, `${where}: cooling ${c.ip} is on disk with its time`);
  const idx = ipIndexOf(ds);
  for (const [ip, at] of onDisk) {
    const rec = idx.get(ip);
    assert.ok(
      rec && rec.holder === undefined && rec.releasedAt === at,
      `${where}: cooldown entry ${ip}@${at} is stale`,
    );
  }
}

for (const unit of ['ip', 'prefix'] as const) {
  for (const cap of [6, 4096]) {
    test(`every change is in the delta (${unit} mode, ${cap} DELs kept): replayed journal = datastore`, () => {
      for (let seed = 1; seed <= 25; seed++) {
        const r = rng(seed * 7919 + cap);
        const clock = { now: 1_000_000 };
        const ds = new Datastore(COOLDOWN_MS, unit);
        const step = driver(ds, unit, r, clock);
        for (let i = 0; i < 20; i++) step(); // changes before the source exists: in its first snapshot
        const src = datastoreCheckpointSource({
          ds,
          bootId: 'b',
          releasedCap: cap,
          runtime: () => undefined,
          now: () => clock.now,
        });
        let disk = indexState(src.snapshot());
        let seq = 0;
        for (let round = 0; round < 150; round++) {
          const n = 1 + Math.floor(r() * 6);
          for (let i = 0; i < n; i++) step();
          if (r() < 0.03) {
            disk = indexState(src.snapshot()); // a compaction
            continue;
          }
          applyRecord(disk, { seq: ++seq, ...src.delta() });
          assertSame(stateData(disk, 'b', seq), ds, cap, clock.now, `seed ${seed} round ${round}`);
        }
      }
    });
  }
}

async function tempFile(t: TestContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'eni-ipam-delta-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'ipam.json');
}

test('through the writer and the files: readCheckpoint after concurrent commits = datastore', async (t) => {
  const file = await tempFile(t);
  const r = rng(42);
  const clock = { now: 1_000_000 };
  const ds = new Datastore(COOLDOWN_MS, 'ip');
  const step = driver(ds, 'ip', r, clock);
  let runtime: CheckpointData['runtime'];
  const src = datastoreCheckpointSource({
    ds,
    bootId: 'b',
    releasedCap: 8,
    runtime: () => runtime,
    now: () => clock.now,
  });
  const stages: string[] = [];
  const w = new CheckpointWriter(file, src, {
    fsync: false,
    idleCompactMs: 0,
    compactBytes: 4096,
    onStage: (s) => stages.push(s),
  });
  await w.commit();
  for (let round = 0; round < 60; round++) {
    const commits: Array<Promise<void>> = [];
    for (let i = 0; i < 1 + Math.floor(r() * 5); i++) {
      step();
      commits.push(w.commit()); // several commits per group: they share writes
    }
    if (round === 30) runtime = { name: 'containerd', version: '2.0.0' };
    if (round === 40) commits.push(w.commit());
    await Promise.all(commits);
    const got = await readCheckpoint(file);
    assert.equal(got.kind, 'ok');
    if (got.kind !== 'ok') return;
    assertSame(got.data, ds, 8, clock.now, `round ${round}`);
    if (round > 30) assert.deepEqual(got.data.runtime, runtime);
  }
  assert.ok(stages.includes('delta'), 'appends took the delta');
  assert.ok(stages.includes('compact.rename'), 'the journal was compacted on the way');
  await w.flush();
  const last = await readCheckpoint(file);
  assert.ok(last.kind === 'ok' && !last.journal, 'flush folds the journal into the snapshot');
  if (last.kind === 'ok') assertSame(last.data, ds, 8, clock.now, 'after flush');
});

test('a datastore without a source records nothing (no log grows unread)', () => {
  const ds = new Datastore(0, 'ip');
  ds.upsertEni(eni(1));
  ds.addIps('eni-1', ['10.0.0.1']);
  ds.assign(key('a'), undefined, 1);
  ds.trackChanges();
  assert.deepEqual(ds.takeChanges(), { put: [], del: [], cool: [], uncool: [], rel: [], unrel: [] });
  ds.unassign(key('a'), 2);
  const d = ds.takeChanges();
  assert.deepEqual(d.del, [key('a')]);
  assert.deepEqual(d.cool, [{ ip: '10.0.0.1', releasedAt: 2 }]);
  assert.deepEqual(d.rel, [{ containerID: 'a', releasedAt: 2 }]);
});

test('upgrade: a journal the snapshot-diff writer left loads, and the datastore writer goes on from it', async (t) => {
  const file = await tempFile(t);
  const ds = new Datastore(COOLDOWN_MS, 'ip');
  const r = rng(7);
  const clock = { now: 1_000_000 };
  const step = driver(ds, 'ip', r, clock);
  const whole = (): CheckpointData => ({
    version: 1,
    bootId: 'b',
    allocations: ds.allocations(),
    cooldown: ds.coolingEntries(clock.now),
    released: ds.unassignedEntries(),
  });
  // The previous build: every append a diff of two snapshots; ipamd killed with records in the journal.
  const old = new CheckpointWriter(file, whole, { fsync: false, idleCompactMs: 0 });
  await old.commit();
  for (let i = 0; i < 40; i++) {
    step();
    await old.commit();
  }
  const loaded = await loadCheckpoint(file);
  assert.ok(loaded.kind === 'ok' && (loaded.journal?.applied ?? 0) > 0, 'the old journal was applied');
  if (loaded.kind !== 'ok') return;
  assertSame(loaded.data, ds, 4096, clock.now, 'old journal');
  // This build takes over from the loaded state (numbering goes on) and appends deltas.
  const src = datastoreCheckpointSource({
    ds,
    bootId: 'b',
    releasedCap: 4096,
    runtime: () => undefined,
    now: () => clock.now,
  });
  const w = new CheckpointWriter(file, src, { fsync: false, idleCompactMs: 0, startSeq: loaded.data.journalSeq ?? 0 });
  await w.commit();
  for (let i = 0; i < 40; i++) {
    step();
    await w.commit();
  }
  const now = await readCheckpoint(file);
  assert.ok(now.kind === 'ok' && (now.journal?.applied ?? 0) > 0, 'appends since the compaction');
  if (now.kind === 'ok') assertSame(now.data, ds, 4096, clock.now, 'after the upgrade');
});
