/**
 * An adoption (evidence pass, checkpoint, a DEL rolled back) meeting an address the
 * shrink is releasing (docs/design.md#10-the-warm-pool-at-depth: "no IP can be handed out and unassigned at the same
 * time"), at the datastore, merge and release-batch level: a reservation not yet sent
 * to EC2 is cancelled; one already sent is settled by EC2's answer — kept and assigned
 * when EC2 keeps the address, the allocation flagged pending (never dropped, never
 * served) when EC2 took it. And a sandbox whose DEL was served is never adopted again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eniInfo } from '../helpers/datastore-eni.js';
import { Datastore, RELEASED_CONTAINERS_KEPT } from '../../ipamd/datastore/datastore.js';
import type { Allocation } from '../../ipamd/datastore/types.js';
import { mergeEvidence } from '../../ipamd/restore/merge.js';
import { decideSend, type ReleaseOps } from '../../ipamd/controller/release/release-batch.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';

const eni = eniInfo;
const key = (c: string) => ({ networkName: 'aws-cni', containerID: c, ifName: 'eth0' });
const adopted = (c: string, ip: string): Allocation => ({
  ...key(c),
  ipv4: ip,
  eniId: '',
  allocatedAt: 5,
  pod: { namespace: 'default', name: `pod-${c}`, uid: `uid-${c}` },
});
const IP = '10.0.0.101';
const P = '10.0.0.32/28';

/** One ENI with one free secondary IP (no cooldown). */
function store(): Datastore {
  const ds = new Datastore(0);
  ds.upsertEni(eni('eni-1', 1));
  ds.addIps('eni-1', [IP]);
  return ds;
}
function ipOps(ds: Datastore): ReleaseOps {
  return {
    what: 'IPs',
    cancel: (x) => ds.cancelRelease(x),
    markSent: (x) => ds.markReleaseSent(x),
    complete: (x) => ds.completeRelease(x),
    onEni: (e) => e.secondaryIps,
  };
}

test('adoption of an IP reserved but not sent cancels the release: it is not sent, the pod keeps it', () => {
  const ds = store();
  assert.deepEqual(ds.reserveForRelease('eni-1', 1, 0), [IP]);
  assert.equal(ds.restoreAllocation(adopted('live', IP)), 'restored');
  assert.equal(ds.ipState(IP, 0), 'assigned');
  assert.deepEqual(ds.markReleaseSent([IP]), [], 'the adopted IP must not be sent to EC2');
  const d = decideSend([IP], ipOps(ds), new ReleaseGate(), () => undefined);
  assert.deepEqual(d, { kind: 'nothing' });
  assert.equal(ds.holderOf(IP)?.containerID, 'live');
});

test('adoption of an IP whose unassign was sent, and EC2 took it: the allocation is kept, pending, and reported', () => {
  const ds = store();
  ds.reserveForRelease('eni-1', 1, 0);
  const d = decideSend([IP], ipOps(ds), new ReleaseGate(), () => undefined);
  assert.deepEqual(d, { kind: 'send', items: [IP] });
  assert.equal(ds.restoreAllocation(adopted('live', IP)), 'releasing');
  assert.equal(ds.ipState(IP, 0), 'assigned', 'nobody else can be handed the address meanwhile');
  assert.equal(ds.assign(key('other'), undefined, 1).kind, 'empty');
  // EC2 answered: unassigned.
  const lost = ds.completeRelease([IP]);
  assert.deepEqual(
    lost.map((a) => [a.containerID, a.ipv4]),
    [['live', IP]],
  );
  assert.equal(ds.ipState(IP, 2), undefined, 'the address left the datastore: EC2 no longer has it');
  assert.deepEqual(ds.eniIps('eni-1'), []);
  assert.deepEqual(
    ds.pendingAllocations().map((a) => a.containerID),
    ['live'],
  );
  assert.equal(
    ds.assign(key('live'), undefined, 3).kind,
    'pending',
    'a repeated ADD is refused, never answered with a dead IP',
  );
  assert.equal(ds.counts(3).total, 0);
  // If EC2 ever puts the address back on one of our ENIs, it is the pod's again.
  ds.addIps('eni-1', [IP]);
  assert.equal(ds.holderOf(IP)?.containerID, 'live');
  assert.equal(ds.assign(key('live'), undefined, 4).kind, 'existing');
});

