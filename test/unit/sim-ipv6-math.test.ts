/**
 * The simulated cloud's IPv6 arithmetic, pure: CIDR parsing and normalising (ipaddr.js),
 * a VPC's /56 blocks and the /64 each subnet gets from them, and one subnet's /64
 * accounting of IPv6 addresses and /80 delegated prefixes (reserved addresses, no
 * overlap between an address and a prefix, all-or-nothing specific requests).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bigIntToIpv6, ipv6CidrContains, ipv6SubBlock, parseIpv6Cidr } from '../../sim/ipv6-cidr.js';
import { SubnetIpv6Addresses } from '../../sim/ipv6-pool.js';
import { addVpcIpv6Cidr, pickSubnetIpv6Cidr } from '../../sim/vpc-ipv6.js';
import { SubnetAddresses } from '../../sim/address-pool.js';
import type { SimState } from '../../sim/index.js';

const SUBNET = '2600:1f14:abc:de01::/64';

function state(): SimState {
  return {
    region: 'us-west-2',
    availabilityZone: 'us-west-2a',
    vpcId: 'vpc-0123456789abcdef0',
    vpcCidr: '10.0.0.0/16',
    accountId: '123456789012',
    subnets: new Map(),
    instances: new Map(),
    enis: new Map(),
  };
}

test('IPv6 CIDRs parse to their network address in compressed form; sub-blocks and containment', () => {
  const c = parseIpv6Cidr('2600:1f14:0abc:de01:0000:0000:0000:0007/64');
  assert.equal(c.cidr, SUBNET);
  assert.equal(c.size, 1n << 64n);
  assert.equal(bigIntToIpv6(c.base + 4n), '2600:1f14:abc:de01::4');
  const vpc = parseIpv6Cidr('2600:1f14:abc:de00::/56');
  assert.equal(ipv6SubBlock(vpc, 64, 0n), '2600:1f14:abc:de00::/64');
  assert.equal(ipv6SubBlock(vpc, 64, 255n), '2600:1f14:abc:deff::/64');
  assert.throws(() => ipv6SubBlock(vpc, 64, 256n));
  assert.equal(ipv6SubBlock(c, 80, 1n), '2600:1f14:abc:de01:1::/80');
  assert.ok(ipv6CidrContains(SUBNET, '2600:1f14:abc:de01:ffff::1'));
  assert.ok(!ipv6CidrContains(SUBNET, '2600:1f14:abc:de02::1'));
  assert.ok(!ipv6CidrContains(SUBNET, '10.0.0.1'));
  assert.throws(() => parseIpv6Cidr('10.0.0.0/16'), /not an IPv6 CIDR/);
});

test('VPC IPv6 blocks are /56s, five at most, never overlapping; the next one follows the last', () => {
  const s = state();
  assert.equal(addVpcIpv6Cidr(s), '2600:1f14:abc:de00::/56');
  assert.equal(addVpcIpv6Cidr(s), '2600:1f14:abc:df00::/56');
  assert.throws(() => addVpcIpv6Cidr(s, '2600:1f14:abc:de80::/57'), /\/56/);
  assert.throws(() => addVpcIpv6Cidr(s, '2600:1f14:abc:de00::/56'), /overlaps/);
  addVpcIpv6Cidr(s, '2a05:d018:1::/56');
  addVpcIpv6Cidr(s);
  addVpcIpv6Cidr(s);
  assert.equal(s.vpcIpv6Cidrs!.length, 5);
  assert.throws(() => addVpcIpv6Cidr(s), /quota 5/);
});

test('a subnet gets the lowest free /64 of the VPC, or a checked one', () => {
  const s = state();
  assert.throws(() => pickSubnetIpv6Cidr(s, true), /no IPv6 CIDR block/);
  addVpcIpv6Cidr(s, '2600:1f14:abc:de00::/56');
  const take = (cidr: string) =>
    s.subnets.set(cidr, {
      subnetId: `subnet-${s.subnets.size}`,
      cidr: `10.0.${s.subnets.size}.0/24`,
      vpcId: s.vpcId,
      availabilityZone: 'us-west-2a',
      addresses: new SubnetAddresses(`10.0.${s.subnets.size}.0/24`),
      tags: {},
      ipv6: { cidr, associationId: 'x', addresses: new SubnetIpv6Addresses(cidr) },
    });
  assert.equal(pickSubnetIpv6Cidr(s, true), '2600:1f14:abc:de00::/64');
  take('2600:1f14:abc:de00::/64');
  assert.equal(pickSubnetIpv6Cidr(s, true), '2600:1f14:abc:de01::/64');
  assert.equal(pickSubnetIpv6Cidr(s, '2600:1f14:abc:de07::/64'), '2600:1f14:abc:de07::/64');
  assert.throws(() => pickSubnetIpv6Cidr(s, '2600:1f14:abc:de00::/64'), /overlaps/);
  assert.throws(() => pickSubnetIpv6Cidr(s, '2600:1f14:abc:de00::/60'), /\/64/);
  assert.throws(() => pickSubnetIpv6Cidr(s, '2600:1f14:abc:ee00::/64'), /not inside a VPC IPv6 block/);
});

test('a subnet /64: addresses skip the reserved four, /80 prefixes skip blocks holding addresses', () => {
  const a = new SubnetIpv6Addresses(SUBNET);
  assert.deepEqual(a.allocate(2), ['2600:1f14:abc:de01::4', '2600:1f14:abc:de01::5']);
  // the first /80 holds reserved and used addresses: the first prefix is the second /80
  assert.deepEqual(a.allocatePrefixes(2), ['2600:1f14:abc:de01:1::/80', '2600:1f14:abc:de01:2::/80']);
  assert.ok(a.isUsed('2600:1f14:abc:de01:1::1234'));
  assert.equal(a.prefixCount(), 2);
  // an address inside a delegated /80 is in use; one in a free /80 blocks that /80
  assert.throws(() => a.allocateSpecific(['2600:1f14:abc:de01:2::9']), { code: 'InvalidIPAddress.InUse' });
  assert.deepEqual(a.allocateSpecific(['2600:1f14:abc:de01:3:0:0:9']), ['2600:1f14:abc:de01:3::9']);
  assert.deepEqual(a.allocatePrefixes(1), ['2600:1f14:abc:de01:4::/80']);
  assert.throws(() => a.allocateSpecific(['2600:1f14:abc:de01::1']), /reserved/);
  assert.throws(() => a.allocateSpecific(['2600:1f14:abc:de01:ffff:ffff:ffff:ffff']), /reserved/);
  assert.throws(() => a.allocateSpecific(['2600:1f14:abc:de02::9']), /does not fall within/);
  assert.throws(() => a.allocateSpecificPrefixes(['2600:1f14:abc:de01:5::1/80']), /aligned \/80/);
  assert.throws(() => a.allocateSpecificPrefixes(['2600:1f14:abc:de01:5::/96']), /aligned \/80/);
  assert.throws(() => a.allocateSpecificPrefixes(['2600:1f14:abc:de01:3::/80']), /in use or reserved/);
  assert.throws(() => a.allocateSpecificPrefixes(['2600:1f14:abc:de01:ffff::/80']), /in use or reserved/);
  // all or nothing: a bad second prefix leaves the first free
  assert.throws(() => a.allocateSpecificPrefixes(['2600:1f14:abc:de01:7::/80', '2600:1f14:abc:de01:3::/80']));
  assert.ok(!a.isUsed('2600:1f14:abc:de01:7::1'));
  a.releasePrefixes(['2600:1f14:abc:de01:1::/80']);
  a.release(['2600:1f14:abc:de01:3::9']);
  assert.deepEqual(a.allocatePrefixes(2), ['2600:1f14:abc:de01:1::/80', '2600:1f14:abc:de01:3::/80']);
});

test('a subnet /64 runs out of /80 prefixes with InsufficientCidrBlocks', () => {
  const a = new SubnetIpv6Addresses(SUBNET);
  assert.equal(a.allocatePrefixes(65534).length, 65534); // every /80 but the first and the last
  assert.throws(() => a.allocatePrefixes(1), { code: 'InsufficientCidrBlocks' });
  assert.deepEqual(a.allocate(1), ['2600:1f14:abc:de01::4']); // addresses still come from the first /80
});
