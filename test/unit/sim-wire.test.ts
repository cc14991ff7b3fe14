/**
 * The simulated cloud over the wire: every EC2 action driven through the unmodified
 * `@aws-sdk/client-ec2` over HTTP on loopback, with the limits and error codes as the
 * SDK surfaces them (`err.name`, `$metadata.httpStatusCode`): instances, instance types,
 * ENI create/attach/detach/delete and the ENI and IP limits. Subnet accounting, filters,
 * paging and the raw Query API: sim-wire-query.test.ts. Fault knobs and the call log:
 * sim-wire-faults.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DescribeInstancesCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DetachNetworkInterfaceCommand,
  ModifyNetworkInterfaceAttributeCommand,
} from '@aws-sdk/client-ec2';
import { expectSdkError, startSim } from '../helpers/sim-fixture.js';
import { createEni } from '../helpers/sim-eni.js';

test('DescribeInstances: instance and its primary ENI as launched', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  const r = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [inst.instanceId] }));
  const i = r.Reservations![0]!.Instances![0]!;
  assert.equal(i.InstanceId, inst.instanceId);
  assert.equal(i.InstanceType, 'm5.large');
  assert.equal(i.SubnetId, subnet.subnetId);
  assert.equal(i.VpcId, sim.state.vpcId);
  assert.equal(i.PrivateIpAddress, '10.0.0.4');
  assert.equal(i.Placement?.AvailabilityZone, 'us-west-2a');
  assert.equal(i.NetworkInterfaces!.length, 1);
  const n = i.NetworkInterfaces![0]!;
  assert.equal(n.Attachment?.DeviceIndex, 0);
  assert.equal(n.Attachment?.DeleteOnTermination, true);
  assert.deepEqual(
    n.PrivateIpAddresses!.map((x) => [x.PrivateIpAddress, x.Primary]),
    [['10.0.0.4', true]],
  );
  assert.deepEqual(n.Ipv4Prefixes, []);
  const eni = (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [n.NetworkInterfaceId!] })))
    .NetworkInterfaces![0]!;
  assert.deepEqual(eni.TagSet, []);
  assert.equal(eni.Status, 'in-use');
  await expectSdkError(ec2.send(new DescribeInstancesCommand({ InstanceIds: ['i-0000000000000dead'] })), {
    name: 'InvalidInstanceID.NotFound',
    status: 400,
  });
});

test('DescribeInstanceTypes: real AWS network figures, hypervisor, unknown type', async (t) => {
  const { ec2 } = await startSim(t);
  const want: Record<string, [number, number, string]> = {
    't3.medium': [3, 6, 'nitro'],
    'm5.large': [3, 10, 'nitro'],
    'm5.xlarge': [4, 15, 'nitro'],
    'c5.4xlarge': [8, 30, 'nitro'],
    't2.medium': [3, 6, 'xen'],
  };
  const r = await ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: Object.keys(want) as never }));
  assert.equal(r.InstanceTypes!.length, 5);
  for (const it of r.InstanceTypes!) {
    const [enis, ips, hv] = want[it.InstanceType!]!;
    assert.equal(it.NetworkInfo?.MaximumNetworkInterfaces, enis, it.InstanceType);
    assert.equal(it.NetworkInfo?.Ipv4AddressesPerInterface, ips, it.InstanceType);
    assert.ok((it.NetworkInfo?.Ipv6AddressesPerInterface ?? 0) > 0);
    assert.equal(it.NetworkInfo?.NetworkCards?.[0]?.MaximumNetworkInterfaces, enis);
    assert.equal(it.Hypervisor, hv);
  }
  await expectSdkError(ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ['x9.huge' as never] })), {
    name: 'InvalidInstanceType',
    status: 400,
  });
});

test('CreateNetworkInterface: fields, tags, groups, XML escaping; DescribeNetworkInterfaces by id', async (t) => {
  const { sim, ec2, subnet } = await startSim(t);
  const desc = 'aws-K8S-i-0abc <&> "quoted" \'x\'';
  const eni = await createEni(ec2, subnet.subnetId, {
    Description: desc,
    SecondaryPrivateIpAddressCount: 2,
    Groups: ['sg-0aaa', 'sg-0bbb'],
    TagSpecifications: [
      {
        ResourceType: 'network-interface',
        Tags: [
          { Key: 'node.k8s.amazonaws.com/instance_id', Value: 'i-0abc' },
          { Key: 'empty', Value: '' },
        ],
      },
    ],
  });
  assert.match(eni.NetworkInterfaceId!, /^eni-0[0-9a-f]{16}$/);
  assert.match(eni.MacAddress!, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
  assert.equal(eni.Status, 'available');
  assert.equal(eni.Description, desc);
  assert.equal(eni.SubnetId, subnet.subnetId);
  assert.equal(eni.VpcId, sim.state.vpcId);
  assert.equal(eni.AvailabilityZone, 'us-west-2a');
  assert.equal(eni.PrivateIpAddress, '10.0.0.5');
  assert.deepEqual(
    eni.PrivateIpAddresses!.map((x) => [x.PrivateIpAddress, x.Primary]),
    [
      ['10.0.0.5', true],
      ['10.0.0.6', false],
      ['10.0.0.7', false],
    ],
  );
  assert.deepEqual(
    eni.Groups!.map((g) => g.GroupId),
    ['sg-0aaa', 'sg-0bbb'],
  );
  assert.deepEqual(eni.TagSet, [
    { Key: 'node.k8s.amazonaws.com/instance_id', Value: 'i-0abc' },
    { Key: 'empty', Value: '' },
  ]);
  assert.equal(eni.Attachment, undefined);

  const d = await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eni.NetworkInterfaceId!] }));
  assert.deepEqual(d.NetworkInterfaces, [eni]);
  await expectSdkError(
    ec2.send(
      new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eni.NetworkInterfaceId!, 'eni-0000000000000dead'] }),
    ),
    { name: 'InvalidNetworkInterfaceID.NotFound', status: 400 },
  );
  await expectSdkError(createEni(ec2, 'subnet-0000000000000dead'), { name: 'InvalidSubnetID.NotFound', status: 400 });
  await expectSdkError(
    createEni(ec2, subnet.subnetId, {
      TagSpecifications: [{ ResourceType: 'instance', Tags: [{ Key: 'a', Value: 'b' }] }],
    }),
    { name: 'InvalidParameterValue', status: 400 },
  );
});

test('ENI lifecycle: attach, device index taken, modify, detach (primary refused), delete', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  const eni = await createEni(ec2, subnet.subnetId);
  const id = eni.NetworkInterfaceId!;
  const att = await ec2.send(
    new AttachNetworkInterfaceCommand({ NetworkInterfaceId: id, InstanceId: inst.instanceId, DeviceIndex: 1 }),
  );
  assert.match(att.AttachmentId!, /^eni-attach-0[0-9a-f]{16}$/);
  let d = (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] }))).NetworkInterfaces![0]!;
  assert.equal(d.Status, 'in-use');
  assert.equal(d.Attachment?.AttachmentId, att.AttachmentId);
  assert.equal(d.Attachment?.InstanceId, inst.instanceId);
  assert.equal(d.Attachment?.DeviceIndex, 1);
  assert.equal(d.Attachment?.Status, 'attached');
  assert.equal(d.Attachment?.DeleteOnTermination, false);
  assert.ok(d.Attachment?.AttachTime instanceof Date);

  const other = await createEni(ec2, subnet.subnetId);
  await expectSdkError(
    ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: other.NetworkInterfaceId!,
        InstanceId: inst.instanceId,
        DeviceIndex: 1,
      }),
    ),
    { name: 'InvalidParameterValue', status: 400 },
  );
  await expectSdkError(
    ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: id, InstanceId: inst.instanceId, DeviceIndex: 2 }),
    ),
    { name: 'InvalidNetworkInterface.InUse', status: 400 },
  );

  await ec2.send(
    new ModifyNetworkInterfaceAttributeCommand({
      NetworkInterfaceId: id,
      Attachment: { AttachmentId: att.AttachmentId!, DeleteOnTermination: true },
    }),
  );
  await ec2.send(
    new ModifyNetworkInterfaceAttributeCommand({ NetworkInterfaceId: id, Description: { Value: 'aws-K8S-x' } }),
  );
  await ec2.send(
    new ModifyNetworkInterfaceAttributeCommand({ NetworkInterfaceId: id, SourceDestCheck: { Value: false } }),
  );
  d = (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] }))).NetworkInterfaces![0]!;
  assert.equal(d.Attachment?.DeleteOnTermination, true);
  assert.equal(d.Description, 'aws-K8S-x');
  assert.equal(d.SourceDestCheck, false);

  const primary = sim.state.enis.get(inst.primaryEniId)!;
  await expectSdkError(
    ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: primary.attachment!.attachmentId })),
    { name: 'OperationNotPermitted', status: 400 },
  );
  await expectSdkError(ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id })), {
    name: 'InvalidParameterValue',
    status: 400,
  });
  await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId! }));
  d = (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] }))).NetworkInterfaces![0]!;
  assert.equal(d.Status, 'available');
  assert.equal(d.Attachment, undefined);
  await expectSdkError(ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId! })), {
    name: 'InvalidAttachmentID.NotFound',
    status: 400,
  });
  await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id }));
  assert.equal(sim.state.enis.has(id), false);
  await expectSdkError(ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id })), {
    name: 'InvalidNetworkInterfaceID.NotFound',
    status: 400,
  });
});

test('AttachmentLimitExceeded when the instance is at its ENI limit (m5.large: 3)', async (t) => {
  const { ec2, subnet, inst } = await startSim(t);
  for (const idx of [1, 2]) {
    const e = await createEni(ec2, subnet.subnetId);
    await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: e.NetworkInterfaceId!,
        InstanceId: inst.instanceId,
        DeviceIndex: idx,
      }),
    );
  }
  const fourth = await createEni(ec2, subnet.subnetId);
  await expectSdkError(
    ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: fourth.NetworkInterfaceId!,
        InstanceId: inst.instanceId,
        DeviceIndex: 3,
      }),
    ),
    { name: 'AttachmentLimitExceeded', status: 400 },
  );
});

test('PrivateIpAddressLimitExceeded: primary counts; each /28 prefix takes one slot', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  const primaryId = inst.primaryEniId;
  const r = await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: primaryId, SecondaryPrivateIpAddressCount: 9 }),
  );
  assert.equal(r.AssignedPrivateIpAddresses!.length, 9);
  await expectSdkError(
    ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: primaryId, SecondaryPrivateIpAddressCount: 1 })),
    { name: 'PrivateIpAddressLimitExceeded', status: 400 },
  );

  const eni = await createEni(ec2, subnet.subnetId);
  await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId!,
      InstanceId: inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  const p = await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eni.NetworkInterfaceId!, Ipv4PrefixCount: 8 }),
  );
  assert.equal(p.AssignedIpv4Prefixes!.length, 8);
  for (const x of p.AssignedIpv4Prefixes!) assert.match(x.Ipv4Prefix!, /^10\.0\.0\.\d+\/28$/);
  for (const x of p.AssignedIpv4Prefixes!)
    assert.equal(Number(x.Ipv4Prefix!.split('.')[3]!.split('/')[0]) % 16, 0, 'aligned on 16');
  await ec2.send(
    new AssignPrivateIpAddressesCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId!,
      SecondaryPrivateIpAddressCount: 1,
    }),
  );
  await expectSdkError(
    ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eni.NetworkInterfaceId!, Ipv4PrefixCount: 1 })),
    { name: 'PrivateIpAddressLimitExceeded', status: 400 },
  );
  assert.equal(sim.state.enis.get(eni.NetworkInterfaceId!)!.ipv4Prefixes.length, 8);
});

test('prefixes on a Xen instance type are refused (InvalidParameterValue)', async (t) => {
  const { ec2, inst } = await startSim(t, { instanceType: 't2.medium' });
  await expectSdkError(
    ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, Ipv4PrefixCount: 1 })),
    { name: 'InvalidParameterValue', status: 400 },
  );
});
