/**
 * Placement and failover in the grow executor, against the simulator's EC2 model
 * in-process (virtual time): with subnet discovery, new ENIs land in the tagged subnet
 * with the most free addresses; a subnet EC2 calls full (a creation or an assign on an
 * existing ENI) is marked exhausted and the same grow pass goes on in the next subnet;
 * only when every candidate is exhausted is the refill blocked, naming them all.
 * DescribeSubnets stays at most one per ENI creation.
 *
 * Every case ends with what the datastore serves from equal to what EC2 shows.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { executorKit, type ExecutorKit } from '../helpers/executor-kit.js';
import { CNI_ROLE_TAG } from '../../ipamd/controller/eni-lifecycle/subnet-placement.js';
import { SubnetPlacement } from '../../ipamd/controller/eni-lifecycle/subnet-placement-source.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

const FULL = { code: 'InsufficientFreeAddressesInSubnet' } as const;

function assertConverged(k: ExecutorKit): void {
  const c = k.compare();
  assert.deepEqual(c.ds, c.ec2, 'the datastore holds what EC2 shows on every ENI it serves from');
}

/** A discovery node: the node subnet 10.0.0.0/24 (~250 free) plus tagged /23 (507 free) and /26 (59 free), and an untagged /22. */
function discoveryNode() {
  const k = executorKit({ targets: { warmIpTarget: 2 }, discovery: true });
  const tag = { [CNI_ROLE_TAG]: '1' };
  const big = k.ec2.addSubnet('10.0.2.0/23', { tags: tag });
  const small = k.ec2.addSubnet('10.0.4.0/26', { tags: tag });
  const untagged = k.ec2.addSubnet('10.0.8.0/22');
  return { k, big, small, untagged };
}

/** Every create or assign EC2 refused or made, as [subnet, count asked, error or 'ok']. */
function asked(k: ExecutorKit, action: 'CreateNetworkInterface' | 'AssignPrivateIpAddresses'): unknown[][] {
  return k.ec2.calls
    .filter((c) => c.action === action)
    .map((c) => {
      const a = c.args as unknown[];
      const req = a[0] as { subnetId?: string; secondaryCount?: number };
      const subnetId = action === 'CreateNetworkInterface' ? req.subnetId : k.ds.getEni(a[0] as string)?.subnetId;
      const count = action === 'CreateNetworkInterface' ? req.secondaryCount : a[1];
      return [subnetId, count, c.error ?? 'ok'];
    });
}

/** Subnet of each ENI we created (device index > 0), by device index. */
function landed(k: ExecutorKit): string[] {
  return k
    .attached()
    .filter((e) => e.attachment!.deviceIndex > 0)
    .sort((a, b) => a.attachment!.deviceIndex - b.attachment!.deviceIndex)
    .map((e) => e.subnetId);
}

test('discovery: new ENIs go to the tagged subnet with the most free addresses, with its CIDR in the datastore', async () => {
  const { k, big, untagged } = discoveryNode();
  await k.fillPrimary();
  await k.grow(12); // two ENIs' worth
  assert.deepEqual(
    landed(k),
    [big.subnetId, big.subnetId],
    'the /23 has the most free; the untagged /22 is never used',
  );
  assert.ok(!landed(k).includes(untagged.subnetId));
  for (const e of k.ds.listEnis().filter((x) => !x.isPrimary)) assert.equal(e.subnetCidr, '10.0.2.0/23');
  assert.ok(k.ec2.count('DescribeSubnets') <= k.ec2.count('CreateNetworkInterface'), 'at most one describe per ENI');
  assertConverged(k);
});