test('adoption of an IP whose unassign was sent, and EC2 refused it: plainly assigned, kept', () => {
  const ds = store();
  ds.reserveForRelease('eni-1', 1, 0);
  ds.markReleaseSent([IP]);
  assert.equal(ds.restoreAllocation(adopted('live', IP)), 'releasing');
  ds.cancelRelease([IP]);
  assert.equal(ds.ipState(IP, 0), 'assigned');
  assert.equal(ds.counts(0).releasing, 0);
  const r = ds.assign(key('live'), undefined, 1);
  assert.equal(r.kind === 'existing' && r.allocation.ipv4, IP);
  assert.deepEqual(ds.pendingAllocations(), []);
});

test('a DEL rolled back onto an IP whose unassign is in flight is put back (and follows EC2)', () => {
  const ds = store();
  const a = ds.assign(key('a'), undefined, 0);
  assert.equal(a.kind, 'assigned');
  const released = ds.unassign(key('a'), 1)!;
  ds.reserveForRelease('eni-1', 1, 1);
  ds.markReleaseSent([IP]);
  assert.equal(ds.rollbackUnassign(released), true);
  assert.equal(ds.holderOf(IP)?.containerID, 'a');
  assert.equal(ds.wasUnassigned('a'), false, 'the DEL did not happen');
});

test('completeRelease of an unheld IP just removes it; nothing is reported', () => {
  const ds = store();
  ds.reserveForRelease('eni-1', 1, 0);
  ds.markReleaseSent([IP]);
  assert.deepEqual(ds.completeRelease([IP, '10.0.0.199']), []);
  assert.deepEqual(ds.eniIps('eni-1'), []);
  assert.deepEqual(ds.pendingAllocations(), []);
});

test('decideSend: frozen releases or demand return the whole reservation', () => {
  const ds = store();
  const gate = new ReleaseGate();
  ds.reserveForRelease('eni-1', 1, 0);
  assert.deepEqual(
    decideSend([IP], ipOps(ds), gate, () => 'an ADD is waiting'),
    { kind: 'cancelled', why: 'an ADD is waiting' },
  );
  assert.equal(ds.ipState(IP, 0), 'available');
  ds.reserveForRelease('eni-1', 1, 0);
  gate.freeze('cri', 'down');
  assert.deepEqual(
    decideSend([IP], ipOps(ds), gate, () => undefined),
    { kind: 'cancelled', why: 'releases frozen' },
  );
  assert.equal(ds.ipState(IP, 0), 'available');
});

test('prefixes: an adoption before the send keeps the whole /28 out of the call; after the send, EC2 decides', () => {
  const ds = new Datastore(0, 'prefix');
  ds.upsertEni(eni('eni-0', 0));
  ds.addPrefixes('eni-0', [P]);
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 1, 0), [P]);
  assert.equal(ds.restoreAllocation(adopted('live', '10.0.0.37')), 'restored');
  assert.deepEqual(ds.markPrefixReleaseSent([P]), [], 'a prefix with an address in use is never sent');
  assert.equal(ds.counts(0).releasing, 0, 'the rest of the reservation went back to the pool');
  assert.equal(ds.counts(0).available, 15);

  ds.unassign(key('live'), 1);
  assert.deepEqual(ds.reservePrefixesForRelease('eni-0', 1, 2), [P]);
  assert.deepEqual(ds.markPrefixReleaseSent([P]), [P]);
  assert.equal(ds.restoreAllocation(adopted('late', '10.0.0.40')), 'releasing');
  const lost = ds.completePrefixRelease([P]);
  assert.deepEqual(
    lost.map((a) => a.containerID),
    ['late'],
  );
  assert.deepEqual(ds.eniPrefixes('eni-0'), [], 'EC2 took the prefix: all 16 addresses are gone');
  assert.equal(ds.counts(3).total, 0);
  assert.deepEqual(
    ds.pendingAllocations().map((a) => a.ipv4),
    ['10.0.0.40'],
  );
});

