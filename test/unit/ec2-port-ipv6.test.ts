/**
 * The EC2 port's IPv6 prefix calls, the same assertions against both implementations:
 * `Ec2Api` (the real AWS SDK over HTTP to the simulated cloud) and `MemoryEc2` (the
 * simulator's model in-process). Assign a /80, describe it in `ipv6Prefixes`, and the
 * refusals with EC2's codes: a subnet without IPv6, over the per-ENI limit, a Xen
 * instance; DescribeSubnets' IPv6 blocks. The port has no unassign: ipamd never gives a
 * node's /80 back (it would take every pod's address; docs/install-eks.md's policies grant
 * no UnassignIpv6Addresses). The sim's own UnassignIpv6Addresses is tested in sim-wire-ipv6.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { Ec2Api, Ec2Error, type Ec2Port } from '../../ipamd/cloud/ec2.js';
import { SimCloud } from '../../sim/index.js';
import { MemoryEc2 } from '../../sim/memory-ec2.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

const VPC6 = '2600:1f14:abc:de00::/56';

interface World {
  port: Ec2Port;
  /** Primary ENIs: m5.large in the dual-stack subnet, m5.large in the IPv4-only one, t2.medium dual-stack. */
  nitro6: string;
  nitro4: string;
  xen6: string;
  subnet6: string;
}

type Add = (cidr: string, ipv6: boolean) => string;
type Launch = (type: string, subnetId: string) => string;

function build(add: Add, launch: Launch): Omit<World, 'port'> {
  const s4 = add('10.0.0.0/24', false);
  const s6 = add('10.0.1.0/24', true);
  return { nitro4: launch('m5.large', s4), nitro6: launch('m5.large', s6), xen6: launch('t2.medium', s6), subnet6: s6 };
}

async function viaSim(t: TestContext): Promise<World> {
  ensureDummyAwsCredentials();
  const sim = new SimCloud({ seed: 7, vpcIpv6Cidrs: [VPC6] });
  await sim.start();
  t.after(() => sim.stop());
  const api = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint, maxAttempts: 1 });
  t.after(() => api.close());
  const w = build(
    (cidr, v6) => sim.addSubnet({ cidr, ...(v6 ? { ipv6Cidr: true } : {}) }).subnetId,
    (instanceType, subnetId) => sim.launchInstance({ instanceType, subnetId }).primaryEniId,
  );
  return { port: api, ...w };
}

function inMemory(t: TestContext): Promise<World> {
  const mem = new MemoryEc2({ seed: 7, vpcIpv6Cidrs: [VPC6] });
  t.after(() => mem.stop());
  const w = build(
    (cidr, v6) => mem.addSubnet(cidr, v6 ? { ipv6Cidr: true } : {}).subnetId,
    (type, subnetId) => mem.launchInstance(type, subnetId).primaryEniId,
  );
  return Promise.resolve({ port: mem, ...w });
}

async function rejects(p: Promise<unknown>, code: string, message: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof Ec2Error, `an Ec2Error, got ${String(e)}`);
    assert.equal(e.code, code);
    assert.match(e.message, message);
    assert.equal(e.kind, 'client');
    return true;
  });
}

for (const [name, make] of [
  ['Ec2Api over HTTP to the sim', viaSim],
  ['MemoryEc2', inMemory],
] as const) {
  test(`${name}: assign a /80 and describe it`, async (t) => {
    const w = await make(t);
    const got = await w.port.assignIpv6Prefixes(w.nitro6, 2);
    assert.deepEqual(got, ['2600:1f14:abc:de00:1::/80', '2600:1f14:abc:de00:2::/80']);
    const [eni] = await w.port.describeEnis([w.nitro6]);
    assert.deepEqual(eni!.ipv6Prefixes, got);
    assert.equal(eni!.ipv6Addresses, undefined, 'no IPv6 address: the subnet does not assign on creation');
    const subnets = await w.port.describeSubnets({ 'subnet-id': [w.subnet6] });
    assert.deepEqual(subnets[0]!.ipv6Cidrs, ['2600:1f14:abc:de00::/64']);
  });

  test(`${name}: EC2's refusals for IPv6 prefixes`, async (t) => {
    const w = await make(t);
    await rejects(w.port.assignIpv6Prefixes(w.nitro4, 1), 'InvalidParameterValue', /does not have an IPv6 CIDR block/);
    await rejects(w.port.assignIpv6Prefixes(w.nitro6, 11), 'InvalidParameterValue', /exceed limit \(10 per interface/);
    await rejects(w.port.assignIpv6Prefixes(w.xen6, 1), 'InvalidParameterValue', /not supported on instance type t2/);
    assert.equal((await w.port.assignIpv6Prefixes(w.nitro6, 10)).length, 10, 'the limit itself is allowed');
  });
}
