/**
 * The request path (service/ipam-service.ts) over a real datastore and pool controller on
 * the in-memory EC2, on virtual time: ADD and DEL made durable before they are answered,
 * a checkpoint write that fails undone (the address back, not cooling; the allocation back
 * for a DEL retried), repeated ADDs, DELs of nothing remembered once, a DEL for an IP
 * conflict quarantining the address, an ADD waiting for a refill, and the failures an ADD
 * reports. The checkpoint is a `persist` function the test controls.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEL_REASON_IP_CONFLICT } from '../../proto/ipam.js';
import { IpamdCause } from '../../proto/ipamd-cause.js';
import { PoolExhaustedError } from '../../ipamd/controller/pool-loop/pool-controller.js';
import { IpamService, NotReadyError, type AddFailureReason } from '../../ipamd/service/ipam-service.js';
import { IpamdFailure } from '../../ipamd/service/ipamd-failure.js';
import type { KitOptions } from '../helpers/executor-kit.js';
import { CHANGE_DELAY_MS, controllerKit } from '../helpers/controller-kit.js';

const COOLDOWN_MS = 30_000;
const key = (n: number) => ({ networkName: 'aws-cni', containerID: `ctr-${n}`, ifName: 'eth0' });
const pod = (n: number) => ({ namespace: 'default', name: `pod-${n}`, uid: `uid-${n}` });

/** A started node with WARM_IP_TARGET=2 and the service over it; `failWrites` makes the checkpoint fail. */
async function service(o: KitOptions & { addWaitTimeoutMs?: number } = {}) {
  const n = controllerKit({ cooldownMs: COOLDOWN_MS, targets: { warmIpTarget: 2 }, ...o });
  let writes = 0;
  let failWrites = false;
  const failures: Array<{ reason: AddFailureReason; noIp: boolean }> = [];
  const conflicts: string[] = [];
  const dels: string[] = [];
  const svc = new IpamService({
    ds: n.ds,
    pool: n.pool,
    persist: async () => {
      if (failWrites) throw new Error('disk full');
      writes++;
    },
    log: n.log,
    addWaitTimeoutMs: o.addWaitTimeoutMs ?? 5_000,
    now: n.vt.now,
    onAddFailed: (reason, noIp) => failures.push({ reason, noIp }),
    onConflict: (ip) => conflicts.push(ip),
    onDel: (reason) => dels.push(reason),
  });
  n.pool.start();
  await n.vt.tick();
  return {
    ...n,
    svc,
    failures,
    conflicts,
    dels,
    get writes() {
      return writes;
    },
    /** Pool steps run so far (the kit's counter; a spread would copy its value). */
    get steps() {
      return n.steps;
    },
    failWrites(on: boolean) {
      failWrites = on;
    },
  };
}

test('ADD assigns, is durable before it answers, and asks the pool for a refill; a repeated ADD gets the same IP', async (t) => {
  const s = await service();
  t.after(() => s.pool.stop());
  const r = await s.svc.add({ ...key(1), pod: pod(1) });
  assert.equal(r.existing, false);
  assert.equal(r.eni.eniId, s.primaryEniId);
  assert.equal(r.routeTableId, 254, 'the primary ENI routes through main');
  assert.equal(s.writes, 1);
  assert.equal(s.ds.ipState(r.allocation.ipv4, s.vt.now()), 'assigned');
  const again = await s.svc.add({ ...key(1), pod: pod(1) });
  assert.equal(again.existing, true);
  assert.equal(again.allocation.ipv4, r.allocation.ipv4);
  assert.equal(s.writes, 1, 'nothing new to write');
  await s.vt.tick(CHANGE_DELAY_MS);
  assert.equal(s.available(), 2, 'the pool refilled after the ADD');
  assert.deepEqual(s.svc.lookup(key(1))?.allocation.ipv4, r.allocation.ipv4);
});

test('ADD whose checkpoint write fails is undone: the IP is available again at once, not cooling', async (t) => {
  const s = await service();
  t.after(() => s.pool.stop());
  const before = s.available();
  s.failWrites(true);
  await assert.rejects(
    s.svc.add({ ...key(1), pod: pod(1) }),
    (e: unknown) => e instanceof IpamdFailure && e.ipamdCause === IpamdCause.Checkpoint && /undone/.test(e.message),
  );
  assert.equal(s.svc.lookup(key(1)), undefined, 'no allocation left');
  assert.equal(s.available(), before, 'the address is available, not cooling');
  assert.equal(s.ds.counts(s.vt.now()).cooling, 0);
  assert.deepEqual(s.failures, [{ reason: 'internal', noIp: false }]);
  s.failWrites(false);
  const r = await s.svc.add({ ...key(1), pod: pod(1) });
  assert.equal(r.existing, false, 'the retried ADD is a fresh assignment');
});

test('DEL releases into cooldown, durably; a DEL whose write fails puts the allocation back for the retry', async (t) => {
  const s = await service();
  t.after(() => s.pool.stop());
  const { allocation } = await s.svc.add({ ...key(1), pod: pod(1) });
  s.failWrites(true);
  await assert.rejects(
    s.svc.del(key(1), 'pod deleted'),
    (e: unknown) => e instanceof IpamdFailure && e.ipamdCause === IpamdCause.Checkpoint,
  );
  assert.equal(s.svc.lookup(key(1))?.allocation.ipv4, allocation.ipv4, 'still held: the runtime retries the DEL');
  assert.equal(s.ds.ipState(allocation.ipv4, s.vt.now()), 'assigned');
  s.failWrites(false);
  const writes = s.writes;
  const d = await s.svc.del(key(1), 'pod deleted');
  assert.equal(d.released, true);
  assert.equal(d.allocation?.ipv4, allocation.ipv4);
  assert.equal(s.writes, writes + 1);
  assert.equal(s.ds.ipState(allocation.ipv4, s.vt.now()), 'cooling');
  assert.deepEqual(s.dels, ['pod deleted', 'pod deleted']);
});

