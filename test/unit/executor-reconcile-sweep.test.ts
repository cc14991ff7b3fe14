/**
 * The ENI reconcile (datastore vs EC2 vs IMDS) and the leaked-ENI sweep against the
 * simulator's EC2 model in-process (no HTTP, virtual time): what each adopts, adds,
 * removes, keeps and deletes, and that a failed read decides nothing — the catch-up the
 * unknown-outcome integration tests rely on to converge.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { executorKit, T0, type ExecutorKit } from '../helpers/executor-kit.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

const TAG_INSTANCE = 'node.k8s.amazonaws.com/instance_id';

/** An ENI of ours created and attached behind ipamd's back (a crash between attach and adoption). */
async function strayAttached(
  k: ExecutorKit,
  p: { attach?: boolean; ips?: number; createdAt?: number } = {},
): Promise<string> {
  const eni = await k.ec2.createEni({
    subnetId: k.subnetId,
    description: `aws-K8S-${k.instanceId}`,
    secondaryCount: p.ips ?? 3,
    tags: {
      [TAG_INSTANCE]: k.instanceId,
      'node.k8s.amazonaws.com/createdAt': new Date(p.createdAt ?? T0).toISOString(),
    },
  });
  if (p.attach !== false) await k.ec2.attachEni(eni.eniId, k.instanceId, 1);
  k.ec2.calls.length = 0;
  return eni.eniId;
}

async function pass(k: ExecutorKit) {
  const r = await k.reconciler.runOnce();
  await k.reconciler.stop();
  return r;
}

test('reconcile adopts an attached ENI of ours the datastore lacks, once IMDS lists it, and sets DeleteOnTermination', async () => {
  const k = executorKit();
  const eniId = await strayAttached(k);
  k.imdsDown(true);
  let r = await k.reconciler.runOnce();
  assert.equal(r.imdsOk, false);
  assert.deepEqual(r.adoptedEnis, [], 'no adoption without IMDS');
  assert.deepEqual(r.pendingEnis, [eniId], 'pending: counted toward the ENI limit, not served');
  k.imdsDown(false);
  r = await pass(k);
  assert.deepEqual(r.adoptedEnis, [eniId]);
  assert.equal(k.ds.eniIps(eniId).length, 3);
  assert.deepEqual(r.deleteOnTerminationFixed, [eniId]);
  assert.equal(k.ec2.state.enis.get(eniId)!.attachment!.deleteOnTermination, true);
  assert.ok(k.triggers > 0, 'a pool step was asked for after adding addresses');
});

test('reconcile adds IPs EC2 shows that the datastore lacks; removes unheld ones EC2 lost; keeps and reports held ones', async () => {
  const k = executorKit();
  const ips = await k.ec2.assignIps(k.primaryEniId, 4);
  k.ds.addIps(k.primaryEniId, ips.slice(0, 2)); // two assigned behind the datastore's back
  const held = k.addPod();
  const unheld = k.ds.eniIps(k.primaryEniId).find((ip) => ip !== held)!;
  const primary = k.ec2.state.enis.get(k.primaryEniId)!;
  primary.secondaryIps = primary.secondaryIps.filter((ip) => ip !== held && ip !== unheld); // EC2 lost two
  const r = await pass(k);
  assert.equal(r.ok, true);
  assert.deepEqual(r.addedIps.sort(), ips.slice(2).sort());
  assert.deepEqual(r.removedIps, [unheld]);
  assert.deepEqual(r.heldMissing, [held], 'a held IP is never dropped');
  assert.ok(k.ds.eniIps(k.primaryEniId).includes(held));
});

test('a failed describe changes nothing', async () => {
  const k = executorKit();
  await strayAttached(k);
  k.ds.addIps(k.primaryEniId, ['10.0.0.200']); // not on EC2
  k.ec2.failNext('DescribeNetworkInterfaces', 'not-applied-5xx');
  const r = await pass(k);
  assert.equal(r.ok, false);
  assert.deepEqual(k.ds.eniIps(k.primaryEniId), ['10.0.0.200']);
  assert.equal(k.ds.listEnis().length, 1);
});

test("an ENI detached behind ipamd's back loses its unheld IPs; while detaching it is an orphan, deleted once available", async () => {
  const k = executorKit();
  const eniId = await strayAttached(k);
  await pass(k);
  assert.ok(k.ds.getEni(eniId));
  const eni = k.ec2.state.enis.get(eniId)!;
  eni.attachment!.status = 'detaching';
  eni.status = 'detaching';
  let r = await pass(k);
  assert.deepEqual(r.removedEnis, [eniId]);
  assert.deepEqual(k.enis.orphanIds(), [eniId]);
  assert.deepEqual(r.orphansDeleted, [], 'not while detaching');
  delete eni.attachment;
  eni.status = 'available';
  r = await pass(k);
  assert.deepEqual(r.orphansDeleted, [eniId]);
  assert.equal(k.ec2.state.enis.get(eniId), undefined);
});

