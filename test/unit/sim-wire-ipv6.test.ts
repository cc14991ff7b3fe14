/**
 * The simulated cloud speaks IPv6 over the wire as EC2 does, driven through the unmodified
 * `@aws-sdk/client-ec2` and ipamd's own IMDS client: DescribeVpcs / DescribeSubnets with
 * their `Ipv6CidrBlockAssociationSet`, AssignIpv6Addresses / UnassignIpv6Addresses with
 * /80 prefixes and addresses, DescribeNetworkInterfaces' `Ipv6Prefixes` /
 * `Ipv6Addresses`, the error codes (subnet without IPv6, over the per-ENI limit, a Xen
 * type asked for prefixes), and the IMDS IPv6 paths.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import {
  AssignIpv6AddressesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  UnassignIpv6AddressesCommand,
} from '@aws-sdk/client-ec2';
import { ImdsClient } from '../../ipamd/cloud/imds.js';
import { expectSdkError, startSim } from '../helpers/sim-fixture.js';
import { LOADED_MS } from '../helpers/imds-timeout.js';

const VPC6 = '2600:1f14:abc:de00::/56';

async function dualStack(t: TestContext, instanceType = 'm5.large') {
  const f = await startSim(t, { opts: { vpcIpv6Cidrs: [VPC6] } });
  const v6 = f.sim.addSubnet({ cidr: '10.0.1.0/24', ipv6Cidr: true, assignIpv6AddressOnCreation: true });
  const inst = f.sim.launchInstance({ instanceType, subnetId: v6.subnetId });
  const eniId = inst.primaryEniId;
  return { ...f, v6, inst6: inst, eniId };
}

test('DescribeVpcs and DescribeSubnets show the IPv6 blocks as EC2 does', async (t) => {
  const { sim, ec2, subnet, v6 } = await dualStack(t);
  const vpc = (await ec2.send(new DescribeVpcsCommand({}))).Vpcs![0]!;
  assert.deepEqual(
    vpc.Ipv6CidrBlockAssociationSet!.map((a) => [a.Ipv6CidrBlock, a.Ipv6CidrBlockState?.State, a.NetworkBorderGroup]),
    [[VPC6, 'associated', 'us-west-2']],
  );
  assert.match(vpc.Ipv6CidrBlockAssociationSet![0]!.AssociationId!, /^vpc-cidr-assoc-[0-9a-f]+$/);
  assert.equal(vpc.CidrBlockAssociationSet!.length, 1, 'the IPv4 list is unchanged');
  const subs = (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnet.subnetId, v6.subnetId] }))).Subnets!;
  const old = subs.find((s) => s.SubnetId === subnet.subnetId)!;
  const dual = subs.find((s) => s.SubnetId === v6.subnetId)!;
  assert.deepEqual(old.Ipv6CidrBlockAssociationSet, []);
  assert.equal(old.AssignIpv6AddressOnCreation, false);
  assert.equal(dual.AssignIpv6AddressOnCreation, true);
  const assoc = dual.Ipv6CidrBlockAssociationSet![0]!;
  assert.equal(assoc.Ipv6CidrBlock, '2600:1f14:abc:de00::/64');
  assert.equal(assoc.Ipv6CidrBlockState?.State, 'associated');
  assert.equal(assoc.AssociationId, `subnet-cidr-assoc-${v6.subnetId.slice('subnet-'.length)}`);
  assert.equal(sim.addSubnet({ cidr: '10.0.2.0/24', ipv6Cidr: true }).ipv6!.cidr, '2600:1f14:abc:de01::/64');
});

test('AssignIpv6Addresses Ipv6PrefixCount: a /80 of the subnet /64, shown by Describe, then unassigned', async (t) => {
  const { sim, ec2, eniId } = await dualStack(t);
  const r = await ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: 1 }));
  assert.equal(r.NetworkInterfaceId, eniId);
  assert.deepEqual(r.AssignedIpv6Prefixes, ['2600:1f14:abc:de00:1::/80']);
  assert.deepEqual(r.AssignedIpv6Addresses, []);
  const rec = sim.calls.at(-1)!;
  assert.equal(rec.params.Ipv6PrefixCount, '1', 'the SDK sends Ipv6PrefixCount');
  const d = (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] })))
    .NetworkInterfaces![0]!;
  assert.deepEqual(d.Ipv6Prefixes, [{ Ipv6Prefix: '2600:1f14:abc:de00:1::/80' }]);
  // the primary ENI got its IPv6 address at launch (AssignIpv6AddressOnCreation)
  assert.deepEqual(d.Ipv6Addresses, [{ Ipv6Address: '2600:1f14:abc:de00::4', IsPrimaryIpv6: false }]);
  const u = await ec2.send(
    new UnassignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Prefixes: ['2600:1f14:abc:de00:1:0:0:0/80'] }),
  );
  assert.deepEqual(sim.calls.at(-1)!.params['Ipv6Prefix.1'], '2600:1f14:abc:de00:1:0:0:0/80', 'wire name Ipv6Prefix.N');
  assert.deepEqual(u.UnassignedIpv6Prefixes, ['2600:1f14:abc:de00:1::/80']);
  const after = (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] })))
    .NetworkInterfaces![0]!;
  assert.deepEqual(after.Ipv6Prefixes, []);
  await expectSdkError(
    ec2.send(
      new UnassignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Prefixes: ['2600:1f14:abc:de00:1::/80'] }),
    ),
    { name: 'InvalidParameterValue', status: 400 },
  );
});

test('AssignIpv6Addresses with addresses: count and specific ones, wire names Ipv6Addresses.N', async (t) => {
  const { sim, ec2, eniId } = await dualStack(t);
  const r = await ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6AddressCount: 2 }));
  assert.deepEqual(r.AssignedIpv6Addresses, ['2600:1f14:abc:de00::5', '2600:1f14:abc:de00::6']);
  const s = await ec2.send(
    new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Addresses: ['2600:1f14:abc:de00::beef'] }),
  );
  assert.equal(sim.calls.at(-1)!.params['Ipv6Addresses.1'], '2600:1f14:abc:de00::beef');
  assert.deepEqual(s.AssignedIpv6Addresses, ['2600:1f14:abc:de00::beef']);
  await expectSdkError(
    ec2.send(
      new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Addresses: ['2600:1f14:abc:de00::beef'] }),
    ),
    { name: 'InvalidIPAddress.InUse', status: 400 },
  );
  const u = await ec2.send(
    new UnassignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Addresses: ['2600:1f14:abc:de00::5'] }),
  );
  assert.deepEqual(u.UnassignedIpv6Addresses, ['2600:1f14:abc:de00::5']);
  await expectSdkError(
    ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6AddressCount: 1, Ipv6PrefixCount: 1 })),
    { name: 'InvalidParameterCombination', status: 400 },
  );
  await expectSdkError(ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId })), {
    name: 'MissingParameter',
    status: 400,
  });
});

test('errors: a subnet without IPv6, over the per-ENI IPv6 limit, a Xen type asked for prefixes', async (t) => {
  const { sim, ec2, inst, eniId, v6 } = await dualStack(t);
  // the fixture's first instance sits in the IPv4-only subnet
  const e1 = await expectSdkError(
    ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: inst.primaryEniId, Ipv6PrefixCount: 1 })),
    { name: 'InvalidParameterValue', status: 400 },
  );
  assert.match(e1.message, /does not have an IPv6 CIDR block/);
  // m5.large: 10 IPv6 slots per ENI; the primary already holds one address
  await ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: 9 }));
  const e2 = await expectSdkError(
    ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: 1 })),
    { name: 'InvalidParameterValue', status: 400 },
  );
  assert.match(e2.message, /exceed limit \(10 per interface for m5.large\)/);
  const xen = sim.launchInstance({ instanceType: 't2.medium', subnetId: v6.subnetId });
  const e3 = await expectSdkError(
    ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: xen.primaryEniId, Ipv6PrefixCount: 1 })),
    { name: 'InvalidParameterValue', status: 400 },
  );
  assert.match(e3.message, /not supported on instance type t2.medium/);
  // addresses (not prefixes) are fine on Xen
  await ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: xen.primaryEniId, Ipv6AddressCount: 1 }));
});

test("IMDS serves ipv6, ipv6s, ipv6-prefix, subnet- and vpc-ipv6-cidr-blocks; ipamd's client reads them", async (t) => {
  const { sim, ec2, inst, inst6, eniId } = await dualStack(t);
  await ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: 1 }));
  const imds = new ImdsClient({ endpoint: sim.imdsEndpointFor(inst6.instanceId), timeoutMs: LOADED_MS });
  t.after(() => imds.close());
  const mac = sim.state.enis.get(eniId)!.macAddress;
  assert.equal(await imds.localIpv6(), '2600:1f14:abc:de00::4');
  assert.deepEqual(await imds.eniIpv6(mac), {
    mac,
    ipv6s: ['2600:1f14:abc:de00::4'],
    ipv6Prefixes: ['2600:1f14:abc:de00:1::/80'],
    subnetIpv6Cidrs: ['2600:1f14:abc:de00::/64'],
    vpcIpv6Cidrs: [VPC6],
  });
  assert.match(await imds.get(`meta-data/network/interfaces/macs/${mac}/`), /^ipv6-prefix$/m);
  // an IPv4-only instance: no ipv6 path, empty lists (404s), but the VPC's block is listed
  const v4 = new ImdsClient({ endpoint: sim.imdsEndpointFor(inst.instanceId), timeoutMs: LOADED_MS });
  t.after(() => v4.close());
  const mac4 = sim.state.enis.get(inst.primaryEniId)!.macAddress;
  assert.equal(await v4.localIpv6(), undefined);
  assert.deepEqual(await v4.eniIpv6(mac4), {
    mac: mac4,
    ipv6s: [],
    ipv6Prefixes: [],
    subnetIpv6Cidrs: [],
    vpcIpv6Cidrs: [VPC6],
  });
  assert.equal(await v4.getOptional(`meta-data/network/interfaces/macs/${mac4}/ipv6s`), undefined);
});
