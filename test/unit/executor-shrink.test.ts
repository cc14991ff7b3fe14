/**
 * The shrink executor's decisions against the simulator's EC2 model in-process (no HTTP,
 * virtual time): surplus released only after the hysteresis delay, never while releases
 * are frozen or demand came back, and UnassignPrivateIpAddresses (secondary IPs and /28
 * prefixes) failing as acted-then-5xx, 5xx-without-acting, acted-then-no-answer, a clear
 * refusal, or "not assigned" — the decisions ec2-unknown-outcome-shrink.test.ts proves
 * end to end over HTTP. An address whose release may have happened is never available.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { executorKit, type ExecutorKit } from '../helpers/executor-kit.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

const OUTCOMES = ['applied-5xx', 'not-applied-5xx', 'applied-no-answer'] as const;

/** A node with WARM_IP_TARGET=2 and 7 free secondary IPs on the primary ENI: 5 surplus. */
async function withSurplus(): Promise<ExecutorKit> {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  k.ds.addIps(k.primaryEniId, await k.ec2.assignIps(k.primaryEniId, 7));
  k.ec2.calls.length = 0;
  return k;
}

/** Runs shrink once to start the surplus clock, then again after the delay. */
async function shrinkAfterDelay(k: ExecutorKit, demand = () => false) {
  await k.shrinker.run(demand);
  k.clock.advance(1001);
  return k.shrinker.run(demand);
}

const onEc2 = (k: ExecutorKit) => k.ec2.state.enis.get(k.primaryEniId)!.secondaryIps;
const counts = (k: ExecutorKit) => k.ds.counts(k.clock.now());

test('surplus is released only after it persisted for the shrink delay, in one call', async () => {
  const k = await withSurplus();
  const first = await k.shrinker.run(() => false);
  assert.deepEqual(first.unassigned, [], 'not before the delay');
  assert.equal(k.ec2.count('UnassignPrivateIpAddresses'), 0);
  k.clock.advance(1001);
  const out = await k.shrinker.run(() => false);
  assert.equal(out.unassigned.length, 5);
  assert.equal(k.ec2.count('UnassignPrivateIpAddresses'), 1);
  assert.deepEqual(k.ds.eniIps(k.primaryEniId).sort(), [...onEc2(k)].sort());
  assert.equal(counts(k).available, 2);
});

test('frozen releases: nothing is unassigned; once lifted, the surplus goes', async () => {
  const k = await withSurplus();
  k.gate.freeze('cri', 'unreadable');
  const out = await shrinkAfterDelay(k);
  assert.deepEqual(out.unassigned, []);
  assert.equal(k.ec2.count('UnassignPrivateIpAddresses'), 0);
  k.gate.lift('cri');
  assert.equal((await k.shrinker.run(() => false)).unassigned.length, 5);
});

test('an ADD waiting cancels the shrink before the call: the reservation returns to the pool', async () => {
  const k = await withSurplus();
  const out = await shrinkAfterDelay(k, () => true);
  assert.match(out.cancelled ?? '', /ADD is waiting/);
  assert.equal(k.ec2.count('UnassignPrivateIpAddresses'), 0);
  assert.equal(counts(k).available, 7);
  assert.equal(counts(k).releasing, 0);
});

for (const outcome of OUTCOMES) {
  test(`UnassignPrivateIpAddresses (secondary IPs), ${outcome}: held back until a describe settles it, never handed out meanwhile`, async () => {
    const k = await withSurplus();
    k.ec2.failNext('UnassignPrivateIpAddresses', outcome);
    let held: string[] = [];
    k.ec2.during('DescribeNetworkInterfaces', () => {
      held = k.shrinker.unsettledIps();
      assert.equal(counts(k).releasing, 5, 'reserved until EC2 says: no ADD can take them');
      assert.equal(counts(k).available, 2);
    });
    const out = await shrinkAfterDelay(k);
    assert.deepEqual(out.unassigned, []);
    assert.equal(held.length, 5, 'the whole batch was unsettled');
    assert.equal(k.ec2.count('DescribeNetworkInterfaces'), 1, 'one describe of the ENI settled it');
    assert.deepEqual(k.shrinker.unsettledIps(), []);
    assert.equal(counts(k).releasing, 0);
    const still = new Set(onEc2(k));
    if (outcome === 'not-applied-5xx')
      assert.ok(
        held.every((ip) => still.has(ip)),
        'EC2 kept them',
      );
    else
      assert.ok(
        held.every((ip) => !still.has(ip)),
        'EC2 took them',
      );
    assert.deepEqual(k.ds.eniIps(k.primaryEniId).sort(), [...still].sort(), 'the datastore follows EC2');
  });
}

