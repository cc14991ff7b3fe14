/**
 * The simulated cloud over the wire (continued from sim-wire.test.ts): exact subnet
 * free-address accounting, unassign errors, DescribeNetworkInterfaces filters and
 * MaxResults/NextToken paging, DescribeSubnets and the raw Query API, through the
 * unmodified `@aws-sdk/client-ec2` over HTTP on loopback.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateTagsCommand,
  DeleteNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DetachNetworkInterfaceCommand,
  UnassignPrivateIpAddressesCommand,
  paginateDescribeNetworkInterfaces,
} from '@aws-sdk/client-ec2';
import { expectSdkError, rawEc2, startSim } from '../helpers/sim-fixture.js';
import { createEni, freeCount } from '../helpers/sim-eni.js';

test('InsufficientFreeAddressesInSubnet on a /28 (11 usable addresses)', async (t) => {
  const { ec2, subnet, inst } = await startSim(t, { subnetCidr: '10.0.0.0/28', instanceType: 'm5.xlarge' });
  assert.equal(await freeCount(ec2, subnet.subnetId), 10);
  await expectSdkError(
    ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: inst.primaryEniId,
        SecondaryPrivateIpAddressCount: 11,
      }),
    ),
    { name: 'InsufficientFreeAddressesInSubnet', status: 400 },
  );
  assert.equal(await freeCount(ec2, subnet.subnetId), 10, 'a failed assign takes nothing');
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 10 }),
  );
  assert.equal(await freeCount(ec2, subnet.subnetId), 0);
  await expectSdkError(createEni(ec2, subnet.subnetId), { name: 'InsufficientFreeAddressesInSubnet', status: 400 });
});

test('subnet free-address accounting stays exact across create/assign/unassign/delete', async (t) => {
  const { ec2, subnet, inst } = await startSim(t);
  const start = await freeCount(ec2, subnet.subnetId);
  assert.equal(start, 256 - 5 - 1);
  const eni = await createEni(ec2, subnet.subnetId, { SecondaryPrivateIpAddressCount: 3 });
  const id = eni.NetworkInterfaceId!;
  assert.equal(await freeCount(ec2, subnet.subnetId), start - 4);
  await ec2.send(
    new AttachNetworkInterfaceCommand({ NetworkInterfaceId: id, InstanceId: inst.instanceId, DeviceIndex: 1 }),
  );
  const ips = (
    await ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: id, SecondaryPrivateIpAddressCount: 5 }))
  ).AssignedPrivateIpAddresses!.map((x) => x.PrivateIpAddress!);
  assert.equal(await freeCount(ec2, subnet.subnetId), start - 9);
  const prefixes = (
    await ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: id, Ipv4PrefixCount: 1 }))
  ).AssignedIpv4Prefixes!.map((x) => x.Ipv4Prefix!);
  assert.equal(await freeCount(ec2, subnet.subnetId), start - 9 - 16);
  await ec2.send(
    new AssignPrivateIpAddressesCommand({
      NetworkInterfaceId: inst.primaryEniId,
      PrivateIpAddresses: ['10.0.0.200', '10.0.0.201'],
    }),
  );
  assert.equal(await freeCount(ec2, subnet.subnetId), start - 27);
  await expectSdkError(
    ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: inst.primaryEniId,
        PrivateIpAddresses: ['10.0.0.200'],
      }),
    ),
    { name: 'InvalidIPAddress.InUse', status: 400 },
  );
  await ec2.send(
    new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: id, PrivateIpAddresses: ips.slice(0, 2) }),
  );
  assert.equal(await freeCount(ec2, subnet.subnetId), start - 25);
  await ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: id, Ipv4Prefixes: prefixes }));
  assert.equal(await freeCount(ec2, subnet.subnetId), start - 9);
  await ec2.send(
    new UnassignPrivateIpAddressesCommand({
      NetworkInterfaceId: inst.primaryEniId,
      PrivateIpAddresses: ['10.0.0.200', '10.0.0.201'],
    }),
  );
  await ec2.send(
    new DetachNetworkInterfaceCommand({
      AttachmentId: (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] })))
        .NetworkInterfaces![0]!.Attachment!.AttachmentId!,
    }),
  );
  await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id }));
  assert.equal(await freeCount(ec2, subnet.subnetId), start);
  // freed addresses are handed out again, lowest first
  const again = await createEni(ec2, subnet.subnetId);
  assert.equal(again.PrivateIpAddress, '10.0.0.5');
});

test('UnassignPrivateIpAddresses: an address not on the ENI, or its primary, is InvalidParameterValue', async (t) => {
  const { ec2, inst } = await startSim(t);
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 1 }),
  );
  await expectSdkError(
    ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: inst.primaryEniId,
        PrivateIpAddresses: ['10.0.0.99'],
      }),
    ),
    { name: 'InvalidParameterValue', status: 400 },
  );
  await expectSdkError(
    ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: inst.primaryEniId,
        PrivateIpAddresses: ['10.0.0.4'],
      }),
    ),
    { name: 'InvalidParameterValue', status: 400 },
  );
  await expectSdkError(
    ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: 'eni-0000000000000dead',
        PrivateIpAddresses: ['10.0.0.5'],
      }),
    ),
    { name: 'InvalidNetworkInterfaceID.NotFound', status: 400 },
  );
});

test('DescribeNetworkInterfaces filters, CreateTags, and MaxResults/NextToken paging', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  const sub2 = sim.addSubnet({ cidr: '10.0.1.0/24' });
  const ours = await createEni(ec2, subnet.subnetId, {
    TagSpecifications: [
      {
        ResourceType: 'network-interface',
        Tags: [{ Key: 'node.k8s.amazonaws.com/instance_id', Value: inst.instanceId }],
      },
    ],
  });
  await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: ours.NetworkInterfaceId!,
      InstanceId: inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  const loose = await createEni(ec2, sub2.subnetId);
  const ids = async (filters: { Name: string; Values: string[] }[]): Promise<string[]> =>
    ((await ec2.send(new DescribeNetworkInterfacesCommand({ Filters: filters }))).NetworkInterfaces ?? [])
      .map((e) => e.NetworkInterfaceId!)
      .sort();
  const sorted = (...xs: string[]): string[] => xs.sort();
  assert.deepEqual(
    await ids([{ Name: 'attachment.instance-id', Values: [inst.instanceId] }]),
    sorted(inst.primaryEniId, ours.NetworkInterfaceId!),
  );
  assert.deepEqual(await ids([{ Name: 'tag-key', Values: ['node.k8s.amazonaws.com/instance_id'] }]), [
    ours.NetworkInterfaceId!,
  ]);
  assert.deepEqual(await ids([{ Name: 'tag:node.k8s.amazonaws.com/instance_id', Values: [inst.instanceId] }]), [
    ours.NetworkInterfaceId!,
  ]);
  assert.deepEqual(await ids([{ Name: 'tag:node.k8s.amazonaws.com/instance_id', Values: ['i-other'] }]), []);
  assert.deepEqual(await ids([{ Name: 'status', Values: ['available'] }]), [loose.NetworkInterfaceId!]);
  assert.deepEqual(await ids([{ Name: 'subnet-id', Values: [sub2.subnetId] }]), [loose.NetworkInterfaceId!]);
  assert.equal((await ids([{ Name: 'vpc-id', Values: [sim.state.vpcId] }])).length, 3);
  assert.deepEqual(await ids([{ Name: 'network-interface-id', Values: [loose.NetworkInterfaceId!, 'eni-0nothere'] }]), [
    loose.NetworkInterfaceId!,
  ]);
  assert.deepEqual(
    await ids([
      { Name: 'status', Values: ['in-use'] },
      { Name: 'tag-key', Values: ['node.k8s.*'] },
    ]),
    [ours.NetworkInterfaceId!],
    'AND of filters, wildcard',
  );
  await expectSdkError(ids([{ Name: 'no-such-filter', Values: ['x'] }]), {
    name: 'InvalidParameterValue',
    status: 400,
  });

  await ec2.send(
    new CreateTagsCommand({ Resources: [loose.NetworkInterfaceId!], Tags: [{ Key: 'no_manage', Value: 'true' }] }),
  );
  assert.deepEqual(await ids([{ Name: 'tag:no_manage', Values: ['true'] }]), [loose.NetworkInterfaceId!]);
  await expectSdkError(
    ec2.send(new CreateTagsCommand({ Resources: ['eni-0000000000000dead'], Tags: [{ Key: 'a', Value: 'b' }] })),
    { name: 'InvalidNetworkInterfaceID.NotFound', status: 400 },
  );

  for (let i = 0; i < 5; i++) await createEni(ec2, subnet.subnetId);
  const first = await ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 5 }));
  assert.equal(first.NetworkInterfaces!.length, 5);
  assert.ok(first.NextToken);
  const seen: string[] = [];
  for await (const pg of paginateDescribeNetworkInterfaces({ client: ec2, pageSize: 5 }, {}))
    seen.push(...pg.NetworkInterfaces!.map((e) => e.NetworkInterfaceId!));
  assert.equal(seen.length, 8);
  assert.equal(new Set(seen).size, 8);
  await expectSdkError(ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 2 })), {
    name: 'InvalidParameterValue',
    status: 400,
  });
  await expectSdkError(ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 5, NextToken: 'garbage!' })), {
    name: 'InvalidNextToken',
    status: 400,
  });
});

test('DescribeSubnets: fields, ids, filters', async (t) => {
  const { sim, ec2, subnet } = await startSim(t);
  const small = sim.addSubnet({ cidr: '10.0.2.0/28', availabilityZone: 'us-west-2b' });
  const all = await ec2.send(new DescribeSubnetsCommand({}));
  assert.equal(all.Subnets!.length, 2);
  const s = (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [small.subnetId] }))).Subnets![0]!;
  assert.equal(s.CidrBlock, '10.0.2.0/28');
  assert.equal(s.AvailableIpAddressCount, 11);
  assert.equal(s.VpcId, sim.state.vpcId);
  assert.equal(s.AvailabilityZone, 'us-west-2b');
  const f = await ec2.send(
    new DescribeSubnetsCommand({
      Filters: [
        { Name: 'availability-zone', Values: ['us-west-2a'] },
        { Name: 'vpc-id', Values: [sim.state.vpcId] },
      ],
    }),
  );
  assert.deepEqual(
    f.Subnets!.map((x) => x.SubnetId),
    [subnet.subnetId],
  );
  await expectSdkError(ec2.send(new DescribeSubnetsCommand({ SubnetIds: ['subnet-0000000000000dead'] })), {
    name: 'InvalidSubnetID.NotFound',
    status: 400,
  });
});

test('raw Query API: unknown action, missing and malformed parameters', async (t) => {
  const { sim } = await startSim(t);
  let r = await rawEc2(sim, { Action: 'Frobnicate' });
  assert.equal(r.status, 400);
  assert.match(
    r.body,
    /<Response><Errors><Error><Code>InvalidAction<\/Code><Message>[^<]+<\/Message><\/Error><\/Errors><RequestID>[0-9a-f-]{36}<\/RequestID><\/Response>/,
  );
  r = await rawEc2(sim, { Action: 'DeleteNetworkInterface' });
  assert.equal(r.status, 400);
  assert.match(r.body, /<Code>MissingParameter<\/Code><Message>[^<]*NetworkInterfaceId/);
  r = await rawEc2(sim, {
    Action: 'AttachNetworkInterface',
    NetworkInterfaceId: 'eni-0x',
    InstanceId: 'i-0x',
    DeviceIndex: 'one',
  });
  assert.equal(r.status, 400);
  assert.match(r.body, /<Code>InvalidParameterValue<\/Code><Message>[^<]*DeviceIndex/);
  r = await rawEc2(sim, { Action: 'DescribeSubnets' });
  assert.equal(r.status, 200);
  assert.match(
    r.body,
    /^<\?xml version="1.0" encoding="UTF-8"\?>\n<DescribeSubnetsResponse xmlns="http:\/\/ec2.amazonaws.com\/doc\/2016-11-15\/"><requestId>/,
  );
});
