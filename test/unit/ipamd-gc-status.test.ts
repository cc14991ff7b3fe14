/**
 * ipamd's side of CNI GC and STATUS over a real datastore: GC releases exactly the
 * unlisted allocations of its network into cooldown, durably (rolled back when the
 * write fails); STATUS says whether an address can be had now, and why not (51).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { gcNetwork } from '../../ipamd/service/gc.js';
import { ipamStatus } from '../../ipamd/service/status.js';

const log = pino({ level: 'silent' });
const T0 = 1_700_000_000_000;

function store(): Datastore {
  const ds = new Datastore(30_000);
  ds.upsertEni({
    eniId: 'eni-1',
    mac: '02:00:00:00:00:01',
    deviceNumber: 1,
    subnetId: 's',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.4',
    isPrimary: false,
    createdAtMs: T0,
    capacity: 3,
  });
  ds.addIps('eni-1', ['10.0.0.10', '10.0.0.11', '10.0.0.12']);
  for (const [net, c] of [
    ['aws-cni', 'a'],
    ['aws-cni', 'b'],
    ['other', 'c'],
  ] as const)
    ds.assign({ networkName: net, containerID: c, ifName: 'eth0' }, undefined, T0);
  return ds;
}

test('GC releases the unlisted allocations of its network only, durably', async () => {
  const ds = store();
  let writes = 0;
  let triggered = 0;
  const deps = {
    ds,
    persist: async () => {
      writes++;
    },
    released: () => {
      triggered++;
    },
    log,
    now: () => T0 + 1,
    routeTableFor: () => 2,
  };
  const r = await gcNetwork(deps, 'aws-cni', [
    { containerID: 'a', ifName: 'eth0' },
    { containerID: 'zzz', ifName: 'eth0' },
  ]);
  assert.deepEqual(
    r.map((x) => [x.allocation.containerID, x.allocation.ipv4, x.routeTableId]),
    [['b', '10.0.0.11', 2]],
  );
  assert.deepEqual(
    ds
      .allocations()
      .map((a) => a.containerID)
      .sort(),
    ['a', 'c'],
  );
  assert.equal(ds.ipState('10.0.0.11', T0 + 2), 'cooling');
  assert.deepEqual([writes, triggered], [1, 1]);
  assert.deepEqual(
    await gcNetwork(deps, 'aws-cni', [{ containerID: 'a', ifName: 'eth0' }]),
    [],
    'nothing stale: no write',
  );
  assert.equal(writes, 1);
  // The same container id with another ifname is another attachment.
  assert.equal((await gcNetwork(deps, 'aws-cni', [{ containerID: 'a', ifName: 'net1' }])).length, 1);
});

test('GC rolls every release back when the checkpoint write fails', async () => {
  const ds = store();
  const deps = {
    ds,
    persist: async () => {
      throw new Error('disk full');
    },
    released: () => undefined,
    log,
    now: () => T0 + 1,
    routeTableFor: () => 2,
  };
  await assert.rejects(gcNetwork(deps, 'aws-cni', []), /could not persist the GC releases: disk full/);
  assert.equal(ds.allocations().length, 3);
});

test('STATUS: available, can grow, cooling soon, or 50 with the reason (existing pods unaffected, so not 51)', () => {
  const ds = store();
  const st = (blocked: string | undefined, now = T0 + 1, addWaitTimeoutMs = 10_000) =>
    ipamStatus({ ds, growBlockedReason: () => blocked, addWaitTimeoutMs, now: () => now });
  assert.equal(st('full').canServe, false);
  assert.deepEqual(st(undefined), { canServe: true, code: 0, message: 'no IP available now; the pool can grow' });
  const full = st('instance at MAX_ENI (3 ENIs) and every ENI holds its 5 secondary IPs');
  assert.deepEqual([full.canServe, full.code], [false, 50]);
  assert.match(
    full.message,
    /^no IP can be had now \(3 assigned, 0 cooling, 0 unverified of 3\) and the pool cannot grow: instance at MAX_ENI/,
  );
  ds.unassign({ networkName: 'aws-cni', containerID: 'a', ifName: 'eth0' }, T0 + 1);
  assert.equal(st('full', T0 + 2).code, 50, 'cooling for 30 s > the 10 s ADD wait');
  assert.deepEqual(
    [st('full', T0 + 25_000).canServe, st('full', T0 + 25_000).message],
    [true, 'no IP available now; a cooling IP is free in 5001 ms'],
  );
  assert.deepEqual(st('full', T0 + 40_000), { canServe: true, code: 0, message: '1 IPs available' });
});
