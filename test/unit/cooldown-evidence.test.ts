/**
 * The cooldown that ends on evidence (issue 41, docs/design.md#cooldown-that-ends-on-evidence):
 * the pure decision (reuse-evidence.ts) over every "unknown" case, the EndpointSlice index
 * (kube/endpoint-index.ts) that feeds it, and the datastore applying it to what an ADD
 * takes while the release path keeps the timer. The watch against a real kube-apiserver:
 * test/integration/cooldown-evidence.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { evidenceReuseAt, reuseAllowed, type ReuseEvidence } from '../../ipamd/datastore/reuse-evidence.js';
import { EndpointIndex, sliceAddresses, type SliceLike } from '../../ipamd/kube/endpoint-index.js';
import { allocKey, eniInfo } from '../helpers/datastore-eni.js';

const ALLOW = 5_000;
const view = (since: number | undefined, listing: ReturnType<ReuseEvidence['listing']>): ReuseEvidence => ({
  syncedSince: () => since,
  listing: () => listing,
});
const slice = (name: string, addresses: string[], addressType = 'IPv4', ns = 'default'): SliceLike => ({
  metadata: { namespace: ns, name },
  addressType,
  endpoints: addresses.map((a) => ({ addresses: [a] })),
});

test('decision: unlisted since the sync (never listed) → reusable allowance after the sync', () => {
  assert.equal(evidenceReuseAt(view(1_000, { listed: false }), '10.0.0.5', ALLOW), 6_000);
});

test('decision: unlisted after a removal → allowance after the later of sync and removal', () => {
  assert.equal(evidenceReuseAt(view(1_000, { listed: false, removedAt: 20_000 }), '10.0.0.5', ALLOW), 25_000);
  assert.equal(evidenceReuseAt(view(30_000, { listed: false, removedAt: 20_000 }), '10.0.0.5', ALLOW), 35_000);
});

test('decision: every unknown keeps the cooldown (no evidence, not synced, listed, bad allowance or times)', () => {
  assert.equal(evidenceReuseAt(undefined, '10.0.0.5', ALLOW), undefined, 'no evidence view');
  assert.equal(evidenceReuseAt(view(undefined, { listed: false }), '10.0.0.5', ALLOW), undefined, 'not synced');
  assert.equal(evidenceReuseAt(view(1_000, { listed: true }), '10.0.0.5', ALLOW), undefined, 'listed');
  assert.equal(evidenceReuseAt(view(Number.NaN, { listed: false }), '10.0.0.5', ALLOW), undefined, 'NaN sync');
  assert.equal(
    evidenceReuseAt(view(1_000, { listed: false, removedAt: Number.NaN }), '10.0.0.5', ALLOW),
    undefined,
    'NaN removal',
  );
  for (const bad of [Number.NaN, -1, Infinity])
    assert.equal(evidenceReuseAt(view(1_000, { listed: false }), '10.0.0.5', bad), undefined, `allowance ${bad}`);
});

test('decision: the timer stays the upper bound; 0 keeps its meaning; evidence only ends it early', () => {
  assert.equal(reuseAllowed(0, 30_000, 30_000, undefined), 'timer', 'timer ran out, no evidence');
  assert.equal(reuseAllowed(0, 30_000, 30_000, 40_000), 'timer', 'timer before evidence');
  assert.equal(reuseAllowed(0, 29_999, 30_000, undefined), undefined, 'still cooling, no evidence');
  assert.equal(reuseAllowed(0, 29_999, 30_000, 29_999), 'evidence');
  assert.equal(reuseAllowed(0, 10_000, 30_000, 10_001), undefined, 'evidence not yet');
  assert.equal(reuseAllowed(5, 5, 0, undefined), 'timer', 'IP_COOLDOWN_PERIOD 0: no cooldown');
});

test('index: listed, removed at the change, relisted; FQDN slices ignored; a slice in another namespace counts', () => {
  const ix = new EndpointIndex(ALLOW);
  assert.equal(ix.syncedSince(), undefined, 'not synced before the first list');
  ix.replaceAll([slice('a', ['10.0.0.5', '10.0.0.6']), slice('f', ['db.example.com'], 'FQDN')], 1_000);
  assert.equal(ix.syncedSince(), 1_000);
  assert.deepEqual(ix.listing('10.0.0.5'), { listed: true });
  assert.deepEqual(ix.listing('10.0.0.7'), { listed: false });
  ix.apply('ADDED', slice('b', ['10.0.0.5'], 'IPv4', 'other'), 2_000);
  ix.apply('MODIFIED', slice('a', ['10.0.0.6']), 3_000);
  assert.deepEqual(ix.listing('10.0.0.5'), { listed: true }, 'still listed by the other namespace');
  ix.apply('DELETED', slice('b', [], 'IPv4', 'other'), 4_000);
  assert.deepEqual(ix.listing('10.0.0.5'), { listed: false, removedAt: 4_000 });
  ix.apply('MODIFIED', slice('a', ['10.0.0.6', '10.0.0.5']), 5_000);
  assert.deepEqual(ix.listing('10.0.0.5'), { listed: true });
});

test('index: a watch lost is unsynced; the relist counts what went meanwhile as removed at the relist', () => {
  const ix = new EndpointIndex(ALLOW);
  ix.replaceAll([slice('a', ['10.0.0.5'])], 1_000);
  ix.lost();
  assert.equal(ix.syncedSince(), undefined);
  assert.equal(evidenceReuseAt(ix, '10.0.0.99', ALLOW), undefined, 'never-listed address held while unsynced');
  ix.replaceAll([], 50_000);
  assert.deepEqual(ix.listing('10.0.0.5'), { listed: false, removedAt: 50_000 });
  assert.equal(ix.syncedSince(), 50_000);
  assert.equal(evidenceReuseAt(ix, '10.0.0.5', ALLOW), 55_000);
});

test('index: an address in an unexpected form makes the whole view unreadable while that slice exists', () => {
  const ix = new EndpointIndex(ALLOW);
  ix.replaceAll([slice('a', ['10.0.0.5'])], 1_000);
  ix.apply('ADDED', slice('bad', ['10.0.0.300']), 2_000);
  assert.equal(ix.syncedSince(), undefined);
  assert.match(ix.unreadableReason() ?? '', /default\/bad: address "10.0.0.300"/);
  ix.apply('MODIFIED', slice('a', []), 3_000);
  assert.equal(evidenceReuseAt(ix, '10.0.0.5', ALLOW), undefined, 'removed, but the view cannot be read');
  ix.apply('DELETED', slice('bad', []), 4_000);
  assert.equal(ix.syncedSince(), 1_000);
  assert.equal(evidenceReuseAt(ix, '10.0.0.5', ALLOW), 8_000);
  for (const s of [
    { ...slice('x', []), addressType: 'IPv5' },
    { ...slice('x', []), endpoints: [{ addresses: 'a' }] },
    slice('x', ['010.0.0.5']),
    slice('x', [' 10.0.0.5']),
  ])
    assert.ok('unreadable' in sliceAddresses(s), JSON.stringify(s));
});

test('index: an IPv4 address in an IPv6 slice, or IPv4-mapped, is still listed', () => {
  assert.deepEqual(sliceAddresses(slice('x', ['10.0.0.5'], 'IPv6')), { addresses: ['10.0.0.5'] });
  assert.deepEqual(sliceAddresses(slice('x', ['::FFFF:10.0.0.5'], 'IPv6')), {
    addresses: ['::ffff:10.0.0.5', '10.0.0.5'],
  });
  assert.deepEqual(sliceAddresses(slice('x', ['db.example.com'], 'FQDN')), { addresses: [] });
});

const eni = eniInfo;
const key = (c: string) => allocKey(c);

/** A node with one address: `10.0.0.51`, assigned to `a` at 0 and unassigned at `releasedAt`. */
function oneAddress(ix: EndpointIndex | undefined, releasedAt: number): Datastore {
  const ds = new Datastore(30_000);
  ds.upsertEni(eni('eni-0', 0));
  ds.addIps('eni-0', ['10.0.0.51']);
  if (ix) ds.useReuseEvidence(ix, ALLOW);
  assert.equal(ds.assign(key('a'), undefined, 0).kind, 'assigned');
  ds.unassign(key('a'), releasedAt);
  return ds;
}

