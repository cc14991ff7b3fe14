/**
 * The simulated cloud's world for custom networking and subnet discovery, through the
 * unmodified `@aws-sdk/client-ec2` over HTTP and ipamd's own IMDS client: a VPC with a
 * secondary CIDR block, tagged subnets in several zones, DescribeSubnets filters and
 * per-subnet accounting, DescribeVpcs, security groups on created ENIs, subnet exhaustion
 * codes, and IMDS per-ENI subnet facts for an ENI in another subnet.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import {
  AttachNetworkInterfaceCommand,
  CreateTagsCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type EC2Client,
  type Filter,
} from '@aws-sdk/client-ec2';
import { ImdsClient } from '../../ipamd/cloud/imds.js';
import { SimCloud, stateToJson, type Instance, type Subnet } from '../../sim/index.js';
import { parseSubnetSpec, parseVpcCidrs } from '../../sim/subnet-spec.js';
import { ec2ClientFor, expectSdkError } from '../helpers/sim-fixture.js';
import { createEni, freeCount } from '../helpers/sim-eni.js';

process.removeAllListeners('warning');

const CNI = 'kubernetes.io/role/cni';

interface World {
  sim: SimCloud;
  ec2: EC2Client;
  inst: Instance;
  node: Subnet;
  /** 100.64.0.0/19, us-west-2a, cni=1 */
  a19: Subnet;
  /** 100.64.32.0/19, us-west-2b, cni=1 */
  b19: Subnet;
  /** 100.64.64.0/24, us-west-2a, cni=0 */
  aOff: Subnet;
}

async function world(t: TestContext): Promise<World> {
  const sim = new SimCloud({ seed: 7, secondaryVpcCidrs: ['100.64.0.0/16'] });
  await sim.start();
  const ec2 = ec2ClientFor(sim);
  t.after(async () => {
    ec2.destroy();
    await sim.stop();
  });
  const node = sim.addSubnet({ cidr: '10.0.0.0/24' });
  const a19 = sim.addSubnet({ cidr: '100.64.0.0/19', availabilityZone: 'us-west-2a', tags: { [CNI]: '1' } });
  const b19 = sim.addSubnet({ cidr: '100.64.32.0/19', availabilityZone: 'us-west-2b', tags: { [CNI]: '1', x: 'y' } });
  const aOff = sim.addSubnet({ cidr: '100.64.64.0/24', availabilityZone: 'us-west-2a', tags: { [CNI]: '0' } });
  const inst = sim.launchInstance({ instanceType: 'm5.large', subnetId: node.subnetId });
  return { sim, ec2, inst, node, a19, b19, aOff };
}

async function subnetIds(ec2: EC2Client, filters: Filter[], ids?: string[]): Promise<string[]> {
  const r = await ec2.send(new DescribeSubnetsCommand({ Filters: filters, ...(ids ? { SubnetIds: ids } : {}) }));
  return r.Subnets!.map((s) => s.SubnetId!).sort();
}

test('DescribeSubnets: vpc-id, availability-zone, subnet-id, tag:<key> and tag-key filters, SubnetId.N', async (t) => {
  const w = await world(t);
  const sorted = (...s: Subnet[]) => s.map((x) => x.subnetId).sort();
  const vpc = { Name: 'vpc-id', Values: [w.sim.state.vpcId] };
  assert.deepEqual(await subnetIds(w.ec2, [vpc]), sorted(w.node, w.a19, w.b19, w.aOff));
  assert.deepEqual(await subnetIds(w.ec2, [{ Name: 'vpc-id', Values: ['vpc-0nope'] }]), []);
  assert.deepEqual(
    await subnetIds(w.ec2, [vpc, { Name: 'availability-zone', Values: ['us-west-2a'] }]),
    sorted(w.node, w.a19, w.aOff),
  );
  // discovery's query: the node's VPC and zone, tagged cni=1
  assert.deepEqual(
    await subnetIds(w.ec2, [
      vpc,
      { Name: 'availability-zone', Values: ['us-west-2a'] },
      { Name: `tag:${CNI}`, Values: ['1'] },
    ]),
    sorted(w.a19),
  );
  assert.deepEqual(await subnetIds(w.ec2, [{ Name: `tag:${CNI}`, Values: ['0', '1'] }]), sorted(w.a19, w.b19, w.aOff));
  assert.deepEqual(await subnetIds(w.ec2, [{ Name: 'tag-key', Values: [CNI] }]), sorted(w.a19, w.b19, w.aOff));
  assert.deepEqual(await subnetIds(w.ec2, [{ Name: 'tag-key', Values: ['x'] }]), sorted(w.b19));
  assert.deepEqual(await subnetIds(w.ec2, [{ Name: 'subnet-id', Values: [w.b19.subnetId] }]), sorted(w.b19));
  assert.deepEqual(
    await subnetIds(w.ec2, [{ Name: 'availability-zone', Values: ['us-west-2b'] }], [w.a19.subnetId, w.b19.subnetId]),
    sorted(w.b19),
  );
  await expectSdkError(w.ec2.send(new DescribeSubnetsCommand({ SubnetIds: ['subnet-0ffffffffffffffff'] })), {
    name: 'InvalidSubnetID.NotFound',
    status: 400,
  });
  await expectSdkError(w.ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: 'colour', Values: ['red'] }] })), {
    name: 'InvalidParameterValue',
    status: 400,
  });
  // CreateTags on a subnet is seen by the filters
  await w.ec2.send(new CreateTagsCommand({ Resources: [w.node.subnetId], Tags: [{ Key: CNI, Value: '0' }] }));
  assert.deepEqual(await subnetIds(w.ec2, [{ Name: `tag:${CNI}`, Values: ['0'] }]), sorted(w.node, w.aOff));
});