test('reconcile adds a /28 prefix EC2 shows that the datastore lacks', async () => {
  const k = executorKit({ targets: { unit: 'prefix', warmPrefixTarget: 1 } });
  const [p] = await k.ec2.assignPrefixes(k.primaryEniId, 1);
  const r = await pass(k);
  assert.deepEqual(r.addedIps, [p]);
  assert.deepEqual(k.ds.eniPrefixes(k.primaryEniId), [p]);
});

test('sweep deletes an available ENI of ours once 5 minutes old; keeps it before', async () => {
  const k = executorKit();
  const eniId = await strayAttached(k, { attach: false });
  let r = await k.sweeper.runOnce();
  assert.deepEqual(r.deleted, []);
  assert.match(r.kept[0]?.why ?? '', /younger/);
  k.clock.advance(5 * 60_000);
  r = await k.sweeper.runOnce();
  assert.deepEqual(r.deleted, [eniId]);
  assert.equal(k.ec2.state.enis.get(eniId), undefined);
});

test('sweep decides nothing while frozen or when the describe fails; keeps busy and foreign ENIs', async () => {
  const k = executorKit();
  k.clock.advance(10 * 60_000);
  const leaked = await strayAttached(k, { attach: false });
  const foreign = await strayAttached(k, { attach: false });
  k.ec2.state.enis.get(foreign)!.tags[TAG_INSTANCE] = 'i-0someoneelse';
  k.gate.freeze('checkpoint', 'corrupt');
  assert.match((await k.sweeper.runOnce()).skipped ?? '', /frozen/);
  k.gate.lift('checkpoint');
  k.ec2.failNext('DescribeNetworkInterfaces', 'applied-no-answer');
  assert.match((await k.sweeper.runOnce()).skipped ?? '', /describe failed/);
  k.enis.markPending(leaked, 1);
  const r = await k.sweeper.runOnce();
  assert.deepEqual(r.deleted, []);
  assert.deepEqual(
    r.kept.map((x) => x.why),
    ['in use by this ipamd'],
    'the foreign ENI is not even listed (scope filter)',
  );
  assert.equal(k.ec2.count('DeleteNetworkInterface'), 0);
  assert.equal(k.ec2.state.enis.size, 3);
});

for (const outcome of ['applied-5xx', 'not-applied-5xx', 'applied-no-answer'] as const) {
  test(`sweep, DeleteNetworkInterface ${outcome}: reported failed; the next sweep finishes it`, async () => {
    const k = executorKit();
    k.clock.advance(10 * 60_000);
    const eniId = await strayAttached(k, { attach: false });
    k.ec2.failNext('DeleteNetworkInterface', outcome);
    let r = await k.sweeper.runOnce();
    assert.deepEqual(
      r.failed.map((f) => f.eniId),
      [eniId],
    );
    r = await k.sweeper.runOnce();
    assert.deepEqual(r.failed, []);
    assert.equal(k.ec2.state.enis.get(eniId), undefined);
  });
}

test('an ENI a failed CreateNetworkInterface left behind is swept once 5 minutes old, never served', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  await k.fillPrimary();
  k.ec2.failNext('CreateNetworkInterface', 'applied-5xx');
  await k.grow();
  const leaked = k.allEnis().find((e) => !e.attachment)!.networkInterfaceId;
  k.clock.advance(1001);
  await k.grow();
  await pass(k);
  assert.equal(k.ds.getEni(leaked), undefined);
  k.clock.advance(5 * 60_000);
  const r = await k.sweeper.runOnce();
  assert.deepEqual(r.deleted, [leaked]);
  assert.equal(k.allEnis().length, 2, 'the primary and the ENI that worked');
});

/** Lets queued promise jobs and immediates run (timers stay mocked). */
async function drain(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

test('reconcile start(delay): no pass before the delay, not even for a pending ENI; then one, then one per interval', async () => {
  const k = executorKit();
  const eniId = await strayAttached(k);
  k.reconciler.start(5000);
  k.enis.markPending(eniId, 1); // would schedule a quick retry (250 ms) without the start-up delay
  mock.timers.tick(4999);
  await drain();
  assert.equal(k.reconciler.passes, 0);
  mock.timers.tick(1);
  await drain();
  assert.equal(k.reconciler.passes, 1);
  assert.deepEqual(k.reconciler.last?.adoptedEnis, [eniId]);
  mock.timers.tick(60_000);
  await drain();
  assert.equal(k.reconciler.passes, 2, 'the periodic pass');
  await k.reconciler.stop();
  mock.timers.tick(600_000);
  await drain();
  assert.equal(k.reconciler.passes, 2, 'nothing after stop');
});