test('a DEL of nothing succeeds and is remembered durably once; a failed write of it still succeeds', async (t) => {
  const s = await service();
  t.after(() => s.pool.stop());
  assert.deepEqual(await s.svc.del(key(7), ''), { released: false });
  assert.equal(s.writes, 1, 'the remembered DEL is written');
  assert.ok(s.ds.wasUnassigned('ctr-7'));
  assert.deepEqual(await s.svc.del(key(7), ''), { released: false });
  assert.equal(s.writes, 1, 'already remembered: not written again');
  s.failWrites(true);
  assert.deepEqual(await s.svc.del(key(8), ''), { released: false }, 'a DEL of nothing never fails');
});

test('a DEL for an IP conflict quarantines the address: never handed out again until lifted', async (t) => {
  const s = await service({ cooldownMs: 0 });
  t.after(() => s.pool.stop());
  const { allocation } = await s.svc.add({ ...key(1), pod: pod(1) });
  await s.svc.del(key(1), DEL_REASON_IP_CONFLICT);
  assert.deepEqual(s.conflicts, [allocation.ipv4]);
  assert.equal(s.ds.ipState(allocation.ipv4, s.vt.now()), 'unverified');
  for (let i = 2; i < 8; i++) {
    const r = await s.svc.add({ ...key(i), pod: pod(i) });
    assert.notEqual(r.allocation.ipv4, allocation.ipv4);
    await s.vt.tick(CHANGE_DELAY_MS);
  }
});

test('an ADD for a restored address on no known ENI yet is refused as not ready', async (t) => {
  const s = await service();
  t.after(() => s.pool.stop());
  assert.equal(
    s.ds.restoreAllocation({ ...key(1), ipv4: '10.0.0.250', eniId: 'eni-later', allocatedAt: 0 }),
    'pending',
  );
  await assert.rejects(s.svc.add(key(1)), NotReadyError);
  assert.deepEqual(s.failures, [{ reason: 'not_ready', noIp: false }]);
});

test('an ADD on an empty pool waits for the refill it asked for, then is served', async (t) => {
  const s = await service({ targets: { warmIpTarget: 0, minimumIpTarget: 0 } });
  t.after(() => s.pool.stop());
  assert.equal(s.available(), 0);
  const adding = s.svc.add({ ...key(1), pod: pod(1) });
  await s.vt.tick();
  const r = await adding;
  assert.equal(r.existing, false);
  assert.equal(s.ec2.count('AssignPrivateIpAddresses'), 1);
  assert.equal(s.svc.status().canServe, true);
});

test('an ADD the pool cannot serve fails with the binding limit, as a lack of address', async (t) => {
  const s = await service({ targets: { warmIpTarget: 0, minimumIpTarget: 0, maxEni: 1 } });
  t.after(() => s.pool.stop());
  await s.fillPrimary();
  const adding = s.svc.add({ ...key(100), pod: pod(100) });
  const failed = assert.rejects(
    adding,
    (e: unknown) => e instanceof PoolExhaustedError && /cannot grow/.test(e.message),
  );
  await s.vt.tick();
  await failed;
  assert.deepEqual(s.failures, [{ reason: 'eni_limit', noIp: true }]);
  assert.equal(s.svc.status().canServe, false, 'STATUS says an ADD cannot be served');
});

test('an ADD that finds no address while addresses are held unverified says so', async (t) => {
  const s = await service({ targets: { warmIpTarget: 0, minimumIpTarget: 0, maxEni: 1 } });
  t.after(() => s.pool.stop());
  s.ds.addIps(s.primaryEniId, await s.ec2.assignIps(s.primaryEniId, 9));
  s.ds.markAllUnverified();
  s.gate.freeze('cri', 'runtime unreadable');
  const adding = s.svc.add(key(1));
  const failed = assert.rejects(
    adding,
    (e: unknown) => e instanceof IpamdFailure && e.ipamdCause === IpamdCause.Unverified && e.noAddress,
  );
  await s.vt.tick();
  await failed;
});

test('served ADDs and DELs ask for one pool step per delay, not one each; that step still refills the warm pool', async (t) => {
  const s = await service({ cooldownMs: 0, targets: { warmIpTarget: 4 } });
  t.after(() => s.pool.stop());
  assert.equal(s.available(), 4);
  const steps = s.steps;
  // 200 ADD+DEL pairs, each on its own turn of the event loop as RPCs arrive; no time passes.
  for (let i = 0; i < 200; i++) {
    await s.svc.add(key(i));
    await s.svc.del(key(i), 'test');
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(s.steps, steps, 'no step before the delay');
  await s.vt.tick(CHANGE_DELAY_MS);
  assert.equal(s.steps, steps + 1, 'one step for the 400 changes');
  // Three pods take three of the four warm addresses; only those ADDs ask for a step.
  const before = s.ds.counts(s.vt.now()).total;
  for (let i = 1000; i < 1003; i++) await s.svc.add(key(i));
  await s.vt.tick(CHANGE_DELAY_MS);
  assert.equal(s.steps, steps + 2);
  assert.equal(s.available(), 4, 'the warm pool refilled by the step the ADDs asked for');
  assert.ok(s.ds.counts(s.vt.now()).total > before);
});
