/**
 * Quarantine of an IP found in use at wiring time (docs/design.md#13-evidence-before-trust item 4): the datastore never
 * hands it out nor releases it until lifted, a clean evidence pass (verifyAll) does not
 * lift it, and the re-check lifts it only when the node no longer routes it (a failed
 * read lifts nothing).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import type { EniInfo } from '../../ipamd/datastore/types.js';
import { checkQuarantine } from '../../ipamd/controller/pool-loop/quarantine-check.js';

const eni: EniInfo = {
  eniId: 'eni-0',
  mac: '02:00:00:00:00:00',
  deviceNumber: 0,
  subnetId: 'subnet-1',
  subnetCidr: '10.0.0.0/24',
  primaryIp: '10.0.0.10',
  isPrimary: true,
  createdAtMs: 0,
  capacity: 9,
};
const key = (c: string) => ({ networkName: 'aws-cni', containerID: c, ifName: 'eth0' });
const log = pino({ level: 'silent' });

test('a quarantined IP is never assigned nor released; verifyAll keeps it; lift makes it available', () => {
  const ds = new Datastore(0);
  ds.upsertEni(eni);
  ds.addIps('eni-0', ['10.0.0.51', '10.0.0.52']);
  const b = ds.assign(key('b'), undefined, 1);
  assert.equal(b.kind === 'assigned' && b.allocation.ipv4, '10.0.0.51');
  ds.unassign(key('b'), 2);
  assert.equal(ds.quarantine('10.0.0.51', 2, 'test'), true);
  assert.equal(ds.quarantine('10.9.9.9', 2, 'test'), false, 'unknown IP');
  assert.equal(ds.ipState('10.0.0.51', 3), 'unverified');
  ds.verifyAll();
  assert.equal(ds.ipState('10.0.0.51', 3), 'unverified', 'a clean evidence pass does not lift a quarantine');
  assert.deepEqual(ds.reserveAllForRelease('eni-0', 3), ['10.0.0.52'], 'only the other IP may be released');
  ds.cancelRelease(['10.0.0.52']);
  const c = ds.assign(key('c'), undefined, 4);
  assert.equal(c.kind === 'assigned' && c.allocation.ipv4, '10.0.0.52');
  assert.equal(ds.assign(key('d'), undefined, 5).kind, 'empty', 'x is never handed out');
  assert.deepEqual(
    ds.quarantined().map((q) => [q.ip, q.since, q.reason]),
    [['10.0.0.51', 2, 'test']],
  );
  assert.equal(ds.liftQuarantine('10.0.0.51'), true);
  assert.equal(ds.liftQuarantine('10.0.0.51'), false);
  const d = ds.assign(key('d'), undefined, 6);
  assert.equal(d.kind === 'assigned' && d.allocation.ipv4, '10.0.0.51');
});

test('checkQuarantine lifts only what the node no longer routes; an unreadable kernel lifts nothing', async () => {
  const ds = new Datastore(0);
  ds.upsertEni(eni);
  ds.addIps('eni-0', ['10.0.0.51', '10.0.0.52']);
  ds.quarantine('10.0.0.51', 1, 'x');
  ds.quarantine('10.0.0.52', 1, 'y');
  let reads = 0;
  assert.deepEqual(
    await checkQuarantine({
      ds,
      log,
      read: async () => {
        reads++;
        throw new Error('nsenter failed');
      },
    }),
    [],
  );
  assert.equal(ds.quarantined().length, 2);
  assert.deepEqual(
    await checkQuarantine({
      ds,
      log,
      read: async (ips) => {
        reads++;
        assert.deepEqual(ips, ['10.0.0.51', '10.0.0.52']);
        return new Set(['10.0.0.52']);
      },
    }),
    ['10.0.0.51'],
  );
  assert.deepEqual(
    ds.quarantined().map((q) => q.ip),
    ['10.0.0.52'],
  );
  ds.liftQuarantine('10.0.0.52');
  assert.deepEqual(
    await checkQuarantine({
      ds,
      log,
      read: async () => {
        reads++;
        return new Set();
      },
    }),
    [],
  );
  assert.equal(reads, 2, 'nothing quarantined: no kernel read');
});
