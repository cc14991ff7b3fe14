import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eniInfo } from '../helpers/datastore-eni.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';

const eni = eniInfo;
const key = (c: string, ifName = 'eth0') => ({ networkName: 'aws-cni', containerID: c, ifName });

function store(cooldownMs = 30_000): Datastore {
  const ds = new Datastore(cooldownMs);
  ds.upsertEni(eni('eni-0', 0));
  ds.upsertEni(eni('eni-1', 1));
  ds.addIps('eni-1', ['10.0.0.101', '10.0.0.102']);
  ds.addIps('eni-0', ['10.0.0.51', '10.0.0.52']);
  return ds;
}

test('assign prefers the lowest device number and is idempotent per key', () => {
  const ds = store();
  const a = ds.assign(key('a'), undefined, 1000);
  assert.equal(a.kind, 'assigned');
  assert.equal(a.kind === 'assigned' && a.allocation.eniId, 'eni-0');
  const again = ds.assign(key('a'), undefined, 2000);
  assert.equal(again.kind, 'existing');
  assert.equal(again.kind === 'existing' && again.allocation.ipv4, a.kind === 'assigned' ? a.allocation.ipv4 : '');
  assert.equal(ds.counts(2000).assigned, 1);
});

test('the key is (network, container, ifName): another ifName or network gets another IP', () => {
  const ds = store();
  const ips = new Set<string>();
  for (const k of [key('a'), key('a', 'eth1'), { ...key('a'), networkName: 'other' }]) {
    const r = ds.assign(k, undefined, 0);
    assert.equal(r.kind, 'assigned');
    if (r.kind === 'assigned') ips.add(r.allocation.ipv4);
  }
  assert.equal(ips.size, 3);
});

test('released IPs cool down: neither available nor assigned, then available again', () => {
  const ds = store(30_000);
  for (const c of ['a', 'b', 'c', 'd']) assert.equal(ds.assign(key(c), undefined, 0).kind, 'assigned');
  assert.equal(ds.assign(key('e'), undefined, 0).kind, 'empty');
  const rel = ds.unassign(key('b'), 1000);
  assert.ok(rel);
  assert.deepEqual(ds.counts(1000), {
    total: 4,
    assigned: 3,
    cooling: 1,
    releasing: 0,
    unverified: 0,
    available: 0,
    enis: 2,
  });
  assert.equal(ds.assign(key('e'), undefined, 30_999).kind, 'empty', 'still cooling at 29.999 s');
  const r = ds.assign(key('e'), undefined, 31_000);
  assert.equal(r.kind === 'assigned' && r.allocation.ipv4, rel!.ipv4);
  assert.equal(ds.nextCooldownEnd(31_000), undefined);
});

test('DEL of an unknown key changes nothing; DEL(A) never frees B', () => {
  const ds = store();
  const a = ds.assign(key('a'), undefined, 0);
  const b = ds.assign(key('b'), undefined, 0);
  assert.equal(ds.unassign(key('zzz'), 5), undefined);
  assert.equal(ds.unassign(key('a'), 5)?.ipv4, a.kind === 'assigned' ? a.allocation.ipv4 : '');
  assert.equal(ds.unassign(key('a'), 6), undefined, 'second DEL is a no-op');
  assert.equal(ds.lookup(key('b'))?.ipv4, b.kind === 'assigned' ? b.allocation.ipv4 : '');
  assert.equal(ds.holderOf(b.kind === 'assigned' ? b.allocation.ipv4 : '')?.containerID, 'b');
});

test('least recently released IP is reused first', () => {
  const ds = new Datastore(0);
  ds.upsertEni(eni('eni-0', 0));
  ds.addIps('eni-0', ['10.0.0.1', '10.0.0.2']);
  const a = ds.assign(key('a'), undefined, 0);
  const b = ds.assign(key('b'), undefined, 0);
  ds.unassign(key('b'), 10);
  ds.unassign(key('a'), 20);
  const c = ds.assign(key('c'), undefined, 30);
  assert.equal(c.kind === 'assigned' && c.allocation.ipv4, b.kind === 'assigned' ? b.allocation.ipv4 : '');
  assert.notEqual(a.kind === 'assigned' && a.allocation.ipv4, c.kind === 'assigned' && c.allocation.ipv4);
});

test('an IP reserved for release can never be assigned, and cancel gives it back', () => {
  const ds = new Datastore(0);
  ds.upsertEni(eni('eni-1', 1));
  ds.addIps('eni-1', ['10.0.0.1', '10.0.0.2']);
  const reserved = ds.reserveForRelease('eni-1', 2, 0);
  assert.equal(reserved.length, 2);
  assert.equal(ds.assign(key('a'), undefined, 0).kind, 'empty');
  assert.equal(ds.poolViews(0)[0]!.total, 0, 'releasing IPs are not counted in the pool');
  ds.cancelRelease(reserved);
  assert.equal(ds.assign(key('a'), undefined, 0).kind, 'assigned');
});

