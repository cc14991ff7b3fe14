/** ENI and subnet helpers of the sim-wire tests (driven through the real SDK). */
import assert from 'node:assert/strict';
import {
  CreateNetworkInterfaceCommand,
  DescribeSubnetsCommand,
  type EC2Client,
  type NetworkInterface,
} from '@aws-sdk/client-ec2';

/** Creates an ENI in `subnetId` (with `extra` request fields); asserts it has an id. */
export async function createEni(
  ec2: EC2Client,
  subnetId: string,
  extra: Partial<ConstructorParameters<typeof CreateNetworkInterfaceCommand>[0]> = {},
): Promise<NetworkInterface> {
  const r = await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, ...extra }));
  assert.ok(r.NetworkInterface?.NetworkInterfaceId);
  return r.NetworkInterface;
}

/** The subnet's AvailableIpAddressCount as DescribeSubnets reports it. */
export async function freeCount(ec2: EC2Client, subnetId: string): Promise<number> {
  const r = await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }));
  return r.Subnets![0]!.AvailableIpAddressCount!;
}
