/**
 * Datastore with /28 prefixes (prefix delegation): 16 addresses per prefix, packing
 * into used prefixes, and a prefix released only whole and only when none of its 16
 * addresses is assigned, cooling, unverified or releasing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eniInfo } from '../helpers/datastore-eni.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { expandPrefix } from '../../ipamd/datastore/prefixes.js';

const eni = eniInfo;
const key = (c: string) => ({ networkName: 'aws-cni', containerID: c, ifName: 'eth0' });
const P1 = '10.0.0.32/28';
const P2 = '10.0.0.48/28';

function store(cooldownMs = 1000): Datastore {
  const ds = new Datastore(cooldownMs, 'prefix');
  ds.upsertEni(eni('eni-0', 0));
  ds.addPrefixes('eni-0', [P1, P2]);
  return ds;
}
function ipOf(r: ReturnType<Datastore['assign']>): string {
  assert.ok(r.kind === 'assigned' || r.kind === 'existing', `got ${r.kind}`);
  return r.allocation.ipv4;
}

test('expandPrefix: the 16 addresses of an aligned /28, and refusals', () => {
  const ips = expandPrefix(P1);
  assert.equal(ips.length, 16);
  assert.equal(ips[0], '10.0.0.32');
  assert.equal(ips[15], '10.0.0.47');
  assert.throws(() => expandPrefix('10.0.0.36/28'), /aligned/);
  assert.throws(() => expandPrefix('10.0.0.32/27'), /\/28/);
  assert.throws(() => expandPrefix('nope'), /IPv4 CIDR/);
});

test('each prefix yields 16 assignable addresses; the pool view counts prefixes and slots', () => {
  const ds = store();
  assert.deepEqual(ds.eniPrefixes('eni-0'), [P1, P2]);
  assert.equal(ds.eniIps('eni-0').length, 32);
  assert.equal(ds.prefixOf('10.0.0.50'), P2);
  assert.equal(ds.counts(0).available, 32);
  const [v] = ds.poolViews(0);
  assert.deepEqual(
    { capacity: v!.capacity, total: v!.total, freeSlots: v!.freeSlots, prefixes: v!.prefixes, roomSlots: v!.roomSlots },
    { capacity: 144, total: 32, freeSlots: 2, prefixes: 2, roomSlots: 7 },
  );
  ds.addPrefixes('eni-0', [P1]);
  assert.equal(ds.eniIps('eni-0').length, 32, 'a known prefix is ignored');
});

test('addPrefixes refuses addresses already known and bad prefixes, adding nothing', () => {
  const ds = store();
  ds.upsertEni(eni('eni-1', 1));
  assert.throws(() => ds.addPrefixes('eni-1', [P1]), /already on eni-0/);
  ds.addIps('eni-1', ['10.0.0.70']);
  assert.throws(() => ds.addPrefixes('eni-1', ['10.0.0.80/28', '10.0.0.64/28']), /secondary IP/);
  assert.deepEqual(ds.eniPrefixes('eni-1'), [], 'all or nothing');
  assert.throws(() => ds.addPrefixes('eni-1', ['10.0.0.81/28']), /aligned/);
  assert.throws(() => ds.addPrefixes('eni-9', [P1]), /unknown ENI/);
});

test('ADD packs into prefixes already in use, so free prefixes stay free', () => {
  const ds = store();
  const got = Array.from({ length: 16 }, (_, i) => ipOf(ds.assign(key(`p${i}`), undefined, 0)));
  assert.ok(
    got.every((ip) => ds.prefixOf(ip) === P1),
    'the first 16 pods fill one prefix',
  );
  assert.equal(ds.poolViews(0)[0]!.freeSlots, 1);
  assert.equal(ds.prefixOf(ipOf(ds.assign(key('p16'), undefined, 0))), P2);
  ds.unassign(key('p16'), 10);
  ds.unassign(key('p0'), 10);
  // After the cooldown both prefixes are partly used: P2 is free again only once p16's IP cooled.
  assert.equal(ds.poolViews(500)[0]!.freeSlots, 0, 'a cooling address keeps its prefix from being free');
  assert.equal(ds.poolViews(1010)[0]!.freeSlots, 1);
  assert.equal(ds.prefixOf(ipOf(ds.assign(key('again'), undefined, 1010))), P1, 'the used prefix is filled first');
});

test('a prefix is reserved for release only when all 16 addresses are free, and then never handed out', () => {
  const ds = store(1000);
  ds.assign(key('a'), undefined, 0); // in P1
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 2, 0), [P2], 'P1 holds an assigned address');
  const v = ds.poolViews(0)[0]!;
  assert.deepEqual(
    [v.total, v.freeSlots, v.prefixes, v.roomSlots],
    [16, 0, 1, 7],
    'a releasing prefix still takes its slot',
  );
  for (let i = 0; i < 15; i++) assert.notEqual(ds.prefixOf(ipOf(ds.assign(key(`b${i}`), undefined, 0))), P2);
  assert.equal(ds.assign(key('none'), undefined, 0).kind, 'empty', 'the 16 addresses of P2 are releasing');
  ds.cancelPrefixRelease([P2]);
  assert.equal(ds.prefixOf(ipOf(ds.assign(key('back'), undefined, 0))), P2);
});

test('cooling and unverified addresses block the release of their prefix', () => {
  const ds = store(1000);
  ds.assign(key('a'), undefined, 0);
  ds.unassign(key('a'), 5);
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 2, 100), [P2], 'P1 has a cooling address');
  ds.cancelPrefixRelease([P2]);
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 2, 1005).sort(), [P1, P2], 'after the cooldown both are free');
  const fresh = store();
  fresh.markAllUnverified();
  assert.deepEqual(fresh.reservePrefixesForRelease('eni-0', 2, 0), []);
  assert.equal(fresh.poolViews(0)[0]!.freeSlots, 0);
});

test('removePrefixes forgets a confirmed prefix whole; one with an address in use is kept', () => {
  const ds = store();
  const reserved = ds.reservePrefixesForRelease('eni-0', 1, 0);
  assert.deepEqual(ds.removePrefixes(reserved, 0), []);
  assert.deepEqual(
    ds.eniPrefixes('eni-0'),
    [P1, P2].filter((p) => p !== reserved[0]),
  );
  assert.equal(ds.eniIps('eni-0').length, 16);
  const left = ds.eniPrefixes('eni-0')[0]!;
  ds.assign(key('a'), undefined, 0);
  assert.deepEqual(ds.removePrefixes([left], 0), [left]);
  assert.equal(ds.eniIps('eni-0').length, 16);
});

test('single-IP release never takes prefix addresses; removeIps of a prefix address leaves the prefix not free', () => {
  const ds = store();
  ds.addIps('eni-0', ['10.0.0.100']);
  assert.deepEqual(ds.reserveForRelease('eni-0', 50, 0), ['10.0.0.100']);
  assert.deepEqual(ds.removeIps(['10.0.0.100', '10.0.0.33'], 0), []);
  assert.equal(ds.prefixOf('10.0.0.33'), undefined);
  assert.equal(ds.eniIps('eni-0').length, 31);
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 2, 0), [P2], 'P1 lost an address: never released as a prefix');
});

test('a restored allocation on a prefix address waits as pending and is adopted with the prefix', () => {
  const ds = new Datastore(0, 'prefix');
  ds.upsertEni(eni('eni-0', 0));
  const a = {
    networkName: 'aws-cni',
    containerID: 'live',
    ifName: 'eth0',
    ipv4: '10.0.0.40',
    eniId: 'eni-0',
    allocatedAt: 1,
  };
  assert.equal(ds.restoreAllocation(a), 'pending');
  ds.addPrefixes('eni-0', [P1]);
  assert.equal(ds.ipState('10.0.0.40', 0), 'assigned');
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 1, 0), []);
});

test('an ENI whose prefixes are all free can be removed whole', () => {
  const ds = store();
  ds.upsertEni(eni('eni-1', 1));
  ds.addPrefixes('eni-1', ['10.0.0.64/28']);
  ds.removeEni('eni-1', 0);
  assert.equal(ds.getEni('eni-1'), undefined);
  assert.equal(ds.ipState('10.0.0.70', 0), undefined);
  ds.upsertEni(eni('eni-2', 2));
  ds.addPrefixes('eni-2', ['10.0.0.64/28']);
  assert.equal(ds.eniIps('eni-2').length, 16, 'its addresses are free for another ENI');
});