test('DescribeSubnets fields: CidrBlock, AvailabilityZone, VpcId, Tags, AvailableIpAddressCount (size - 5)', async (t) => {
  const w = await world(t);
  const r = await w.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [w.b19.subnetId, w.node.subnetId] }));
  const byId = new Map(r.Subnets!.map((s) => [s.SubnetId!, s]));
  const b = byId.get(w.b19.subnetId)!;
  assert.equal(b.CidrBlock, '100.64.32.0/19');
  assert.equal(b.AvailabilityZone, 'us-west-2b');
  assert.equal(b.AvailabilityZoneId, 'usw2-az2');
  assert.equal(b.VpcId, w.sim.state.vpcId);
  assert.equal(b.State, 'available');
  assert.equal(b.AvailableIpAddressCount, 8192 - 5);
  assert.deepEqual(b.Tags!.map((x) => [x.Key, x.Value]).sort(), [
    [CNI, '1'],
    ['x', 'y'],
  ]);
  assert.equal(byId.get(w.node.subnetId)!.AvailableIpAddressCount, 256 - 5 - 1, 'the instance holds one address');
  // the JSON snapshot carries the same facts
  const snap = stateToJson(w.sim.state);
  assert.deepEqual(snap.vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16']);
  const sb = snap.subnets.find((s) => s.subnetId === w.b19.subnetId)!;
  assert.equal(sb.availabilityZone, 'us-west-2b');
  assert.deepEqual(sb.tags, { [CNI]: '1', x: 'y' });
});

test('DescribeVpcs lists every CIDR block, primary first', async (t) => {
  const w = await world(t);
  w.sim.addVpcCidr('100.65.0.0/16');
  const r = await w.ec2.send(new DescribeVpcsCommand({ VpcIds: [w.sim.state.vpcId] }));
  assert.equal(r.Vpcs!.length, 1);
  const v = r.Vpcs![0]!;
  assert.equal(v.CidrBlock, '10.0.0.0/16');
  assert.deepEqual(
    v.CidrBlockAssociationSet!.map((a) => [a.CidrBlock, a.CidrBlockState?.State]),
    [
      ['10.0.0.0/16', 'associated'],
      ['100.64.0.0/16', 'associated'],
      ['100.65.0.0/16', 'associated'],
    ],
  );
  assert.equal(new Set(v.CidrBlockAssociationSet!.map((a) => a.AssociationId)).size, 3, 'distinct association ids');
  const f = await w.ec2.send(
    new DescribeVpcsCommand({ Filters: [{ Name: 'cidr-block-association.cidr-block', Values: ['100.64.0.0/16'] }] }),
  );
  assert.equal(f.Vpcs!.length, 1);
  await expectSdkError(w.ec2.send(new DescribeVpcsCommand({ VpcIds: ['vpc-0nope'] })), {
    name: 'InvalidVpcID.NotFound',
    status: 400,
  });
});