test('a clear refusal (4xx on the first attempt) returns the IPs to the pool at once, no describe', async () => {
  const k = await withSurplus();
  k.ec2.failNext('UnassignPrivateIpAddresses', { code: 'UnauthorizedOperation' });
  await shrinkAfterDelay(k);
  assert.deepEqual(k.shrinker.unsettledIps(), []);
  assert.equal(counts(k).available, 7);
  assert.equal(k.ec2.count('DescribeNetworkInterfaces'), 0);
});

test('InvalidParameterValue ("not assigned") or a 4xx after retries is settled by a describe, not trusted', async () => {
  for (const [fault, attempts] of [
    [{ code: 'InvalidParameterValue' }, 1],
    [{ code: 'InvalidParameterValue' }, 3],
  ] as const) {
    const k = await withSurplus();
    k.ec2.failNext('UnassignPrivateIpAddresses', fault, { attempts });
    await shrinkAfterDelay(k);
    assert.equal(k.ec2.count('DescribeNetworkInterfaces'), 1, `attempts ${attempts}: a describe decided`);
    assert.deepEqual(k.shrinker.unsettledIps(), []);
    assert.equal(counts(k).available, 7, 'EC2 still shows them: back in the pool');
  }
});

test('a failed describe settles nothing: the IPs stay held until EC2 answers', async () => {
  const k = await withSurplus();
  k.ec2.failNext('UnassignPrivateIpAddresses', 'applied-5xx');
  k.ec2.failNext('DescribeNetworkInterfaces', 'not-applied-5xx');
  await shrinkAfterDelay(k);
  assert.equal(k.shrinker.unsettledIps().length, 5);
  assert.equal(counts(k).releasing, 5);
  assert.equal(counts(k).available, 2);
  await k.shrinker.run(() => false);
  assert.equal(counts(k).releasing, 0);
  assert.deepEqual(k.ds.eniIps(k.primaryEniId).sort(), [...onEc2(k)].sort());
});

test('an IP adopted while its unassign is in flight, which EC2 then took: the allocation is kept, pending, and reported lost', async () => {
  const k = await withSurplus();
  await k.shrinker.run(() => false);
  k.clock.advance(1001);
  let adoptedIp = '';
  k.ec2.during('UnassignPrivateIpAddresses', () => {
    // The evidence pass finds a sandbox using one of the IPs being released.
    const sent = k.ds.eniIps(k.primaryEniId).find((ip) => k.ds.ipState(ip, k.clock.now()) === 'releasing')!;
    adoptedIp = sent;
    const r = k.ds.restoreAllocation({
      networkName: 'aws-cni',
      containerID: 'live',
      ifName: 'eth0',
      ipv4: sent,
      eniId: '',
      allocatedAt: k.clock.now(),
    });
    assert.notEqual(r, 'conflict');
  });
  const out = await k.shrinker.run(() => false);
  assert.deepEqual(
    out.lost.map((a) => a.ipv4),
    [adoptedIp],
  );
  assert.deepEqual(
    k.ds.pendingAllocations().map((a) => a.containerID),
    ['live'],
    'kept, flagged pending (ADD refused)',
  );
  assert.ok(!onEc2(k).includes(adoptedIp));
});

test('prefix delegation: a free /28 goes whole after the delay; an unknown outcome holds it until a describe', async () => {
  for (const outcome of [undefined, ...OUTCOMES]) {
    const k = executorKit({ targets: { unit: 'prefix', warmPrefixTarget: 1 } });
    k.ds.addPrefixes(k.primaryEniId, await k.ec2.assignPrefixes(k.primaryEniId, 3));
    k.ec2.calls.length = 0;
    if (outcome) k.ec2.failNext('UnassignPrivateIpAddresses', outcome);
    const out = await shrinkAfterDelay(k);
    const prefixesOnEc2 = () => k.ec2.state.enis.get(k.primaryEniId)!.ipv4Prefixes;
    if (!outcome) {
      assert.equal(out.unassigned.length, 2, 'two surplus /28s');
      assert.deepEqual(k.ds.eniPrefixes(k.primaryEniId), prefixesOnEc2());
      continue;
    }
    assert.equal(counts(k).releasing, 32, `${outcome}: both /28s held (no address of theirs available)`);
    assert.equal(counts(k).available, 16);
    await k.shrinker.run(() => false); // the next pass settles first
    assert.equal(k.ec2.count('DescribeNetworkInterfaces'), 1, `${outcome}: settled by one describe`);
    assert.equal(counts(k).releasing, 0, `${outcome}: settled`);
    assert.deepEqual(
      k.ds.eniPrefixes(k.primaryEniId).sort(),
      [...prefixesOnEc2()].sort(),
      `${outcome}: the datastore follows EC2`,
    );
  }
});
