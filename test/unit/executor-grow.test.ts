/**
 * The grow executor's decisions against the simulator's EC2 model in-process (no HTTP,
 * virtual time): assign on an ENI with room, new ENIs at their own device indexes, the
 * blocked refills (subnet full, attach limit), and the unknown outcomes of
 * AssignPrivateIpAddresses, CreateNetworkInterface and AttachNetworkInterface — acted
 * then 5xx, 5xx without acting, acted then no answer — the decisions the integration
 * tests ec2-unknown-outcome-grow.test.ts prove end to end over HTTP.
 *
 * Every case ends with what the datastore serves from equal to what EC2 shows.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { executorKit, type ExecutorKit } from '../helpers/executor-kit.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

const OUTCOMES = ['applied-5xx', 'not-applied-5xx', 'applied-no-answer'] as const;

function assertConverged(k: ExecutorKit, msg?: string): void {
  const c = k.compare();
  assert.deepEqual(c.ds, c.ec2, msg ?? 'the datastore holds what EC2 shows on every ENI it serves from');
}

test('grow assigns the missing addresses on the ENI with room, in one call', async () => {
  const k = executorKit({ targets: { warmIpTarget: 3 } });
  const out = await k.grow();
  assert.deepEqual(out, { changed: true });
  assert.equal(k.ec2.count('AssignPrivateIpAddresses'), 1);
  assert.equal(k.ec2.count('CreateNetworkInterface'), 0);
  assert.equal(k.ds.counts(k.clock.now()).available, 3);
  assertConverged(k);
  assert.deepEqual(await k.grow(), { changed: false }, 'at target: nothing to do');
  assert.equal(k.ec2.count('AssignPrivateIpAddresses'), 1);
});

test('grow creates a new ENI at the next device index once the primary is full, with DeleteOnTermination', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  await k.fillPrimary();
  await k.grow();
  const ours = k.attached().filter((e) => e.attachment!.deviceIndex > 0);
  assert.equal(ours.length, 1, 'one new ENI');
  assert.equal(ours[0]!.attachment!.deviceIndex, 1);
  assert.equal(ours[0]!.attachment!.deleteOnTermination, true);
  assert.equal(ours[0]!.tags['node.k8s.amazonaws.com/instance_id'], k.instanceId);
  assert.ok(k.ds.getEni(ours[0]!.networkInterfaceId), 'served from');
  assert.ok(k.ds.counts(k.clock.now()).available >= 2);
  assertConverged(k);
});

test('waiting ADDs count as demand: one pass plans for the targets plus every waiter', async () => {
  const k = executorKit({ targets: { warmIpTarget: 1 } });
  await k.grow(5);
  assert.equal(k.ec2.count('AssignPrivateIpAddresses'), 1, 'one batch');
  assert.equal(k.ds.counts(k.clock.now()).available, 6);
});

test('a full subnet blocks the refill with the reason and pauses grow, then grow resumes', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  const taken = k.ec2.model.occupy(k.ds.getEni(k.primaryEniId)!.subnetId);
  const out = await k.grow();
  assert.match(out.blocked ?? '', /subnet/);
  assert.equal(k.grower.lastErrorKind, 'subnet_full');
  const calls = k.ec2.count();
  assert.match((await k.grow()).blocked ?? '', /subnet/, 'still paused');
  assert.equal(k.ec2.count(), calls, 'no EC2 call while paused');
  k.ec2.model.releaseOccupied(k.ds.getEni(k.primaryEniId)!.subnetId, taken);
  k.clock.advance(30_001);
  assert.deepEqual(await k.grow(), { changed: true });
  assertConverged(k);
});

test('EC2 refusing an attach for the ENI limit blocks the refill and deletes the new, unattached ENI', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  await k.fillPrimary();
  k.ec2.failNext('AttachNetworkInterface', { code: 'AttachmentLimitExceeded' });
  await k.grow();
  assert.equal(k.grower.lastErrorKind, 'eni_limit');
  assert.equal(k.allEnis().length, 1, 'the new ENI was deleted again: only the primary is left');
  assert.match((await k.grow()).blocked ?? '', /AttachmentLimitExceeded/, 'creations held: the refill cannot succeed');
  assertConverged(k);
});

test('a throttled assign is a transient failure: waiters keep waiting, the next pass assigns', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  k.ec2.failNext('AssignPrivateIpAddresses', { code: 'RequestLimitExceeded' });
  const out = await k.grow(1);
  assert.deepEqual(out, { changed: false, failed: true });
  assert.equal(k.grower.lastErrorKind, 'throttled');
  assert.deepEqual(await k.grow(1), { changed: true });
  assert.equal(k.grower.lastError, undefined, 'cleared by a success');
});

for (const outcome of OUTCOMES) {
  test(`AssignPrivateIpAddresses (secondary IPs), ${outcome}: the datastore settles on what EC2 shows`, async () => {
    const k = executorKit({ targets: { warmIpTarget: 3 } });
    const t0 = k.clock.now();
    k.ec2.failNext('AssignPrivateIpAddresses', outcome);
    const out = await k.grow();
    assert.equal(out.failed, true, 'transient: not blocked');
    assert.equal(k.ec2.count('DescribeNetworkInterfaces'), 1, 'one describe settled the unknown outcome');
    assert.equal(k.ds.counts(k.clock.now()).total, outcome === 'not-applied-5xx' ? 0 : 3);
    if (outcome === 'applied-no-answer')
      assert.equal(k.clock.now() - t0, 10_000, 'the attempt timeout passed in virtual time');
    assertConverged(k);
    await k.grow();
    assert.equal(k.ds.counts(k.clock.now()).available, 3, 'the next pass asks only for what is missing');
    assertConverged(k);
  });

  test(`AssignPrivateIpAddresses (/28 prefixes), ${outcome}: a prefix EC2 assigned is known, none asked twice`, async () => {
    const k = executorKit({ targets: { unit: 'prefix', warmPrefixTarget: 1 } });
    k.ec2.failNext('AssignPrivateIpAddresses', outcome);
    await k.grow();
    const onEc2 = k.attached().flatMap((e) => e.ipv4Prefixes);
    assert.equal(onEc2.length, outcome === 'not-applied-5xx' ? 0 : 1);
    assert.deepEqual(k.ds.eniPrefixes(k.primaryEniId), onEc2);
    await k.grow();
    assert.equal(k.attached().flatMap((e) => e.ipv4Prefixes).length, 1, 'exactly one /28 in the end');
    assertConverged(k);
  });

  test(`CreateNetworkInterface, ${outcome}: an ENI EC2 made for a failed call is never served from; creation backs off`, async () => {
    const k = executorKit({ targets: { warmIpTarget: 2 } });
    await k.fillPrimary();
    k.ec2.failNext('CreateNetworkInterface', outcome);
    await k.grow();
    const leaked = k.allEnis().filter((e) => !e.attachment);
    assert.equal(
      leaked.length,
      outcome === 'not-applied-5xx' ? 0 : 1,
      'the ENI EC2 made is left unattached (for the sweep)',
    );
    assert.ok(
      leaked.every((e) => !k.ds.getEni(e.networkInterfaceId) && !k.enis.isBusy(e.networkInterfaceId)),
      'not served, not busy',
    );
    assert.equal(k.ec2.count('CreateNetworkInterface'), 1);
    await k.grow();
    assert.equal(k.ec2.count('CreateNetworkInterface'), 1, 'held by the 1 s back-off');
    k.clock.advance(1001);
    await k.grow();
    assert.equal(k.ec2.count('CreateNetworkInterface'), 2, 'one more, after the back-off');
    assert.equal(k.attached().length, 2);
    assertConverged(k);
  });
}

for (const outcome of ['applied-5xx', 'not-applied-5xx'] as const) {
  test(`AttachNetworkInterface, ${outcome}: the ENI is left pending at its device index (never a second ENI, never served before the reconcile)`, async () => {
    const k = executorKit({ targets: { warmIpTarget: 2 } });
    await k.fillPrimary();
    k.ec2.failNext('AttachNetworkInterface', outcome);
    await k.grow();
    const created = k.allEnis().find((e) => e.networkInterfaceId !== k.primaryEniId)!;
    assert.equal(!!created.attachment, outcome === 'applied-5xx');
    assert.deepEqual(k.enis.pendingIds(), [created.networkInterfaceId], 'pending: counted, not served');
    assert.equal(k.ds.getEni(created.networkInterfaceId), undefined);
    assert.equal(k.enis.firstFreeDeviceIndex(), 2, 'its device index stays taken');
    await k.grow();
    assert.equal(k.ec2.count('CreateNetworkInterface'), 1, 'no second ENI while one awaits adoption');
    // The ENI reconcile decides: attached → adopted; not attached → forgotten (the sweep deletes it).
    const r = await k.reconciler.runOnce();
    assert.equal(r.ok, true);
    if (outcome === 'applied-5xx') {
      assert.deepEqual(r.adoptedEnis, [created.networkInterfaceId]);
      assert.ok(k.ds.getEni(created.networkInterfaceId));
      assert.deepEqual(
        r.deleteOnTerminationFixed,
        [created.networkInterfaceId],
        'DeleteOnTermination set by the reconcile',
      );
    } else {
      assert.deepEqual(k.enis.pendingIds(), [], 'forgotten: EC2 does not show it attached');
      assert.equal(k.ds.getEni(created.networkInterfaceId), undefined);
    }
    await k.reconciler.stop();
    assertConverged(k);
  });
}

test('waiters that fit are not failed because the warm target cannot also fit (warm-eni at the ENI limit)', async () => {
  // m5.xlarge: 4 ENIs × 14 secondary IPs = 56; 50 waiting ADDs fit, 50 + a warm ENI (14) do not.
  const k = executorKit({ instanceType: 'm5.xlarge', targets: { warmEniTarget: 1 } });
  const out = await k.grow(50);
  assert.equal(out.blocked, undefined, 'only the warm surplus is short: no waiter may fail');
  assert.ok(k.ds.counts(k.clock.now()).available >= 50, 'every waiter is served');
  assertConverged(k);
  const k2 = executorKit({ instanceType: 'm5.xlarge', targets: { warmEniTarget: 1 } });
  assert.match((await k2.grow(60)).blocked ?? '', /MAX_ENI|ENI/, 'waiters beyond the instance are blocked');
});