test('VPC and subnet set-up rules: blocks, overlaps, zones', async (t) => {
  const w = await world(t);
  assert.throws(() => w.sim.addVpcCidr('172.16.0.0/16'), /another RFC 1918|is in 172\.16\.0\.0\/12/);
  assert.throws(() => w.sim.addVpcCidr('100.64.128.0/17'), /overlaps the VPC's block 100\.64\.0\.0\/16/);
  assert.throws(() => w.sim.addVpcCidr('100.66.0.0/15'), /prefix length must be \/16 to \/28/);
  assert.throws(() => w.sim.addSubnet({ cidr: '100.99.0.0/24' }), /not inside a VPC CIDR block/);
  assert.throws(() => w.sim.addSubnet({ cidr: '100.64.16.0/24' }), /overlaps/);
  assert.throws(
    () => w.sim.addSubnet({ cidr: '100.64.200.0/24', availabilityZone: 'eu-west-1a' }),
    /not a zone of us-west-2/,
  );
  for (const c of ['100.65.0.0/16', '100.66.0.0/16', '100.67.0.0/16']) w.sim.addVpcCidr(c);
  assert.throws(() => w.sim.addVpcCidr('100.68.0.0/16'), /quota 5/);
});

test('CreateNetworkInterface: security groups stored and described; exhaustion codes; nothing taken on failure', async (t) => {
  const w = await world(t);
  const tiny = w.sim.addSubnet({ cidr: '100.64.96.0/28', availabilityZone: 'us-west-2a' }); // 16 - 5 = 11 usable
  const eni = await createEni(w.ec2, tiny.subnetId, {
    SecondaryPrivateIpAddressCount: 9,
    Groups: ['sg-0aaaaaaaaaaaaaaa1', 'sg-0bbbbbbbbbbbbbbb2'],
  });
  assert.deepEqual(
    eni.Groups!.map((g) => g.GroupId),
    ['sg-0aaaaaaaaaaaaaaa1', 'sg-0bbbbbbbbbbbbbbb2'],
  );
  assert.equal(eni.SubnetId, tiny.subnetId);
  assert.equal(eni.AvailabilityZone, 'us-west-2a');
  assert.match(eni.PrivateIpAddress!, /^100\.64\.96\./);
  const d = await w.ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eni.NetworkInterfaceId!] }));
  assert.deepEqual(
    d.NetworkInterfaces![0]!.Groups!.map((g) => g.GroupId),
    ['sg-0aaaaaaaaaaaaaaa1', 'sg-0bbbbbbbbbbbbbbb2'],
  );
  const byGroup = await w.ec2.send(
    new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'group-id', Values: ['sg-0bbbbbbbbbbbbbbb2'] }] }),
  );
  assert.deepEqual(
    byGroup.NetworkInterfaces!.map((e) => e.NetworkInterfaceId),
    [eni.NetworkInterfaceId],
  );
  await expectSdkError(createEni(w.ec2, tiny.subnetId, { Groups: ['default'] }), {
    name: 'InvalidGroupId.Malformed',
    status: 400,
  });
  const plain = await createEni(w.ec2, w.a19.subnetId);
  assert.equal(plain.Groups!.length, 1, 'no SecurityGroupId: the default group');
  assert.equal(await freeCount(w.ec2, tiny.subnetId), 1);
  await expectSdkError(createEni(w.ec2, tiny.subnetId, { SecondaryPrivateIpAddressCount: 1 }), {
    name: 'InsufficientFreeAddressesInSubnet',
    status: 400,
  });
  assert.equal(await freeCount(w.ec2, tiny.subnetId), 1, 'a refused create takes nothing');
  // a /26 holds two whole /28 blocks free of reserved addresses
  const p26 = w.sim.addSubnet({ cidr: '100.64.97.0/26', availabilityZone: 'us-west-2a' });
  const withPrefixes = await createEni(w.ec2, p26.subnetId, { Ipv4PrefixCount: 2 });
  assert.equal(withPrefixes.Ipv4Prefixes!.length, 2);
  const before = await freeCount(w.ec2, p26.subnetId);
  await expectSdkError(createEni(w.ec2, p26.subnetId, { Ipv4PrefixCount: 1 }), {
    name: 'InsufficientCidrBlocks',
    status: 400,
  });
  assert.equal(await freeCount(w.ec2, p26.subnetId), before, 'a refused prefix create takes nothing');
});

