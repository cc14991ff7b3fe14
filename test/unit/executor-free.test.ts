/**
 * Freeing an ENI (detach, wait until `available`, delete) against the simulator's EC2
 * model in-process (no HTTP, virtual time): what refuses a free, and
 * DetachNetworkInterface / DeleteNetworkInterface failing as acted-then-5xx,
 * 5xx-without-acting, acted-then-no-answer — the decisions the DetachNetworkInterface and
 * DeleteNetworkInterface cases of ec2-unknown-outcome-shrink.test.ts prove over HTTP.
 * Once a detach was sent the ENI is never served from again until EC2 shows it attached
 * and the ENI reconcile adopts it back.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { executorKit, type ExecutorKit } from '../helpers/executor-kit.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

const OUTCOMES = ['applied-5xx', 'not-applied-5xx', 'applied-no-answer'] as const;

/** A node whose second ENI (ours, 2 free IPs) is 2 minutes old; the call log emptied. */
async function withSpareEni(): Promise<{ k: ExecutorKit; eniId: string }> {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  await k.fillPrimary();
  await k.grow();
  const eniId = k.ds.listEnis().find((e) => !e.isPrimary)!.eniId;
  k.clock.advance(120_000);
  k.ec2.calls.length = 0;
  return { k, eniId };
}

const inEc2 = (k: ExecutorKit, eniId: string) => k.ec2.state.enis.get(eniId);

test('an empty ENI of ours is detached and deleted; it leaves the datastore', async () => {
  const { k, eniId } = await withSpareEni();
  assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000 }), true);
  assert.equal(inEc2(k, eniId), undefined, 'deleted in EC2');
  assert.equal(k.ds.getEni(eniId), undefined);
  assert.deepEqual(k.enis.orphanIds(), []);
  assert.equal(k.ec2.count('DetachNetworkInterface'), 1);
  assert.equal(k.ec2.count('DeleteNetworkInterface'), 1);
});

test('a free is refused while frozen, for a young ENI, the primary, one holding an address, or one not tagged ours', async () => {
  const { k, eniId } = await withSpareEni();
  const avail = () => k.ds.counts(k.clock.now()).available;
  const before = avail();
  k.gate.freeze('kube', 'unsynced');
  assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000 }), false, 'frozen');
  k.gate.lift('kube');
  assert.equal(await k.enis.free(eniId, { minAgeMs: 600_000 }), false, 'younger than the minimum age');
  assert.equal(await k.enis.free(k.primaryEniId, { minAgeMs: 0 }), false, 'the primary ENI');
  assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000, shouldCancel: () => true }), false, 'demand came back');
  delete inEc2(k, eniId)!.tags['node.k8s.amazonaws.com/instance_id'];
  assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000 }), false, 'not tagged as ours');
  assert.equal(k.ec2.count('DetachNetworkInterface'), 0, 'no detach was sent');
  assert.equal(avail(), before, 'every reservation returned to the pool');
  inEc2(k, eniId)!.tags['node.k8s.amazonaws.com/instance_id'] = k.instanceId;
  k.addPod();
  assert.ok(k.ds.eniIps(eniId).some((ip) => k.ds.ipState(ip, k.clock.now()) === 'assigned'));
  assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000 }), false, 'holds an address in use');
  assert.equal(k.ec2.count('DetachNetworkInterface'), 0);
});

test('a detach refused for sure (4xx) keeps the ENI served and throws', async () => {
  const { k, eniId } = await withSpareEni();
  k.ec2.failNext('DetachNetworkInterface', { code: 'UnauthorizedOperation' });
  await assert.rejects(k.enis.free(eniId, { minAgeMs: 60_000 }), /UnauthorizedOperation/);
  assert.ok(k.ds.getEni(eniId));
  assert.equal(k.ds.counts(k.clock.now()).releasing, 0);
  assert.deepEqual(k.enis.orphanIds(), []);
});

for (const outcome of OUTCOMES) {
  test(`DetachNetworkInterface, ${outcome}: the ENI is out of the pool at once; it is deleted, or adopted back if EC2 still shows it attached`, async () => {
    const { k, eniId } = await withSpareEni();
    k.ec2.failNext('DetachNetworkInterface', outcome);
    assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000 }), true);
    assert.equal(k.ds.getEni(eniId), undefined, 'never served from once a detach may have happened');
    if (outcome === 'not-applied-5xx') {
      assert.equal(inEc2(k, eniId)?.attachment?.status, 'attached', 'EC2 did not detach it');
      assert.deepEqual(k.enis.orphanIds(), [eniId], 'an orphan: waited out the settle timeout in virtual time');
      const r = await k.reconciler.runOnce();
      await k.reconciler.stop();
      assert.deepEqual(r.adoptedEnis, [eniId], 'the ENI reconcile adopts it back');
      assert.ok(k.ds.getEni(eniId));
      assert.deepEqual(k.enis.orphanIds(), []);
    } else {
      assert.equal(inEc2(k, eniId), undefined, 'detached, then deleted');
      assert.deepEqual(k.enis.orphanIds(), []);
    }
  });

  test(`DeleteNetworkInterface, ${outcome}: the orphan is deleted by a retry (NotFound on a repeat is success)`, async () => {
    const { k, eniId } = await withSpareEni();
    k.ec2.failNext('DeleteNetworkInterface', outcome);
    assert.equal(await k.enis.free(eniId, { minAgeMs: 60_000 }), true);
    assert.equal(k.ds.getEni(eniId), undefined);
    assert.deepEqual(k.enis.orphanIds(), [eniId], 'not deleted yet as far as ipamd knows');
    assert.equal(inEc2(k, eniId) === undefined, outcome !== 'not-applied-5xx');
    k.gate.freeze('cri', 'unreadable');
    assert.deepEqual(await k.enis.retryOrphans(), [], 'no retry while frozen');
    k.gate.lift('cri');
    assert.deepEqual(await k.enis.retryOrphans(), [eniId]);
    assert.equal(inEc2(k, eniId), undefined);
    assert.deepEqual(k.enis.orphanIds(), []);
  });
}

test('the shrink frees a whole surplus ENI only after the delay, within the same budget', async () => {
  const { k, eniId } = await withSpareEni();
  k.delPod('c1');
  k.delPod('c2');
  assert.equal((await k.shrinker.run(() => false)).freedEnis.length, 0, 'not before the delay');
  k.clock.advance(1001);
  const out = await k.shrinker.run(() => false);
  assert.deepEqual(out.freedEnis, [eniId]);
  assert.equal(inEc2(k, eniId), undefined);
});
