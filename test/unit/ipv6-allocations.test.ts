/**
 * The IPv6 allocations of a node (ipamd/datastore/ipv6-allocations.ts): /128s from the
 * /80, egress IPv4s from 169.254.172.0/22, cooldown, rollback, and the restore that
 * quarantines what does not belong to the node.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ipv6Allocations, parsePrefix80 } from '../../ipamd/datastore/ipv6-allocations.js';
import { ipv6CidrsDocument } from '../../ipamd/observability/introspect-ipv6.js';

const PREFIX = '2600:1f14:aa:bb00:1234::/80';
const key = (n: number) => ({ networkName: 'aws-cni', containerID: `c${n}`, ifName: 'eth0' });

test('the /80 must be an aligned IPv6 /80', () => {
  assert.throws(() => parsePrefix80('10.0.0.0/28'), /not an IPv6 CIDR/);
  assert.throws(() => parsePrefix80('2600:1f14::/64'), /not an IPv6 \/80 prefix/);
  assert.throws(() => parsePrefix80('2600:1f14:aa:bb00:1234:1::/80'), /host bits set/);
  assert.throws(() => new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: -1 }), RangeError);
});

test('ipv6 mode: each key gets a distinct /128 in the /80 and an egress IPv4; repeated ADD is the same', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const { allocation: a, existing } = v6.assign(key(i), undefined, 0, 1000);
    assert.equal(existing, false);
    assert.ok(v6.inPrefix(a.ipv6), a.ipv6);
    assert.match(a.egressV4, /^169\.254\.(17[2-5])\.\d+$/);
    assert.ok(!seen.has(a.ipv6) && !seen.has(a.egressV4));
    seen.add(a.ipv6).add(a.egressV4);
  }
  const again = v6.assign(key(7), undefined, 0, 2000);
  assert.equal(again.existing, true);
  assert.equal(again.allocation, v6.lookup(key(7)));
  assert.equal(v6.allocations().length, 200);
});

test('dual mode: no egress address', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: false, cooldownMs: 0 });
  assert.equal(v6.assign(key(1), undefined, 0, 0).allocation.egressV4, '');
});

test('a released address cools; the egress range honours the cooldown when it wraps', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  const first = v6.assign(key(0), undefined, 0, 0).allocation;
  assert.ok(v6.unassign(key(0), 10));
  assert.equal(v6.unassign(key(0), 10), undefined, 'nothing left to release');
  // 1,021 more keys use every other egress address; the 1,022nd finds only the cooling one.
  for (let i = 1; i < 1022; i++) v6.assign(key(i), undefined, 20, 0);
  assert.throws(() => v6.assign(key(5000), undefined, 20, 0), /no free IPv4 egress address/);
  const late = v6.assign(key(5000), undefined, 30_010, 0).allocation;
  assert.equal(late.egressV4, first.egressV4, 'usable again after the cooldown');
  assert.notEqual(late.ipv6, first.ipv6, 'the /128 cursor never goes back');
});

test('rollbacks undo assign and unassign', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  const a = v6.assign(key(1), undefined, 0, 0).allocation;
  v6.rollbackAssign(a);
  assert.equal(v6.lookup(key(1)), undefined);
  const b = v6.assign(key(2), undefined, 0, 0).allocation;
  const gone = v6.unassign(key(2), 5)!;
  v6.rollbackUnassign(gone);
  assert.deepEqual(v6.lookup(key(2)), b);
  assert.equal(v6.state(6).cooling.length, 0, 'rolled back: nothing cools');
});

test('state → restore round-trips; cursors continue where they were', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  for (let i = 0; i < 5; i++) v6.assign(key(i), { namespace: 'ns', name: `p${i}`, uid: `u${i}` }, 0, 1000);
  v6.unassign(key(4), 100);
  const saved = JSON.parse(JSON.stringify(v6.state(200)));
  const back = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  const r = back.restore(saved);
  assert.equal(r.restored.length, 4);
  assert.deepEqual(r.quarantined, []);
  assert.deepEqual(back.allocations(), v6.allocations());
  const next = back.assign(key(9), undefined, 300, 0).allocation;
  assert.ok(!v6.allocations().some((a) => a.ipv6 === next.ipv6 || a.egressV4 === next.egressV4));
  assert.equal(saved.cooling.length, 2, 'the released /128 and egress address still cool');
});

test('restore quarantines an address outside the /80, a bad egress address and a duplicate; never hands them out', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 0 });
  const inside = '2600:1f14:aa:bb00:1234::10';
  const r = v6.restore({
    allocations: [
      { ...key(1), ipv6: '2600:1f14:aa:bb00:9999::10', egressV4: '169.254.172.10', allocatedAt: 0 },
      { ...key(2), ipv6: '2600:1f14:aa:bb00:1234::20', egressV4: '10.0.0.1', allocatedAt: 0 },
      { ...key(3), ipv6: inside, egressV4: '169.254.172.11', allocatedAt: 0 },
      { ...key(4), ipv6: inside, egressV4: '169.254.172.12', allocatedAt: 0 },
    ],
    nextHost: '16',
    nextEgress: 10,
  });
  assert.deepEqual(
    r.restored.map((a) => a.containerID),
    ['c3'],
  );
  const q = new Map(r.quarantined.map((x) => [x.address, x.reason]));
  assert.match(q.get('2600:1f14:aa:bb00:9999::10')!, /outside the node's IPv6 prefix/);
  assert.match(q.get('169.254.172.10')!, /outside the node's IPv6 prefix/);
  assert.match(q.get('10.0.0.1')!, /outside 169\.254\.172\.0\/22/);
  assert.match(q.get('2600:1f14:aa:bb00:1234::20')!, /outside 169\.254\.172\.0\/22/);
  assert.match(q.get('169.254.172.12')!, /held by two attachments/);
  assert.equal(v6.lookup(key(4)), undefined, 'the duplicate is not held');
  // The cursor starts right on the quarantined egress address: it is skipped.
  for (let i = 10; i < 20; i++) {
    const a = v6.assign(key(i), undefined, 0, 0).allocation;
    assert.ok(!q.has(a.egressV4) && !q.has(a.ipv6), `${a.egressV4} ${a.ipv6} handed out`);
    assert.notEqual(a.ipv6, inside);
  }
});

test("introspection: the /80 as upstream's IPv6Cidrs entry, held and cooling /128s listed", () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  const a = v6.assign(key(1), { namespace: 'ns', name: 'web', uid: 'u' }, 0, Date.UTC(2026, 0, 2)).allocation;
  const b = v6.assign(key(2), undefined, 0, 0).allocation;
  v6.unassign(key(2), Date.UTC(2026, 0, 3));
  const doc = ipv6CidrsDocument(v6.state(Date.UTC(2026, 0, 3))) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  const e = doc['2600:1f14:aa:bb00:1234::/80'];
  assert.deepEqual(e.Cidr, {
    IP: '2600:1f14:aa:bb00:1234::',
    Mask: Buffer.from([...Array(10).fill(255), 0, 0, 0, 0, 0, 0]).toString('base64'),
  });
  assert.equal(e.IsPrefix, true);
  assert.equal(e.AddressFamily, '6');
  assert.deepEqual(e.IPAddresses[a.ipv6].IPAMMetadata, { k8sPodNamespace: 'ns', k8sPodName: 'web' });
  assert.equal(e.IPAddresses[a.ipv6].AssignedTime, '2026-01-02T00:00:00.000Z');
  assert.equal(e.IPAddresses[a.ipv6].IPAMKey.containerID, '', 'blanked as upstream');
  assert.equal(e.IPAddresses[b.ipv6].AssignedTime, '0001-01-01T00:00:00Z');
  assert.deepEqual(Object.keys(e.IPAddresses).length, 2, 'egress IPv4s are not listed under the /80');
});
