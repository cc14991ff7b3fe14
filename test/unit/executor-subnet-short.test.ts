/**
 * A nearly full subnet (docs/design.md#eni-ownership, "Placement and failover"): EC2
 * refuses an assign or creation batch whole when the subnet cannot fill all of it, so the
 * grow side cuts the batch down (eni-lifecycle/assign-shrink.ts) and serves from what the
 * subnet still has, instead of blocking the refill with addresses left. Against the
 * simulator's EC2 model in-process (its real subnet arithmetic: reserved addresses,
 * aligned /28 blocks), virtual time.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { Ec2Error } from '../../ipamd/cloud/ec2-port.js';
import { assignShrinking } from '../../ipamd/controller/eni-lifecycle/assign-shrink.js';
import { executorKit, type ExecutorKit } from '../helpers/executor-kit.js';
import { CNI_ROLE_TAG } from '../../ipamd/controller/eni-lifecycle/subnet-placement.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

function assertConverged(k: ExecutorKit): void {
  const c = k.compare();
  assert.deepEqual(c.ds, c.ec2, 'the datastore holds what EC2 shows on every ENI it serves from');
}

const short = (code = 'InsufficientCidrBlocks') => new Ec2Error('AssignPrivateIpAddresses', code, 'not enough', 400);

test('assignShrinking halves the count while the subnet is short, down to 1, and returns what EC2 took', async () => {
  const tried: number[] = [];
  const got = await assignShrinking(9, async (n) => {
    tried.push(n);
    if (n > 2) throw short('InsufficientFreeAddressesInSubnet');
  });
  assert.deepEqual(tried, [9, 4, 2]);
  assert.equal(got, 2);
});

test('assignShrinking throws the refusal of a batch of 1, and any other error at once', async () => {
  const tried: number[] = [];
  await assert.rejects(
    assignShrinking(3, async (n) => {
      tried.push(n);
      throw short();
    }),
    (e: Ec2Error) => e.code === 'InsufficientCidrBlocks',
  );
  assert.deepEqual(tried, [3, 1]);
  let calls = 0;
  await assert.rejects(
    assignShrinking(8, async () => {
      calls++;
      throw new Ec2Error('AssignPrivateIpAddresses', 'RequestLimitExceeded', 'slow down');
    }),
    /RequestLimitExceeded/,
  );
  assert.equal(calls, 1, 'a throttle is not a short subnet: no smaller retry');
});

test('prefixes: a pass asking for more /28s than the subnet has aligned blocks takes the ones left', async () => {
  // /26: of its four /28 blocks the first (AWS-reserved, the instance's IP) and the last cannot be delegated.
  const k = executorKit({ subnetCidr: '10.0.0.0/26', targets: { unit: 'prefix', warmPrefixTarget: 3 } });
  const first = await k.grow();
  assert.equal(first.changed, true, 'the pass served from the subnet instead of blocking');
  assert.equal(k.ds.eniPrefixes(k.primaryEniId).length, 1, '3 refused, 1 taken');
  await k.grow();
  assert.equal(k.ds.eniPrefixes(k.primaryEniId).length, 2, 'the last aligned block taken too');
  const last = await k.grow();
  assert.match(last.blocked ?? '', /InsufficientCidrBlocks/, 'only a refused batch of 1 blocks the refill');
  assert.equal(k.grower.lastErrorKind, 'subnet_full');
  assertConverged(k);
});

test('secondary IPs: a new ENI in a subnet short of its full count is created with fewer', async () => {
  // /27: 27 usable; the instance takes 1, the primary ENI 9; a foreign ENI takes 13 more: 4 left.
  const k = executorKit({ subnetCidr: '10.0.0.0/27', targets: { warmIpTarget: 9 } });
  await k.fillPrimary();
  const subnetId = k.ds.getEni(k.primaryEniId)!.subnetId;
  await k.ec2.createEni({ subnetId, description: 'someone else', tags: {}, secondaryCount: 12 });
  k.ec2.calls.length = 0;
  const out = await k.grow();
  const creates = k.ec2.calls.filter((c) => c.action === 'CreateNetworkInterface');
  assert.ok(creates.length >= 2, 'the full count was refused, then a smaller one asked for');
  const ours = k.attached().filter((e) => e.attachment!.deviceIndex > 0);
  assert.equal(ours.length, 1, 'the ENI was created and attached');
  assert.ok(ours[0]!.secondaryIps.length >= 1, `it holds ${ours[0]!.secondaryIps.length} secondary IPs`);
  assert.ok(k.ds.counts(k.clock.now()).available >= 1, 'served from');
  assert.equal(out.blocked, undefined);
  assertConverged(k);
});

test('discovery: a candidate short of the full count is passed over for the next; only the last gets a cut count', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 }, discovery: true });
  const big = k.ec2.addSubnet('10.0.2.0/23', { tags: { [CNI_ROLE_TAG]: '1' } });
  await k.fillPrimary();
  // Another node leaves the /23 (the most free in the describe) 2 addresses: an ENI there could hold just 1.
  k.ec2.during('DescribeSubnets', () => void k.ec2.model.occupy(big.subnetId, 2));
  k.ec2.calls.length = 0;
  await k.grow(1);
  const creates = k.ec2.calls
    .filter((c) => c.action === 'CreateNetworkInterface')
    .map((c) => {
      const req = c.args[0] as { subnetId: string; secondaryCount: number };
      return [req.subnetId, req.secondaryCount, c.error ?? 'ok'];
    });
  assert.deepEqual(creates, [
    [big.subnetId, 3, 'InsufficientFreeAddressesInSubnet'],
    [k.subnetId, 3, 'ok'],
  ]);
  assertConverged(k);
});

test('assignShrinking does not ask again smaller after a retried call whose outcome is unknown', async () => {
  const retried = short();
  retried.attempts = 2; // an earlier attempt may have assigned: the caller settles from EC2
  let calls = 0;
  await assert.rejects(
    assignShrinking(4, async () => {
      calls++;
      throw retried;
    }),
    (e: Ec2Error) => e === retried,
  );
  assert.equal(calls, 1);
});