test('occupy exhausts a subnet mid-run (other users of the subnet) and releaseOccupied gives the addresses back', async (t) => {
  const w = await world(t);
  const taken = w.sim.occupy(w.a19.subnetId, 2);
  assert.equal(taken.length, 8192 - 5 - 2);
  assert.equal(await freeCount(w.ec2, w.a19.subnetId), 2);
  await createEni(w.ec2, w.a19.subnetId, { SecondaryPrivateIpAddressCount: 1 });
  await expectSdkError(createEni(w.ec2, w.a19.subnetId), { name: 'InsufficientFreeAddressesInSubnet', status: 400 });
  const discovery = await w.ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: `tag:${CNI}`, Values: ['1'] }] }));
  assert.deepEqual(
    discovery.Subnets!.map((s) => [s.SubnetId, s.AvailableIpAddressCount]).sort(),
    [
      [w.a19.subnetId, 0],
      [w.b19.subnetId, 8192 - 5],
    ].sort(),
  );
  w.sim.releaseOccupied(w.a19.subnetId, taken.slice(0, 20));
  assert.equal(await freeCount(w.ec2, w.a19.subnetId), 20);
  assert.throws(() => w.sim.occupy(w.a19.subnetId, 21), /fewer than 21/);
  assert.deepEqual(w.sim.occupy(w.a19.subnetId, 20), []);
});

test('IMDS per-ENI facts: an ENI in a 100.64 subnet shows its own subnet and every VPC block', async (t) => {
  const w = await world(t);
  const eni = await createEni(w.ec2, w.a19.subnetId, {
    SecondaryPrivateIpAddressCount: 2,
    Groups: ['sg-0ccccccccccccccc3', 'sg-0ddddddddddddddd4'],
  });
  await w.ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId!,
      InstanceId: w.inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  const imds = new ImdsClient({ endpoint: w.sim.imdsEndpointFor(w.inst.instanceId) });
  const enis = await imds.enis();
  assert.equal(enis.length, 2);
  const primary = enis.find((e) => e.deviceNumber === 0)!;
  const second = enis.find((e) => e.deviceNumber === 1)!;
  assert.equal(primary.subnetId, w.node.subnetId);
  assert.equal(primary.subnetCidr, '10.0.0.0/24');
  assert.equal(second.eniId, eni.NetworkInterfaceId);
  assert.equal(second.subnetId, w.a19.subnetId);
  assert.equal(second.subnetCidr, '100.64.0.0/19');
  assert.deepEqual(second.vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16']);
  assert.deepEqual(primary.vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16']);
  assert.deepEqual(second.securityGroupIds, ['sg-0ccccccccccccccc3', 'sg-0ddddddddddddddd4']);
  assert.equal(second.localIpv4s.length, 3);
  for (const ip of second.localIpv4s) assert.match(ip, /^100\.64\.([0-9]|[12][0-9]|3[01])\./);
  assert.equal(
    await imds.get('meta-data/network/interfaces/macs/' + second.mac + '/vpc-ipv4-cidr-block'),
    '10.0.0.0/16',
  );
  // an ENI of another zone cannot be attached to this instance
  const other = await createEni(w.ec2, w.b19.subnetId);
  await expectSdkError(
    w.ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: other.NetworkInterfaceId!,
        InstanceId: w.inst.instanceId,
        DeviceIndex: 2,
      }),
    ),
    { name: 'InvalidParameterValue', status: 400 },
  );
});

test('sim CLI world specs: --vpc-cidr list and --subnet CIDR:ZONE:TAGS', () => {
  assert.deepEqual(parseVpcCidrs('10.0.0.0/16,100.64.0.0/16'), {
    primary: '10.0.0.0/16',
    secondary: ['100.64.0.0/16'],
  });
  assert.throws(() => parseVpcCidrs('10.0.0.0/16,nope'), /--vpc-cidr entry 'nope'/);
  assert.deepEqual(parseSubnetSpec('100.64.0.0/19:us-west-2b:kubernetes.io/role/cni=1,team=a:b'), {
    cidr: '100.64.0.0/19',
    availabilityZone: 'us-west-2b',
    tags: { [CNI]: '1', team: 'a:b' },
  });
  assert.deepEqual(parseSubnetSpec('100.64.0.0/19'), { cidr: '100.64.0.0/19', tags: {} });
  assert.deepEqual(parseSubnetSpec('100.64.0.0/19::k'), { cidr: '100.64.0.0/19', tags: { k: '' } });
  assert.throws(() => parseSubnetSpec('100.64.0.0/33'), /not an IPv4 CIDR/);
  assert.throws(() => parseSubnetSpec('100.64.0.0/19:west'), /not an availability zone name/);
  assert.throws(() => parseSubnetSpec('100.64.0.0/19:us-west-2a:=1'), /empty key/);
});
