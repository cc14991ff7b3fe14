/**
 * CreateNetworkInterface retries and prefix exhaustion through the real SDK: a retry
 * with the same ClientToken returns the first ENI (EC2 idempotency), and a subnet with
 * no free aligned /28 answers prefix requests with InsufficientCidrBlocks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AssignPrivateIpAddressesCommand,
  CreateNetworkInterfaceCommand,
  DescribeSubnetsCommand,
} from '@aws-sdk/client-ec2';
import { expectSdkError, startSim } from '../helpers/sim-fixture.js';

test('CreateNetworkInterface with a repeated ClientToken returns the same ENI and takes no more addresses', async (t) => {
  const { sim, ec2, subnet } = await startSim(t);
  const first = await ec2.send(
    new CreateNetworkInterfaceCommand({
      SubnetId: subnet.subnetId,
      ClientToken: 'retry-1',
      SecondaryPrivateIpAddressCount: 2,
    }),
  );
  const free = (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnet.subnetId] }))).Subnets![0]!
    .AvailableIpAddressCount;
  const again = await ec2.send(
    new CreateNetworkInterfaceCommand({
      SubnetId: subnet.subnetId,
      ClientToken: 'retry-1',
      SecondaryPrivateIpAddressCount: 2,
    }),
  );
  assert.equal(again.NetworkInterface?.NetworkInterfaceId, first.NetworkInterface?.NetworkInterfaceId);
  assert.equal(
    (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnet.subnetId] }))).Subnets![0]!.AvailableIpAddressCount,
    free,
  );
  assert.equal(sim.state.enis.size, 2, 'the primary ENI and one created ENI');
  const other = await ec2.send(
    new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId, ClientToken: 'retry-2' }),
  );
  assert.notEqual(other.NetworkInterface?.NetworkInterfaceId, first.NetworkInterface?.NetworkInterfaceId);
});

test('prefix requests fail with InsufficientCidrBlocks when no aligned /28 is free', async (t) => {
  // 10.0.0.0/27: the first /28 holds the 4 reserved addresses, the second the last one.
  const { ec2, inst } = await startSim(t, { subnetCidr: '10.0.0.0/27' });
  await expectSdkError(
    ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, Ipv4PrefixCount: 1 })),
    { name: 'InsufficientCidrBlocks', status: 400 },
  );
  const r = await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 2 }),
  );
  assert.equal(r.AssignedPrivateIpAddresses?.length, 2, 'single addresses are still available');
});
