/**
 * The pool controller (controller/pool-loop/pool-controller.ts) over the in-memory EC2
 * (MemoryEc2) on virtual time (test/helpers/virtual-time.ts): the first step, the
 * coalescing of changes into one step per delay, ADDs waiting for a refill (woken, failed
 * at once when the pool cannot grow, timed out), the shrink hysteresis, the freeze, and
 * stop. Real grow/shrink executors, ENI manager and datastore; nothing waits on the wall clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PoolExhaustedError } from '../../ipamd/controller/pool-loop/pool-controller.js';
import { CHANGE_DELAY_MS, controllerKit as node, INTERVAL_MS, SHRINK_DELAY_MS } from '../helpers/controller-kit.js';

test('start: the first step fills the warm pool with one assign; the period re-evaluates', async (t) => {
  const n = node({ targets: { warmIpTarget: 3 } });
  t.after(() => n.pool.stop());
  assert.equal(n.pool.growBlockedReason()?.includes('not managed'), true, 'not started: not managed');
  n.pool.start();
  await n.vt.tick();
  assert.equal(n.available(), 3);
  assert.equal(n.ec2.count('AssignPrivateIpAddresses'), 1);
  assert.equal(n.steps, 1);
  await n.vt.tick(INTERVAL_MS);
  assert.equal(n.steps, 2, 'one step per period when nothing triggers one');
  assert.equal(n.ec2.count('AssignPrivateIpAddresses'), 1, 'a full pool calls no EC2');
});

test('changed: a burst of ADDs costs one step, due within the change delay, that refills', async (t) => {
  const n = node({ targets: { warmIpTarget: 2 } });
  t.after(() => n.pool.stop());
  n.pool.start();
  await n.vt.tick();
  const before = n.steps;
  n.addPod();
  n.pool.changed();
  n.addPod();
  n.pool.changed();
  await n.vt.tick(CHANGE_DELAY_MS - 1);
  assert.equal(n.steps, before, 'no step before the delay');
  assert.equal(n.available(), 0);
  await n.vt.tick(1);
  assert.equal(n.steps, before + 1, 'one step for both changes');
  assert.equal(n.available(), 2, 'refilled to the target');
});

test('an ADD on an empty pool waits for one coalesced refill that counts it, and is woken', async (t) => {
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0 } });
  t.after(() => n.pool.stop());
  n.pool.start();
  await n.vt.tick();
  assert.equal(n.available(), 0, 'no warm target: nothing assigned');
  const waits = [n.pool.waitForAddress(10_000), n.pool.waitForAddress(10_000)];
  assert.equal(n.pool.waiting, 2);
  await n.vt.tick();
  await Promise.all(waits);
  assert.equal(n.pool.waiting, 0);
  assert.equal(n.available(), 2, 'one address per waiting ADD');
  assert.equal(n.ec2.count('AssignPrivateIpAddresses'), 1, 'in one refill');
});

test('a refill that cannot succeed fails the waiting ADD at once, naming the limit', async (t) => {
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0, maxEni: 1 } });
  t.after(() => n.pool.stop());
  await n.fillPrimary();
  n.pool.start();
  await n.vt.tick();
  const start = n.vt.now();
  const wait = n.pool.waitForAddress(60_000);
  const failed = assert.rejects(
    wait,
    (e: unknown) => e instanceof PoolExhaustedError && /pool cannot grow/.test(e.message),
  );
  await n.vt.tick();
  await failed;
  assert.equal(n.vt.now() - start, 0, 'at once, not after the wait');
  assert.equal(n.pool.addFailureReason(), 'eni_limit');
  assert.ok(n.pool.growBlockedReason(), 'STATUS says why');
  // awscni_ipamd_error_count{fn="grow_eni_limit"}: the grow that stopped at the limit with an ADD to serve.
  assert.deepEqual(n.failedKinds, ['eni_limit']);
  // Later steps with no ADD to serve count nothing: a node at its limit is not an error by itself.
  await n.vt.tick(INTERVAL_MS * 3);
  assert.deepEqual(n.failedKinds, ['eni_limit'], 'counted once, for the failed ADD');
});

test('while EC2 refuses transiently, a waiting ADD times out after its wait with the last error', async (t) => {
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0 } });
  t.after(() => n.pool.stop());
  await n.fillPrimary();
  n.pool.start();
  await n.vt.tick();
  n.ec2.failNext('AssignPrivateIpAddresses', { code: 'RequestLimitExceeded' }, { count: 1000 });
  n.ec2.failNext('CreateNetworkInterface', { code: 'RequestLimitExceeded' }, { count: 1000 });
  const start = n.vt.now();
  const out: { err?: Error } = {};
  const wait = n.pool.waitForAddress(3_000).catch((e: Error) => void (out.err = e));
  await n.vt.tick(2_999);
  assert.equal(out.err, undefined, 'still waiting before its time');
  assert.ok(n.ec2.count('CreateNetworkInterface') >= 1, 'a new ENI was asked for');
  await n.vt.tick(1);
  await wait;
  const err = out.err as Error | undefined;
  assert.ok(err instanceof PoolExhaustedError, String(err));
  assert.match(err.message, /no free IP after waiting 3000 ms: .*RequestLimitExceeded/);
  assert.equal(n.vt.now() - start, 3_000);
  assert.equal(n.pool.addFailureReason(), 'throttled');
  assert.ok(n.failedKinds.includes('throttled'));
});

test('surplus is released only after the shrink delay, and never while releases are frozen', async (t) => {
  const n = node({ targets: { warmIpTarget: 2 } });
  t.after(() => n.pool.stop());
  n.pool.start();
  await n.vt.tick();
  for (let i = 0; i < 5; i++) {
    n.addPod();
    n.pool.changed();
    await n.vt.tick(CHANGE_DELAY_MS);
  }
  assert.equal(n.available(), 2);
  for (let i = 1; i <= 5; i++) n.delPod(`c${i}`);
  n.gate.freeze('cri', 'unreadable');
  n.pool.changed();
  await n.vt.tick(SHRINK_DELAY_MS + 2 * INTERVAL_MS);
  assert.equal(n.ec2.count('UnassignPrivateIpAddresses'), 0, 'frozen: nothing given back');
  assert.equal(n.available(), 7);
  n.gate.lift('cri');
  await n.vt.tick(INTERVAL_MS);
  const first = n.ec2.count('UnassignPrivateIpAddresses');
  await n.vt.tick(SHRINK_DELAY_MS - INTERVAL_MS * 2);
  assert.equal(n.ec2.count('UnassignPrivateIpAddresses'), first, 'not before the surplus persisted');
  await n.vt.tick(SHRINK_DELAY_MS);
  assert.equal(n.ec2.count('UnassignPrivateIpAddresses'), 1, 'then in one call');
  assert.equal(n.available(), 2, 'down to the target');
});

test('stop fails the waiting ADDs, refuses new ones, and no step runs after it', async (t) => {
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0, maxEni: 1 } });
  t.after(() => n.pool.stop());
  await n.fillPrimary();
  n.pool.start();
  await n.vt.tick();
  n.pool.refuseWaiting();
  await assert.rejects(n.pool.waitForAddress(1_000), /shutting down/);
  await n.pool.stop();
  const steps = n.steps;
  n.pool.trigger();
  n.pool.changed();
  await n.vt.tick(10 * INTERVAL_MS);
  assert.equal(n.steps, steps);
  assert.equal(n.vt.timers, 0, 'no timer left behind');
  assert.equal(n.pool.addFailureReason(), 'no_ip');
});

test('exclusive runs its work while no step runs; a step asked for meanwhile follows it', async (t) => {
  const n = node({ targets: { warmIpTarget: 2 } });
  t.after(() => n.pool.stop());
  n.pool.start();
  await n.vt.tick();
  const steps = n.steps;
  let stepsDuring = -1;
  await n.pool.exclusive(async () => {
    n.addPod();
    n.addPod();
    n.pool.trigger();
    await n.vt.tick();
    stepsDuring = n.steps - steps;
  });
  assert.equal(stepsDuring, 0, 'no step during the exclusive work');
  await n.vt.tick();
  assert.equal(n.steps, steps + 1);
  assert.equal(n.available(), 2);
});

test('a cordoned node (managementPaused): no grow, waiting ADDs fail at once with why, surplus IPs released but no ENI freed', async (t) => {
  let why: string | undefined;
  const n = node({ targets: { warmIpTarget: 2 }, minEniAgeMs: 0, managementPaused: () => why });
  t.after(() => n.pool.stop());
  n.pool.start();
  await n.vt.tick();
  // 10 pods: the primary ENI (9) and a second one.
  for (let i = 0; i < 10; i++) {
    n.addPod();
    n.pool.changed();
    await n.vt.tick(CHANGE_DELAY_MS);
    await n.pool.idle();
  }
  assert.equal(n.ec2.count('CreateNetworkInterface'), 1);
  why = 'node n1 is unschedulable and AWS_MANAGE_ENIS_NON_SCHEDULABLE is false';
  const grows = () => n.ec2.count('AssignPrivateIpAddresses') + n.ec2.count('CreateNetworkInterface');
  const before = grows();
  while (n.available() > 0) n.addPod();
  n.pool.changed();
  await n.vt.tick(INTERVAL_MS * 3);
  assert.equal(grows(), before, 'no assign or create while paused');
  const start = n.vt.now();
  const failed = assert.rejects(n.pool.waitForAddress(60_000), (e: unknown) => {
    assert.ok(e instanceof PoolExhaustedError);
    assert.match(e.message, /AWS_MANAGE_ENIS_NON_SCHEDULABLE/);
    return true;
  });
  await n.vt.tick();
  await failed;
  assert.equal(n.vt.now() - start, 0, 'at once');
  assert.equal(n.pool.addFailureReason(), 'no_ip');
  assert.equal(n.pool.growBlocked()?.kind, 'not_managed');
  // Every pod gone: the surplus IPs go back, the empty second ENI stays.
  for (const a of n.ds.allocations()) n.delPod(a.containerID);
  n.pool.changed();
  await n.vt.tick(SHRINK_DELAY_MS * 3);
  assert.ok(n.ec2.count('UnassignPrivateIpAddresses') >= 1, 'surplus IPs released');
  assert.equal(n.ec2.count('DetachNetworkInterface'), 0, 'no ENI freed while paused');
  why = undefined;
  await n.vt.tick(SHRINK_DELAY_MS * 3);
  await n.pool.idle();
  assert.equal(n.ec2.count('DetachNetworkInterface'), 1, 'freed once the node is schedulable again');
});
