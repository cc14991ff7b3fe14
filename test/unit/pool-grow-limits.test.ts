/**
 * Which limit binds when the pool cannot grow (docs/design.md#10-the-warm-pool-at-depth item 2), the waiting-ADD queue
 * (FIFO wake-ups, no over-wake, failing only what nothing can serve) and the device
 * index bookkeeping that lets ENIs be created in parallel. Table-driven where it fits.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  growBlockedReason,
  subnetFullReason,
  type EniLimits,
  type EnisOutsidePool,
} from '../../ipamd/pool/grow-limits.js';
import type { PoolEniView, PoolTargets } from '../../ipamd/pool/types.js';
import { AddressWaiters, PoolExhaustedError } from '../../ipamd/controller/pool-loop/address-waiters.js';
import { EniBook } from '../../ipamd/controller/eni-lifecycle/eni-book.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';

const full = (d: number, cap = 9): PoolEniView => ({
  eniId: `eni-${d}`,
  deviceNumber: d,
  isPrimary: d === 0,
  createdAtMs: 0,
  capacity: cap,
  total: cap,
  assigned: cap,
  cooling: 0,
});
const none: EnisOutsidePool = { unmanaged: 0, pending: 0, orphans: 0, creating: 0 };
const m5: EniLimits = { instanceType: 'm5.large', instanceMaxEnis: 3, ipv4PerEni: 10 };
const T = (p: Partial<PoolTargets> = {}): PoolTargets => ({ warmEniTarget: 1, maxEni: 3, ...p });

test('growBlockedReason names the binding limit', () => {
  const rows: Array<[string, PoolEniView[], PoolTargets, EniLimits, EnisOutsidePool, RegExp]> = [
    [
      'instance limit, MAX_ENI unset',
      [full(0), full(1), full(2)],
      T(),
      m5,
      none,
      /^instance type m5\.large is at its ENI limit \(3 ENIs\) and every ENI holds its 9 secondary IPs \(Ipv4AddressesPerInterface 10, one of them the ENI's primary IP\)$/,
    ],
    [
      'MAX_ENI below the instance limit',
      [full(0), full(1)],
      T({ maxEni: 2 }),
      { ...m5, maxEniSetting: 2 },
      none,
      /^MAX_ENI=2 reached \(instance type m5\.large allows 3 ENIs\) and every ENI holds its 9 secondary IPs/,
    ],
    [
      'MAX_ENI above the instance limit: the instance binds',
      [full(0), full(1), full(2)],
      T(),
      { ...m5, maxEniSetting: 8 },
      none,
      /^instance type m5\.large is at its ENI limit \(3 ENIs; MAX_ENI=8\)/,
    ],
    [
      'MAX_ENI equal to the instance limit: the instance binds',
      [full(0), full(1), full(2)],
      T(),
      { ...m5, maxEniSetting: 3 },
      none,
      /^instance type m5\.large is at its ENI limit/,
    ],
    [
      'ENIs outside the pool use up the limit',
      [full(0)],
      T(),
      m5,
      { unmanaged: 1, pending: 1, orphans: 0, creating: 0 },
      /at its ENI limit \(3 ENIs\) \(of the 3 attached: 1 not managed by eni-ipam, 1 attached but not usable yet\) and every ENI/,
    ],
    [
      'no address per ENI for pods',
      [full(0, 0)],
      T(),
      { ...m5, instanceType: 'x1.tiny', ipv4PerEni: 1 },
      none,
      /^instance type x1\.tiny leaves no address per ENI for pods \(Ipv4AddressesPerInterface 1/,
    ],
    [
      'prefix delegation counts /28 prefixes',
      [0, 1, 2].map((d) => full(d, 144)),
      T({ unit: 'prefix' }),
      m5,
      none,
      /every ENI holds its 9 \/28 prefixes/,
    ],
    ['nothing discovered', [], T(), m5, none, /no ENI is known yet/],
  ];
  for (const [name, views, t, limits, outside, want] of rows)
    assert.match(growBlockedReason(views, t, limits, outside), want, name);
  assert.match(
    subnetFullReason('subnet-1', 'InsufficientFreeAddressesInSubnet', 30_000),
    /^the subnet has no free addresses \(EC2 InsufficientFreeAddressesInSubnet for subnet-1\); grow paused for 30 s$/,
  );
});

test('AddressWaiters: FIFO, one waiter per available address, no over-wake within a turn', async () => {
  let available = 0;
  const w = new AddressWaiters(
    () => available,
    () => 'last error',
    Date.now,
  );
  const order: number[] = [];
  const ps = [0, 1, 2, 3].map((i) => w.wait(5000).then(() => order.push(i)));
  assert.equal(w.size, 4);
  available = 2;
  assert.equal(w.wake(), 2);
  assert.equal(w.wake(), 0, 'the same 2 addresses are promised until the woken waiters ran');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [0, 1]);
  available = 1; // one more appeared after the first two were taken
  assert.equal(w.wake(), 1);
  available = 5;
  await new Promise((r) => setImmediate(r));
  assert.equal(w.wake(), 1);
  await Promise.all(ps);
  assert.deepEqual(order, [0, 1, 2, 3]);
});

test('AddressWaiters.fail keeps the oldest `spare` waiters and those a cooling IP will serve in time', async () => {
  const now = 1_000_000;
  const w = new AddressWaiters(
    () => 0,
    () => undefined,
    () => now,
  );
  const outcome: string[] = [];
  const track = (name: string, p: Promise<void>) =>
    p.then(
      () => outcome.push(`${name} ok`),
      (e: Error) => outcome.push(`${name} ${e instanceof PoolExhaustedError ? 'failed' : 'other'}`),
    );
  const a = track('a', w.wait(10_000));
  const b = track('b', w.wait(10_000));
  const c = track('c', w.wait(2_000));
  const d = track('d', w.wait(8_000));
  // 1 address on its way (spare), the next cooling IP ends in 5 s: a kept (spare), b and d wait for it, c (2 s left) fails.
  assert.equal(w.fail('the instance is full', now + 5_000, 1), 1);
  assert.equal(w.size, 3);
  assert.equal(w.fail('the instance is full'), 3);
  w.failAll(new Error('unused'));
  await Promise.all([a, b, c, d]);
  assert.deepEqual(outcome.sort(), ['a failed', 'b failed', 'c failed', 'd failed']);
});

test('EniBook: parallel reservations never share a device index; unmanaged, pending, orphans and reservations count toward the limit', () => {
  const ds = new Datastore(0);
  ds.upsertEni({
    eniId: 'eni-p',
    mac: 'm0',
    deviceNumber: 0,
    subnetId: 's',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.4',
    isPrimary: true,
    createdAtMs: 0,
    capacity: 9,
  });
  const book = new EniBook(ds, new Set([2]), Date.now);
  book.markPending('eni-lag', 3);
  book.markOrphan('eni-old', 5);
  const got = [book.reserveDeviceIndex(), book.reserveDeviceIndex(), book.reserveDeviceIndex()];
  assert.deepEqual(got, [1, 4, 6]);
  assert.equal(book.attachedCount(), 1 + 1 + 1 + 1 + 3);
  assert.equal(book.creatingCount(), 3);
  book.releaseDeviceIndex(4);
  assert.equal(book.reserveDeviceIndex(), 4, 'a released index is free again');
  assert.deepEqual(book.awaitingAdoption(), ['eni-lag']);
});
