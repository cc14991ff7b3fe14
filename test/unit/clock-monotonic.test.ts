/**
 * Monotonic time for durations (docs/design.md#time), the pure parts: a cooldown restored
 * from a checkpoint written under a clock that ran ahead (the wall clock stepped back
 * across a restart) lasts at most its period; ipamd's duration clock does not follow `Date`
 * (stepped with node:test's mock timers, Date only); wallOf maps a monotonic reading to
 * the wall clock for people.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import type { EniInfo } from '../../ipamd/datastore/types.js';
import { monoNow, wallOf } from '../../ipamd/clock.js';
import { createThrottleWatch } from '../../ipamd/cloud/throttle-watch.js';

const HOUR = 3_600_000;
const eni: EniInfo = {
  eniId: 'eni-1',
  mac: '02:00:00:00:00:01',
  deviceNumber: 1,
  subnetId: 'subnet-1',
  subnetCidr: '10.0.0.0/24',
  primaryIp: '10.0.0.11',
  isPrimary: false,
  createdAtMs: 0,
  capacity: 9,
};

test('a restored cooldown stamped in the future lasts at most its period', () => {
  const period = 30_000;
  const now = 1_000_000_000;
  for (const ahead of [1, period, 3 * HOUR, 7 * 24 * HOUR]) {
    const ds = new Datastore(period);
    ds.upsertEni(eni);
    ds.addIps('eni-1', ['10.0.0.101']);
    ds.restoreCooldown('10.0.0.101', now + ahead, now);
    assert.equal(ds.ipState('10.0.0.101', now + period - 1), 'cooling', `${ahead} ms ahead: cools for the period`);
    assert.equal(ds.ipState('10.0.0.101', now + period), 'available', `${ahead} ms ahead: not a ms longer`);
  }
  const ds = new Datastore(period);
  ds.upsertEni(eni);
  ds.addIps('eni-1', ['10.0.0.101']);
  ds.restoreCooldown('10.0.0.101', now - 10_000, now);
  assert.equal(ds.ipState('10.0.0.101', now + period - 10_001), 'cooling', 'a past stamp keeps what is left');
  assert.equal(ds.ipState('10.0.0.101', now + period - 10_000), 'available');
});

test('the duration clock ignores wall-clock steps (Date mocked, stepped by hours)', (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  const m0 = monoNow();
  const w0 = Date.now();
  t.mock.timers.setTime(w0 - 5 * HOUR);
  const m1 = monoNow();
  assert.ok(m1 >= m0 && m1 - m0 < 1000, `monotonic after a 5 h backward step: +${m1 - m0} ms`);
  assert.ok(Math.abs(wallOf(m1) - Date.now()) < 1000, 'wallOf follows the (stepped) wall clock');
  t.mock.timers.setTime(w0 + 9 * HOUR);
  const m2 = monoNow();
  assert.ok(m2 >= m1 && m2 - m1 < 1000, `monotonic after a 9 h forward step: +${m2 - m1} ms`);
  const watch = createThrottleWatch();
  watch.observe()('AssignPrivateIpAddresses', 'RequestLimitExceeded', 5);
  t.mock.timers.setTime(w0 + 20 * HOUR);
  assert.equal(watch.throttledWithin(1000), true, 'a throttle just seen is recent whatever the wall clock says');
});