test('reserve never takes assigned or cooling IPs; removeIps refuses IPs in use', () => {
  const ds = new Datastore(1000);
  ds.upsertEni(eni('eni-1', 1));
  ds.addIps('eni-1', ['10.0.0.1', '10.0.0.2', '10.0.0.3']);
  const a = ds.assign(key('a'), undefined, 0);
  const b = ds.assign(key('b'), undefined, 0);
  ds.unassign(key('b'), 0);
  const reserved = ds.reserveForRelease('eni-1', 3, 10);
  assert.deepEqual(reserved, ['10.0.0.3']);
  const ipA = a.kind === 'assigned' ? a.allocation.ipv4 : '';
  const ipB = b.kind === 'assigned' ? b.allocation.ipv4 : '';
  assert.deepEqual(ds.removeIps([ipA, ipB, '10.0.0.3'], 10), [ipA, ipB]);
  assert.deepEqual(ds.eniIps('eni-1'), [ipA, ipB].sort());
  assert.throws(() => ds.removeEni('eni-1', 10), /still holds/);
});

test('rollbackAssign returns the IP without cooldown; rollbackRelease restores the holder', () => {
  const ds = new Datastore(60_000);
  ds.upsertEni(eni('eni-0', 0));
  ds.addIps('eni-0', ['10.0.0.1']);
  const r = ds.assign(key('a'), undefined, 0);
  assert.ok(r.kind === 'assigned' && ds.rollbackAssign(r.allocation));
  assert.equal(ds.counts(1).available, 1);
  const r2 = ds.assign(key('b'), undefined, 1);
  const rel = ds.unassign(key('b'), 2)!;
  assert.ok(ds.rollbackUnassign(rel));
  assert.equal(ds.lookup(key('b'))?.ipv4, r2.kind === 'assigned' ? r2.allocation.ipv4 : '');
  assert.equal(ds.counts(3).assigned, 1);
});

test('restore: conflicts are refused, unknown IPs wait as pending and are adopted when the IP appears', () => {
  const ds = store();
  const base = { networkName: 'aws-cni', ifName: 'eth0', eniId: 'eni-0', allocatedAt: 1 };
  assert.equal(ds.restoreAllocation({ ...base, containerID: 'a', ipv4: '10.0.0.51' }), 'restored');
  assert.equal(ds.restoreAllocation({ ...base, containerID: 'b', ipv4: '10.0.0.51' }), 'ip-taken');
  assert.equal(ds.restoreAllocation({ ...base, containerID: 'a', ipv4: '10.0.0.52' }), 'duplicate-key');
  assert.equal(ds.restoreAllocation({ ...base, containerID: 'c', ipv4: '10.0.0.200' }), 'pending');
  assert.equal(ds.assign(key('c'), undefined, 0).kind, 'pending');
  // nobody else can get the pending IP: it is on no ENI
  for (const c of ['x', 'y', 'z']) {
    const r = ds.assign(key(c), undefined, 0);
    assert.notEqual(r.kind === 'assigned' && r.allocation.ipv4, '10.0.0.200');
  }
  ds.addIps('eni-1', ['10.0.0.200']);
  assert.equal(ds.ipState('10.0.0.200', 0), 'assigned');
  const back = ds.assign(key('c'), undefined, 0);
  assert.equal(back.kind === 'existing' && back.allocation.ipv4, '10.0.0.200');
  assert.equal(back.kind === 'existing' && back.allocation.eniId, 'eni-1');
});

test('cooling entries survive a restore and the checkpoint view lists only cooling IPs', () => {
  const ds = store(10_000);
  ds.restoreCooldown('10.0.0.51', 5_000, 6_000);
  assert.deepEqual(ds.coolingEntries(6_000), [{ ip: '10.0.0.51', releasedAt: 5_000 }]);
  assert.deepEqual(ds.coolingEntries(15_000), []);
  assert.equal(ds.ipState('10.0.0.51', 6_000), 'cooling');
});

test('poolViews reports per-ENI total/assigned/cooling', () => {
  const ds = store(10_000);
  ds.assign(key('a'), undefined, 0);
  ds.assign(key('b'), undefined, 0);
  ds.unassign(key('b'), 0);
  const v = ds.poolViews(1);
  assert.deepEqual(
    v.map((e) => [e.eniId, e.total, e.assigned, e.cooling]),
    [
      ['eni-0', 2, 1, 1],
      ['eni-1', 2, 0, 0],
    ],
  );
});

test('unverified IPs (no checkpoint at start) are never handed out or freed until verified; adoption clears them', () => {
  const ds = store();
  assert.equal(ds.markAllUnverified(), 4);
  assert.equal(ds.assign(key('new'), undefined, 0).kind, 'empty', 'a live pod may hold any of them');
  assert.deepEqual(ds.reserveForRelease('eni-1', 2, 0), []);
  assert.equal(ds.counts(0).unverified, 4);
  assert.deepEqual(
    ds.poolViews(0).map((v) => v.cooling),
    [2, 2],
    'counted as not available and not freeable',
  );
  assert.equal(
    ds.restoreAllocation({
      networkName: 'aws-cni',
      containerID: 'live',
      ifName: 'eth0',
      ipv4: '10.0.0.101',
      eniId: '',
      allocatedAt: 0,
    }),
    'restored',
  );
  assert.equal(ds.lookup(key('live'))?.eniId, 'eni-1');
  assert.equal(ds.verifyAll(), 3);
  const r = ds.assign(key('new'), undefined, 0);
  assert.equal(r.kind, 'assigned');
  assert.notEqual(r.kind === 'assigned' && r.allocation.ipv4, '10.0.0.101');
});