test('a creation EC2 refuses for a full subnet moves on to the next subnet in the same grow; not blocked', async () => {
  const { k, big } = discoveryNode();
  await k.fillPrimary();
  // Another node drains the /23 right after the placement's describe saw it roomy.
  k.ec2.during('DescribeSubnets', () => void k.ec2.model.occupy(big.subnetId));
  const out = await k.grow(1);
  assert.equal(out.blocked, undefined);
  assert.deepEqual(landed(k), [k.subnetId], 'the /23 refused: the node subnet (next most free) took the ENI');
  assert.equal(k.enis.placement.isExhausted(big.subnetId), true);
  assert.deepEqual(
    asked(k, 'CreateNetworkInterface'),
    [
      [big.subnetId, 3, FULL.code],
      [k.subnetId, 3, 'ok'],
    ],
    'a roomier candidate gets the full count before any count is cut',
  );
  assert.ok(k.ds.counts(k.clock.now()).available >= 1, 'the waiter is served');
  // After the mark expires the /23 is a candidate again.
  k.clock.advance(30_001);
  assert.equal(k.enis.placement.isExhausted(big.subnetId), false);
  assertConverged(k);
});

test('an assign on an existing ENI whose subnet is full leads to a new ENI in another subnet, in the same pass', async () => {
  const { k, big } = discoveryNode();
  k.ec2.model.occupy(k.subnetId); // the primary ENI's subnet: another user took every free address
  const out = await k.grow(3);
  assert.equal(out.blocked, undefined, 'not blocked: another subnet took the demand');
  assert.equal(out.changed, true);
  assert.deepEqual(landed(k), [big.subnetId]);
  assert.equal(k.enis.placement.isExhausted(k.subnetId), true, 'the node subnet is marked exhausted');
  assert.ok(k.ds.counts(k.clock.now()).available >= 3, 'the three waiters are served from the new ENI');
  const assigns = asked(k, 'AssignPrivateIpAddresses');
  assert.deepEqual(
    assigns.map(([, n]) => n),
    [5, 2, 1],
    'the refused batch of 5 was cut down to 1, then no further assign into the full subnet',
  );
  assert.ok(
    assigns.every(([, , e]) => e === FULL.code),
    JSON.stringify(assigns),
  );
  assertConverged(k);
});

test('a subnet a neighbour drains mid-burst: the burst goes on in the next subnet, nothing blocked', async () => {
  const { k, big, small } = discoveryNode();
  await k.fillPrimary();
  await k.grow(3);
  assert.deepEqual(landed(k), [big.subnetId]);
  // Another node takes every free address of the /23; the cached describe still shows it roomy.
  const s = k.ec2.state.subnets.get(big.subnetId)!;
  s.addresses.allocate(s.addresses.freeCount());
  const free = k.ds.counts(k.clock.now()).available;
  for (let i = 0; i < free; i++) k.addPod();
  // The ENI in the /23 has room left, but EC2 refuses the assign: that subnet is marked, a new ENI goes elsewhere.
  const out = await k.grow(6);
  assert.equal(out.blocked, undefined);
  assert.deepEqual(landed(k), [big.subnetId, k.subnetId], 'the next most free (node subnet, 250) over the /26 (59)');
  assert.ok(k.ds.counts(k.clock.now()).available >= 6);
  assert.equal(k.enis.placement.isExhausted(big.subnetId), true);
  assert.equal(k.enis.placement.isExhausted(small.subnetId), false);
  assert.ok(
    k.ec2.calls.some((c) => c.action === 'AssignPrivateIpAddresses' && c.error === FULL.code),
    'EC2 really refused (the model ran out)',
  );
  assertConverged(k);
});