test('datastore: a never-listed address is reused right after its DEL; counted as an evidence reuse', () => {
  const ix = new EndpointIndex(ALLOW);
  ix.replaceAll([], 0);
  const ds = oneAddress(ix, 10_000);
  assert.equal(ds.counts(10_001).available, 1);
  assert.equal(ds.assign(key('b'), undefined, 10_001).kind, 'assigned');
  assert.deepEqual(ds.cooldownReuses(), { timer: 0, evidence: 1 });
});

test('datastore: a listed address is held for the full period; once unlisted, for the allowance', () => {
  const ix = new EndpointIndex(ALLOW);
  ix.replaceAll([slice('svc', ['10.0.0.51'])], 0);
  const ds = oneAddress(ix, 10_000);
  assert.equal(ds.assign(key('b'), undefined, 29_999).kind, 'empty', 'listed: the timer rules');
  ix.apply('MODIFIED', slice('svc', []), 12_000);
  assert.equal(ds.assign(key('b'), undefined, 16_999).kind, 'empty', 'within the allowance');
  assert.equal(ds.nextCooldownEnd(16_999), 17_000, 'the wake-up is the evidence end, not the timer');
  assert.equal(ds.assign(key('b'), undefined, 17_000).kind, 'assigned');
});

test('datastore: unsynced, lost, or no evidence: the timer alone; the release path never uses the evidence', () => {
  for (const ix of [new EndpointIndex(ALLOW), undefined]) {
    const ds = oneAddress(ix, 10_000);
    assert.equal(ds.assign(key('b'), undefined, 39_999).kind, 'empty');
    assert.equal(ds.assign(key('b'), undefined, 40_000).kind, 'assigned');
    assert.deepEqual(ds.cooldownReuses(), { timer: 1, evidence: 0 });
  }
  const ix = new EndpointIndex(ALLOW);
  ix.replaceAll([], 0);
  const ds = oneAddress(ix, 10_000);
  ix.lost();
  assert.equal(ds.assign(key('b'), undefined, 20_000).kind, 'empty', 'watch lost after the DEL');
  ix.replaceAll([], 20_000);
  assert.equal(ds.reserveForRelease('eni-0', 1, 25_000).length, 0, 'EC2 release waits for the timer');
  assert.deepEqual(ds.coolingEntries(25_000), [{ ip: '10.0.0.51', releasedAt: 10_000 }], 'checkpoint keeps it');
  assert.equal(ds.assign(key('b'), undefined, 25_000).kind, 'assigned', 'synced again + allowance');
});

test('index: a paged relist is unsynced until its last page; slices no page listed go at the end', () => {
  const ix = new EndpointIndex(ALLOW);
  ix.replaceAll([slice('a', ['10.0.0.5']), slice('b', ['10.0.0.6'])], 1_000);
  const r = ix.relist();
  assert.equal(ix.syncedSince(), undefined, 'unsynced from the relist on');
  r.add([slice('a', ['10.0.0.5'])], 2_000);
  assert.equal(ix.syncedSince(), undefined, 'still unsynced between pages');
  assert.deepEqual(ix.listing('10.0.0.6'), { listed: true }, 'nothing dropped before the last page');
  r.finish(3_000);
  assert.equal(ix.syncedSince(), 3_000);
  assert.deepEqual(ix.listing('10.0.0.6'), { listed: false, removedAt: 3_000 });
  assert.deepEqual(ix.listing('10.0.0.5'), { listed: true });
});
