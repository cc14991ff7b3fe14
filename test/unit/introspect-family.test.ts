/**
 * ipamd's own introspection across IP families (observability/introspect-family.ts), pure:
 * `/v1/allocations` lists every attachment once with each address it holds, and the
 * `/v1/status` counts count IPv6 pods (docs/design.md#ip-families).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { familyAllocations, ipv6Counts, podCount } from '../../ipamd/observability/introspect-family.js';

const key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });
const v4 = (id: string, ip: string) => ({ ...key(id), ipv4: ip, eniId: 'eni-1', allocatedAt: 5 });
const v6 = (id: string, ip: string, egressV4 = '') => ({ ...key(id), ipv6: ip, egressV4, allocatedAt: 7 });

test('ipv4 mode: the IPv4 allocations as they are', () => {
  const a = [v4('a', '10.0.0.5')];
  assert.deepEqual(familyAllocations(a, undefined), a);
  assert.deepEqual(familyAllocations(a, []), a);
  assert.equal(podCount(a, undefined), 1);
});

test('ipv6 mode: each IPv6 attachment with its /128 and egress IPv4, no ipv4 field', () => {
  const six = [v6('a', '2600::a', '169.254.172.1'), v6('b', '2600::b', '169.254.172.2')];
  assert.deepEqual(familyAllocations([], six), [
    { ...key('a'), ipv6: '2600::a', egressV4: '169.254.172.1', allocatedAt: 7 },
    { ...key('b'), ipv6: '2600::b', egressV4: '169.254.172.2', allocatedAt: 7 },
  ]);
  assert.equal(podCount([], six), 2);
});

test('dual mode: one entry per key with both addresses; a key in one store only is still listed once', () => {
  const four = [v4('a', '10.0.0.5'), v4('c', '10.0.0.6')];
  const six = [v6('a', '2600::a'), v6('b', '2600::b')];
  const listed = familyAllocations(four, six);
  assert.deepEqual(
    listed.map((x) => [x.containerID, x.ipv4, x.ipv6]),
    [
      ['a', '10.0.0.5', '2600::a'],
      ['c', '10.0.0.6', undefined],
      ['b', undefined, '2600::b'],
    ],
  );
  assert.equal(podCount(four, six), 3);
  assert.ok(!('egressV4' in listed[2]!), 'no egress IPv4 in dual mode');
});

test('the IPv6 counts: /128s assigned, cooling and quarantined; cooling egress IPv4s are not /128s', () => {
  assert.deepEqual(
    ipv6Counts({
      prefix: '2600::/80',
      allocations: [v6('a', '2600::a')],
      cooling: [
        { address: '2600::c', releasedAt: 1 },
        { address: '169.254.172.9', releasedAt: 1 },
      ],
      quarantined: [{ address: '2600::q', reason: 'x' }],
    }),
    { prefix: '2600::/80', assigned: 1, cooling: 1, quarantined: 1 },
  );
});