test('every candidate exhausted: the refill is blocked with a reason listing each subnet; no EC2 call while paused', async () => {
  const { k, big, small } = discoveryNode();
  await k.fillPrimary();
  // Every tagged subnet and the node subnet drained right after the describe that found them roomy.
  const taken = new Map<string, string[]>();
  k.ec2.during('DescribeSubnets', () => {
    for (const id of [big.subnetId, small.subnetId, k.subnetId]) taken.set(id, k.ec2.model.occupy(id));
  });
  await k.grow(1);
  assert.deepEqual(landed(k), []);
  assert.equal(k.grower.lastErrorKind, 'subnet_full');
  const calls = k.ec2.count();
  const out = await k.grow(1);
  for (const id of [big.subnetId, small.subnetId, k.subnetId]) assert.match(out.blocked ?? '', new RegExp(id));
  assert.match(out.blocked ?? '', /^every eligible subnet has no free addresses: /);
  assert.equal(k.grower.blockedKindNow(1)?.kind, 'subnet_full');
  assert.equal(k.ec2.count(), calls, 'no EC2 call while every subnet is exhausted');
  for (const [id, ips] of taken) k.ec2.model.releaseOccupied(id, ips);
  k.clock.advance(30_001);
  await k.grow(1);
  assert.equal(landed(k).length, 1, 'the marks expired: the next grow creates the ENI');
  assertConverged(k);
});

test('without discovery the node subnet alone: a full subnet blocks with the single-subnet wording', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 } });
  const other = k.ec2.addSubnet('10.0.2.0/23', { tags: { [CNI_ROLE_TAG]: '1' } });
  await k.fillPrimary();
  k.ec2.model.occupy(k.subnetId);
  await k.grow(1);
  const out = await k.grow(1);
  assert.match(
    out.blocked ?? '',
    new RegExp(`^the subnet has no free addresses \\(EC2 ${FULL.code} for ${k.subnetId}\\); grow paused for 30 s$`),
  );
  assert.equal(k.ec2.count('DescribeSubnets'), 0, 'no DescribeSubnets without discovery');
  assert.ok(!k.allEnis().some((e) => e.subnetId === other.subnetId));
});

test('creations planned in parallel from one describe spread by most free; one DescribeSubnets for both', async () => {
  const k = executorKit({ targets: { warmIpTarget: 2 }, discovery: true });
  const tag = { [CNI_ROLE_TAG]: '1', other: 'x' };
  const a = k.ec2.addSubnet('10.0.64.0/26', { tags: tag }); // 59 free
  const b = k.ec2.addSubnet('10.0.65.0/26', { tags: tag });
  k.ec2.state.subnets.get(b.subnetId)!.addresses.allocate(4); // 55 free
  k.ec2.model.createTags([k.subnetId], { [CNI_ROLE_TAG]: '0' });
  const placement = new SubnetPlacement({
    ec2: k.ec2,
    node: {
      subnetId: k.subnetId,
      cidr: '10.0.0.0/24',
      vpcId: k.ec2.state.vpcId,
      availabilityZone: 'us-west-2a',
      securityGroupIds: [],
    },
    discovery: true,
    perEniAddresses: 10,
    log: k.log,
    now: k.clock.now,
  });
  const [p1, p2, p3] = await Promise.all([placement.plan(), placement.plan(), placement.plan()]);
  const first = (p: typeof p1) => (p.ok ? p.candidates[0]!.subnetId : p.reason);
  assert.deepEqual([first(p1), first(p2), first(p3)], [a.subnetId, b.subnetId, a.subnetId], '59 → 49 < 55 → 45 < 49');
  assert.equal(k.ec2.count('DescribeSubnets'), 1);
  for (const p of [p1, p2, p3]) placement.release(first(p));
  const again = await placement.plan();
  assert.equal(first(again), a.subnetId, 'released: the reservations are gone');
});

/** An ENI of ours in `subnetId`, created behind ipamd's back (crash after create/attach), optionally attached. */
async function strayIn(k: ExecutorKit, subnetId: string, attach: boolean): Promise<string> {
  const eni = await k.ec2.createEni({
    subnetId,
    description: `aws-K8S-${k.instanceId}`,
    secondaryCount: 3,
    tags: {
      'node.k8s.amazonaws.com/instance_id': k.instanceId,
      'node.k8s.amazonaws.com/createdAt': new Date(k.clock.now()).toISOString(),
    },
  });
  if (attach) await k.ec2.attachEni(eni.eniId, k.instanceId, 1);
  return eni.eniId;
}

