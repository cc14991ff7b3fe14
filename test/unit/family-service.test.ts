/**
 * The request path of a node serving IPv6 (ipamd/service/family-service.ts) over a real
 * datastore and pool controller on MemoryEc2, virtual time: `ipv6` mode serves /128s with
 * no EC2 call per pod; `dual` mode gives each key an IPv4 and an IPv6, releases both, and
 * never leaves one without the other when a write fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ipv6Allocations } from '../../ipamd/datastore/ipv6-allocations.js';
import { FamilyService } from '../../ipamd/service/family-service.js';
import { IpamService } from '../../ipamd/service/ipam-service.js';
import { IpamdFailure } from '../../ipamd/service/ipamd-failure.js';
import { controllerKit } from '../helpers/controller-kit.js';

const key = (n: number) => ({ networkName: 'aws-cni', containerID: `ctr-${n}`, ifName: 'eth0' });
const PREFIX = '2600:1f14:abc:de00:7::/80';

async function node(mode: 'ipv6' | 'dual') {
  const n = controllerKit({ cooldownMs: 30_000, targets: { warmIpTarget: 2 } });
  const fail = { v4: false, v6: false };
  let v6Writes = 0;
  const v4 = new IpamService({
    ds: n.ds,
    pool: n.pool,
    persist: async () => {
      if (fail.v4) throw new Error('v4 disk full');
    },
    log: n.log,
    addWaitTimeoutMs: 5_000,
    now: n.vt.now,
  });
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: mode === 'ipv6', cooldownMs: 30_000 });
  const svc = new FamilyService({
    mode,
    v6,
    v4,
    persistV6: async () => {
      if (fail.v6) throw new Error('v6 disk full');
      v6Writes++;
    },
    log: n.log,
    now: n.vt.now,
    wallNow: n.vt.now,
    released: () => n.ds.unassignedEntries(),
  });
  if (mode === 'dual') n.pool.start();
  await n.vt.tick();
  return { ...n, svc, v6, fail, v6Writes: () => v6Writes };
}

test('ipv6 mode: 100 pods churned with zero EC2 calls; each gets a /128 and an egress IPv4, durable first', async (t) => {
  const s = await node('ipv6');
  t.after(() => s.pool.stop());
  const before = s.ec2.count();
  for (let i = 0; i < 100; i++) {
    const r = await s.svc.add({ ...key(i) });
    assert.equal(r.existing, false);
    assert.equal(r.v4, undefined);
    assert.ok(s.v6.inPrefix(r.v6.ipv6));
    assert.match(r.v6.egressV4, /^169\.254\./);
    const d = await s.svc.del(key(i), 'pod-deleted');
    assert.equal(d.released, true);
    assert.equal(d.v6?.ipv6, r.v6.ipv6);
  }
  assert.equal(s.ec2.count() - before, 0, 'no EC2 call per pod');
  assert.equal(s.v6Writes(), 200);
  assert.deepEqual(await s.svc.del(key(1), 'again'), { released: false });
});

test('ipv6 mode: a failed write undoes the assignment and the release', async (t) => {
  const s = await node('ipv6');
  t.after(() => s.pool.stop());
  s.fail.v6 = true;
  await assert.rejects(s.svc.add(key(1)), (e: unknown) => e instanceof IpamdFailure && /undone/.test(e.message));
  assert.equal(s.svc.lookup(key(1)), undefined);
  s.fail.v6 = false;
  const a = await s.svc.add(key(1));
  s.fail.v6 = true;
  await assert.rejects(s.svc.del(key(1), 'x'), /release was undone/);
  assert.deepEqual(s.svc.lookup(key(1))?.v6, a.v6, 'still held: a retried DEL finds it');
});

test('dual mode: both families per key, released together', async (t) => {
  const s = await node('dual');
  t.after(() => s.pool.stop());
  const r = await s.svc.add(key(1));
  assert.ok(r.v4 && r.v4.allocation.ipv4);
  assert.equal(r.v6.egressV4, '', 'no egress address in dual mode');
  const seen = s.svc.lookup(key(1))!;
  assert.equal(seen.v4?.allocation.ipv4, r.v4.allocation.ipv4);
  const d = await s.svc.del(key(1), 'pod-deleted');
  assert.equal(d.v4?.allocation?.ipv4, r.v4.allocation.ipv4);
  assert.equal(d.v6?.ipv6, r.v6.ipv6);
  assert.equal(s.ds.lookup(key(1)), undefined);
  assert.equal(s.svc.lookup(key(1)), undefined);
});

test('dual mode: a half that fails gives the other new half back; a failed IPv4 release keeps the IPv6', async (t) => {
  const s = await node('dual');
  t.after(() => s.pool.stop());
  s.fail.v6 = true;
  await assert.rejects(s.svc.add(key(1)), /IPv6 checkpoint write failed/);
  assert.equal(s.ds.lookup(key(1)), undefined, 'the IPv4 went back: never one without the other');
  s.fail.v6 = false;
  const r = await s.svc.add(key(2));
  s.fail.v4 = true;
  await assert.rejects(s.svc.del(key(2), 'x'), /checkpoint write failed/);
  assert.equal(s.svc.lookup(key(2))?.v6.ipv6, r.v6.ipv6, 'IPv6 kept with its IPv4');
  assert.equal(s.ds.lookup(key(2))?.ipv4, r.v4!.allocation.ipv4);
  s.fail.v4 = false;
  assert.equal((await s.svc.del(key(2), 'retry')).released, true);
  // The halves are written together: an IPv4 half that fails gives the new IPv6 back, and that is written too.
  s.fail.v4 = true;
  const writes = s.v6Writes();
  await assert.rejects(s.svc.add(key(3)), /checkpoint write failed/);
  assert.equal(s.svc.lookup(key(3)), undefined, 'the IPv6 went back: never one without the other');
  assert.equal(s.v6.lookup(key(3)), undefined);
  assert.equal(s.v6Writes(), writes + 2, 'the assignment and its undoing were both written');
  s.fail.v4 = false;
});

test('sweep: a DEL that reached only the IPv4 datastore (the DEL spool) releases the IPv6 half; nothing else', async (t) => {
  for (const mode of ['ipv6', 'dual'] as const) {
    const s = await node(mode);
    t.after(() => s.pool.stop());
    const old = await s.svc.add(key(1));
    const kept = await s.svc.add(key(2));
    // A DEL of container 3 before it was ever added again: no IPv6 of a later ADD goes.
    s.ds.unassign(key(3), s.vt.now());
    await s.vt.tick(10);
    const later = await s.svc.add(key(3));
    assert.equal(await s.svc.sweepReleased(), 0, `${mode}: nothing released on no evidence`);
    // The spool applies a DEL of container 1 (ds.unassign, as spool-applier does).
    await s.vt.tick(10);
    s.ds.unassign(key(1), s.vt.now());
    assert.equal(await s.svc.sweepReleased(), 1, mode);
    assert.equal(s.svc.lookup(key(1)), undefined, `${mode}: the IPv6 half went with the IPv4 DEL`);
    assert.equal(s.svc.lookup(key(2))?.v6.ipv6, kept.v6.ipv6);
    assert.equal(s.svc.lookup(key(3))?.v6.ipv6, later.v6.ipv6, `${mode}: an older DEL never releases a newer ADD`);
    assert.notEqual(old.v6.ipv6, later.v6.ipv6);
  }
});