test('wasUnassigned: set by a release (also of a key holding nothing), cleared by an assignment, bounded', () => {
  const ds = store();
  assert.equal(ds.wasUnassigned('a'), false);
  ds.unassign(key('a'), 0);
  assert.equal(ds.wasUnassigned('a'), true, 'a DEL before the ADD counts too');
  ds.assign(key('a'), undefined, 1);
  assert.equal(ds.wasUnassigned('a'), false);
  ds.unassign(key('a'), 2);
  assert.equal(ds.wasUnassigned('a'), true);
  for (let i = 0; i < RELEASED_CONTAINERS_KEPT; i++) ds.unassign(key(`c${i}`), 3);
  assert.equal(ds.wasUnassigned('a'), false, 'the oldest is forgotten first');
  assert.equal(ds.wasUnassigned(`c${RELEASED_CONTAINERS_KEPT - 1}`), true);
});

test('merge: a sandbox whose DEL was served is neither adopted nor a conflict, even once its IP went to another pod', () => {
  const sandbox = { id: 'gone', podName: 'pod-gone', podNamespace: 'default', podUid: 'uid-gone', ip: IP };
  const base = {
    kube: { ok: 'absent' as const },
    kernel: { ok: true as const, podIps: new Set<string>(), podVeths: 0 },
    now: 100,
    graceMs: 60_000,
    networkName: 'aws-cni',
    ifName: 'eth0',
    isOurIp: () => true,
    cri: { ok: true as const, items: [sandbox] },
    wasUnassigned: (id: string) => id === 'gone',
  };
  const free = mergeEvidence({ ...base, allocations: [], holderOf: () => undefined });
  assert.deepEqual(free.adopt, []);
  assert.deepEqual(
    free.stale.map((s) => s.id),
    ['gone'],
  );
  const next: Allocation = { ...key('next'), ipv4: IP, eniId: 'eni-1', allocatedAt: 90 };
  const reused = mergeEvidence({ ...base, allocations: [next], holderOf: () => next });
  assert.deepEqual(reused.conflicts, []);
  assert.deepEqual(
    reused.live.map((a) => a.containerID),
    ['next'],
  );
  // Without a served DEL the same sandbox is adopted, as before.
  const live = mergeEvidence({ ...base, wasUnassigned: () => false, allocations: [], holderOf: () => undefined });
  assert.deepEqual(
    live.adopt.map((a) => a.containerID),
    ['gone'],
  );
});

test('remembered DELs: exported for the checkpoint, restored (an allocation restored after wins), expired only when unlisted and old enough', () => {
  const ds = store();
  ds.unassign(key('a'), 10);
  ds.unassign(key('b'), 20);
  assert.deepEqual(ds.unassignedEntries(), [
    { containerID: 'a', releasedAt: 10 },
    { containerID: 'b', releasedAt: 20 },
  ]);
  const again = store();
  again.restoreUnassigned(ds.unassignedEntries());
  assert.equal(again.wasUnassigned('a'), true);
  assert.equal(again.wasUnassigned('b'), true);
  // Expiry: 'a' is no longer listed and old enough; 'b' is still listed (stopping); 'c' too young.
  again.unassign(key('c'), 100);
  assert.equal(again.expireUnassigned(new Set(['b']), 50), 1);
  assert.deepEqual(
    again.unassignedEntries().map((e) => e.containerID),
    ['b', 'c'],
  );
  // Bounded on restore too: the newest are kept.
  const many = Array.from({ length: RELEASED_CONTAINERS_KEPT + 5 }, (_, i) => ({
    containerID: `m${i}`,
    releasedAt: i,
  }));
  const big = store();
  big.restoreUnassigned(many);
  assert.equal(big.unassignedEntries().length, RELEASED_CONTAINERS_KEPT);
  assert.equal(big.wasUnassigned('m0'), false);
  assert.equal(big.wasUnassigned(`m${RELEASED_CONTAINERS_KEPT + 4}`), true);
});