test('an attached ENI of ours in another subnet is adopted by its tags, with its own subnet CIDR (from IMDS)', async () => {
  const k = executorKit();
  const other = k.ec2.addSubnet('10.0.64.0/19');
  const eniId = await strayIn(k, other.subnetId, true);
  const r = await k.reconciler.runOnce();
  await k.reconciler.stop();
  assert.deepEqual(r.adoptedEnis, [eniId]);
  const info = k.ds.getEni(eniId)!;
  assert.equal(info.subnetId, other.subnetId);
  assert.equal(info.subnetCidr, '10.0.64.0/19', "the ENI's own subnet CIDR, not the node subnet's");
  assert.equal(k.ds.eniIps(eniId).length, 3);
});

test('an ENI of ours in another subnet whose CIDR IMDS does not give yet stays pending: no guessed gateway', async () => {
  const k = executorKit();
  const other = k.ec2.addSubnet('10.0.64.0/19');
  const eniId = await strayIn(k, other.subnetId, true);
  const listed = k.imds.eniAddresses;
  k.imds.eniAddresses = async () => (await listed()).map((e) => (e.eniId === eniId ? { ...e, subnetCidr: '' } : e));
  const r1 = await k.reconciler.runOnce();
  assert.deepEqual(r1.adoptedEnis, [], 'not adopted with the node subnet as a guess');
  assert.equal(k.ds.getEni(eniId), undefined);
  k.imds.eniAddresses = listed;
  const r2 = await k.reconciler.runOnce();
  await k.reconciler.stop();
  assert.deepEqual(r2.adoptedEnis, [eniId]);
  assert.equal(k.ds.getEni(eniId)!.subnetCidr, '10.0.64.0/19');
});

test('the leaked-ENI sweep deletes a leaked ENI of ours in another subnet (scope is the VPC, not the subnet)', async () => {
  const k = executorKit();
  const other = k.ec2.addSubnet('10.0.64.0/19', { availabilityZone: 'us-west-2b' });
  const eniId = await strayIn(k, other.subnetId, false);
  k.clock.advance(5 * 60_000);
  const r = await k.sweeper.runOnce();
  assert.deepEqual(r.deleted, [eniId]);
  assert.equal(k.ec2.state.enis.get(eniId), undefined);
});

test('prefix delegation: new ENIs in a discovered subnet get /28 prefixes there', async () => {
  const k = executorKit({ targets: { unit: 'prefix', warmPrefixTarget: 1 }, discovery: true });
  const big = k.ec2.addSubnet('10.0.32.0/20', { tags: { [CNI_ROLE_TAG]: '1' } });
  k.ec2.model.createTags([k.subnetId], { [CNI_ROLE_TAG]: '0' });
  // Fill the primary ENI's slots so the next prefix needs a new ENI.
  const primarySlots = k.ipsPerEni;
  k.ds.addPrefixes(k.primaryEniId, await k.ec2.assignPrefixes(k.primaryEniId, primarySlots));
  for (let i = 0; i < primarySlots * 16; i++) k.addPod();
  await k.grow(1);
  await k.grow(1); // the kit's ENI manager creates with secondary IPs; the /28s come by assign on it
  const ours = k.attached().filter((e) => e.attachment!.deviceIndex > 0);
  assert.equal(ours.length, 1);
  assert.equal(ours[0]!.subnetId, big.subnetId);
  assert.ok(ours[0]!.ipv4Prefixes.length >= 1, 'a /28 on the new ENI');
  for (const p of ours[0]!.ipv4Prefixes) {
    const third = Number(p.split('.')[2]);
    assert.ok(third >= 32 && third < 48, `${p} is inside 10.0.32.0/20`);
  }
  assert.equal(k.ds.getEni(ours[0]!.networkInterfaceId)!.subnetCidr, '10.0.32.0/20');
  assertConverged(k);
});
