/**
 * {@link SubnetPlacement}, the placement's I/O edge, over the simulator's EC2 model
 * in-process: which DescribeSubnets it makes (none without discovery or custom
 * networking, by subnet id for an ENIConfig, by VPC and zone for discovery, one per
 * cache period), what it does when the describe fails, and the exhausted marks' hooks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { MemoryEc2 } from '../../sim/memory-ec2.js';
import { SubnetPlacement } from '../../ipamd/controller/eni-lifecycle/subnet-placement-source.js';
import type { EniConfigSelection } from '../../ipamd/controller/eni-lifecycle/placement-types.js';

function world() {
  let t = 0;
  const clock = { now: () => t, advance: (ms: number) => void (t += ms) };
  const ec2 = new MemoryEc2({ clock, vpcCidr: '10.0.0.0/16' });
  ec2.model.addVpcCidr('100.64.0.0/16');
  const node = ec2.addSubnet('10.0.0.0/24');
  const cn1 = ec2.addSubnet('100.64.0.0/19');
  const cn2 = ec2.addSubnet('100.64.32.0/19');
  let selection: EniConfigSelection = { state: 'off' };
  const events: string[] = [];
  const placement = (discovery: boolean) =>
    new SubnetPlacement({
      ec2,
      node: {
        subnetId: node.subnetId,
        cidr: node.cidr,
        vpcId: ec2.state.vpcId,
        availabilityZone: node.availabilityZone,
        securityGroupIds: ['sg-primary'],
      },
      selection: () => selection,
      discovery,
      log: pino({ level: 'silent' }),
      now: clock.now,
      onExhausted: (id, on) => events.push(`${id}=${on ? 1 : 0}`),
    });
  return {
    ec2,
    clock,
    node,
    cn1,
    cn2,
    events,
    placement,
    select: (s: EniConfigSelection) => void (selection = s),
  };
}

test('no DescribeSubnets with discovery and custom networking off; one per cache period with discovery', async () => {
  const w = world();
  const off = w.placement(false);
  for (let i = 0; i < 3; i++) assert.ok((await off.plan()).ok);
  assert.equal(w.ec2.count('DescribeSubnets'), 0);
  const on = w.placement(true);
  await on.plan();
  await on.plan();
  assert.equal(w.ec2.count('DescribeSubnets'), 1, 'cached');
  assert.deepEqual(w.ec2.calls.at(-1)!.args[0], {
    'vpc-id': [w.ec2.state.vpcId],
    'availability-zone': [w.node.availabilityZone],
  });
  w.clock.advance(5_000);
  await on.plan();
  assert.equal(w.ec2.count('DescribeSubnets'), 2, 'described again after 5 s');
});

test('custom networking: describes the ENIConfig subnets by id; a failed describe keeps CIDRs known before', async () => {
  const w = world();
  w.select({
    state: 'ok',
    name: 'us-west-2a',
    selectedBy: 'label k8s.amazonaws.com/eniConfig=us-west-2a',
    subnetIds: [w.cn1.subnetId, w.cn2.subnetId],
    securityGroupIds: ['sg-a', 'sg-b'],
  });
  const p = w.placement(true);
  w.ec2.failNext('DescribeSubnets', { code: 'UnauthorizedOperation' });
  const blind = await p.plan();
  assert.ok(!blind.ok && blind.kind === 'unavailable', 'never described: no CIDR, nothing to create in');
  w.clock.advance(5_000);
  const plan = await p.plan();
  assert.ok(plan.ok);
  assert.deepEqual(w.ec2.calls.at(-1)!.args[0], { 'subnet-id': [w.cn1.subnetId, w.cn2.subnetId] });
  assert.deepEqual(
    plan.candidates.map((c) => [c.subnetId, c.cidr, c.securityGroupIds.join('+')]),
    [
      [w.cn1.subnetId, '100.64.0.0/19', 'sg-a+sg-b'],
      [w.cn2.subnetId, '100.64.32.0/19', 'sg-a+sg-b'],
    ],
  );
  p.release(plan.candidates[0]!.subnetId);
  w.clock.advance(5_000);
  w.ec2.failNext('DescribeSubnets', { code: 'RequestLimitExceeded' });
  const stale = await p.plan();
  assert.ok(stale.ok, 'the CIDRs described before still serve');
  assert.equal(stale.candidates.length, 2);
  assert.equal(p.cidrOf(w.cn2.subnetId), '100.64.32.0/19');
});

test('a missing ENIConfig: no DescribeSubnets, a blocking plan naming it', async () => {
  const w = world();
  w.select({ state: 'missing', name: 'us-west-2z', selectedBy: 'default', reason: 'ENIConfig not found' });
  const plan = await w.placement(true).plan();
  assert.ok(!plan.ok && plan.kind === 'eniconfig');
  assert.match(plan.reason, /us-west-2z/);
  assert.equal(w.ec2.count('DescribeSubnets'), 0);
});

test('exhausted marks: hook on mark and on expiry; a creation in the subnet ends the mark early', async () => {
  const w = world();
  const p = w.placement(false);
  p.markExhausted(w.node.subnetId, 'InsufficientFreeAddressesInSubnet');
  p.markExhausted(w.node.subnetId, 'InsufficientFreeAddressesInSubnet');
  assert.deepEqual(w.events, [`${w.node.subnetId}=1`], 'told once');
  assert.equal(p.isExhausted(w.node.subnetId), true);
  const plan = await p.plan();
  assert.ok(!plan.ok && /InsufficientFreeAddressesInSubnet for subnet-/.test(plan.reason));
  w.clock.advance(30_000);
  await p.plan();
  assert.deepEqual(w.events, [`${w.node.subnetId}=1`, `${w.node.subnetId}=0`]);
  p.markExhausted(w.node.subnetId, 'InsufficientCidrBlocks');
  p.noteCreated(w.node.subnetId, 10);
  assert.equal(p.isExhausted(w.node.subnetId), false);
});
