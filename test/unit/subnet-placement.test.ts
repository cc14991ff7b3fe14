/**
 * The placement of new ENIs, pure part (subnet-placement.ts): discovery eligibility by
 * the `kubernetes.io/role/cni` tag, ranking by most free, ENIConfig subnets and security
 * groups, exhausted marks and the reasons that list them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Ec2Subnet } from '../../ipamd/cloud/ec2-port.js';
import type { EniConfigSelection } from '../../ipamd/controller/eni-lifecycle/placement-types.js';
import {
  CNI_ROLE_TAG,
  discoveryEligible,
  exhaustedReason,
  planPlacement,
  type ExhaustedMark,
  type PlacementFacts,
} from '../../ipamd/controller/eni-lifecycle/subnet-placement.js';

const node = {
  subnetId: 'subnet-node',
  cidr: '10.0.0.0/24',
  vpcId: 'vpc-1',
  availabilityZone: 'us-west-2a',
  securityGroupIds: ['sg-primary'],
};

function sn(id: string, free: number, tags: Record<string, string> = {}, over: Partial<Ec2Subnet> = {}): Ec2Subnet {
  return {
    subnetId: id,
    cidr: `10.0.${id.length}.0/24`,
    availableIps: free,
    vpcId: 'vpc-1',
    availabilityZone: 'us-west-2a',
    tags,
    ...over,
  };
}

function facts(p: Partial<PlacementFacts>): PlacementFacts {
  return {
    selection: { state: 'off' },
    discovery: true,
    node,
    exhausted: new Map(),
    now: 1000,
    ...p,
  };
}

const ids = (f: PlacementFacts): string[] => {
  const p = planPlacement(f);
  assert.ok(p.ok, `plan failed: ${p.ok ? '' : p.reason}`);
  return p.candidates.map((c) => c.subnetId);
};

test('discovery eligibility: tag =1 (any value but 0) opts in, =0 opts out, the node subnet is in unless =0', () => {
  assert.equal(discoveryEligible({ subnetId: 'subnet-x', tags: { [CNI_ROLE_TAG]: '1' } }, 'subnet-node'), true);
  assert.equal(discoveryEligible({ subnetId: 'subnet-x', tags: { [CNI_ROLE_TAG]: '' } }, 'subnet-node'), true);
  assert.equal(discoveryEligible({ subnetId: 'subnet-x', tags: {} }, 'subnet-node'), false);
  assert.equal(discoveryEligible({ subnetId: 'subnet-x', tags: { [CNI_ROLE_TAG]: '0' } }, 'subnet-node'), false);
  assert.equal(discoveryEligible({ subnetId: 'subnet-node', tags: {} }, 'subnet-node'), true);
  assert.equal(discoveryEligible({ subnetId: 'subnet-node', tags: { [CNI_ROLE_TAG]: '0' } }, 'subnet-node'), false);
});

test('discovery: eligible subnets of the node VPC and zone, most free first, primary ENI security groups', () => {
  const subnets = [
    sn('subnet-node', 20),
    sn('subnet-a', 100, { [CNI_ROLE_TAG]: '1' }),
    sn('subnet-b', 300, { [CNI_ROLE_TAG]: '1' }),
    sn('subnet-untagged', 5000),
    sn('subnet-zone-b', 9000, { [CNI_ROLE_TAG]: '1' }, { availabilityZone: 'us-west-2b' }),
    sn('subnet-other-vpc', 9000, { [CNI_ROLE_TAG]: '1' }, { vpcId: 'vpc-2' }),
    sn('subnet-off', 9000, { [CNI_ROLE_TAG]: '0' }),
  ];
  const p = planPlacement(facts({ subnets }));
  assert.ok(p.ok);
  assert.deepEqual(
    p.candidates.map((c) => [c.subnetId, c.availableIps]),
    [
      ['subnet-b', 300],
      ['subnet-a', 100],
      ['subnet-node', 20],
    ],
  );
  assert.equal(p.source, 'subnet discovery');
  for (const c of p.candidates) assert.deepEqual(c.securityGroupIds, ['sg-primary']);
  assert.equal(p.candidates[0]!.cidr, subnets[2]!.cidr, 'each candidate carries its own CIDR');
});

test('discovery: the node subnet tagged =0 is skipped; none eligible is a blocking reason naming the tag', () => {
  const off = { [CNI_ROLE_TAG]: '0' };
  assert.deepEqual(ids(facts({ subnets: [sn('subnet-node', 50, off), sn('subnet-a', 10, { [CNI_ROLE_TAG]: '1' })] })), [
    'subnet-a',
  ]);
  const p = planPlacement(facts({ subnets: [sn('subnet-node', 50, off), sn('subnet-x', 10)] }));
  assert.equal(p.ok, false);
  assert.ok(!p.ok && p.kind === 'subnets_exhausted');
  assert.match(!p.ok ? p.reason : '', /node subnet subnet-node is tagged kubernetes\.io\/role\/cni=0/);
});

test('discovery off, or its describe failed: the node subnet alone', () => {
  const subnets = [sn('subnet-node', 1), sn('subnet-a', 900, { [CNI_ROLE_TAG]: '1' })];
  assert.deepEqual(ids(facts({ discovery: false, subnets })), ['subnet-node']);
  const failed = planPlacement(facts({}));
  assert.ok(failed.ok);
  assert.deepEqual(
    failed.candidates.map((c) => [c.subnetId, c.cidr]),
    [['subnet-node', '10.0.0.0/24']],
  );
  assert.match(failed.source, /subnet discovery unavailable/);
});

test('custom networking: the ENIConfig subnets (discovery not consulted), most free first, ties in list order', () => {
  const sel: EniConfigSelection = {
    state: 'ok',
    name: 'us-west-2a',
    selectedBy: 'label k8s.amazonaws.com/eniConfig=us-west-2a',
    subnetIds: ['subnet-c1', 'subnet-c2', 'subnet-c3'],
    securityGroupIds: ['sg-1', 'sg-2'],
  };
  const subnets = [
    sn('subnet-c1', 50, {}, { cidr: '100.64.0.0/19' }),
    sn('subnet-c2', 80, {}, { cidr: '100.64.32.0/19' }),
    sn('subnet-c3', 50, {}, { cidr: '100.64.64.0/19' }),
  ];
  const p = planPlacement(facts({ selection: sel, subnets }));
  assert.ok(p.ok);
  assert.deepEqual(
    p.candidates.map((c) => c.subnetId),
    ['subnet-c2', 'subnet-c1', 'subnet-c3'],
  );
  assert.deepEqual(p.candidates[0]!.securityGroupIds, ['sg-1', 'sg-2']);
  assert.equal(p.candidates[0]!.cidr, '100.64.32.0/19');
  assert.match(p.source, /ENIConfig "us-west-2a" \(label k8s\.amazonaws\.com\/eniConfig=us-west-2a\)/);
  // No security groups in the ENIConfig: the primary ENI's.
  const noSg = planPlacement(facts({ selection: { ...sel, securityGroupIds: [] }, subnets }));
  assert.ok(noSg.ok);
  assert.deepEqual(noSg.candidates[0]!.securityGroupIds, ['sg-primary']);
  // Not described (and never before): no CIDR, nothing to create in; transient.
  const blind = planPlacement(facts({ selection: sel }));
  assert.ok(!blind.ok && blind.kind === 'unavailable');
});

test('custom networking: a missing ENIConfig is a blocking reason naming it and what selected it', () => {
  const p = planPlacement(
    facts({
      selection: {
        state: 'missing',
        name: 'us-west-2z',
        selectedBy: 'label k8s.amazonaws.com/eniConfig=us-west-2z',
        reason: 'ENIConfig not found',
      },
    }),
  );
  assert.ok(!p.ok);
  assert.equal(p.kind, 'eniconfig');
  assert.match(p.reason, /ENIConfig not found.*"us-west-2z".*label k8s\.amazonaws\.com\/eniConfig=us-west-2z/);
});

test('exhausted subnets are left out until their mark expires; all exhausted lists every one', () => {
  const subnets = [
    sn('subnet-node', 10),
    sn('subnet-a', 100, { [CNI_ROLE_TAG]: '1' }),
    sn('subnet-b', 50, { [CNI_ROLE_TAG]: '1' }),
  ];
  const exhausted = new Map<string, ExhaustedMark>([
    ['subnet-a', { code: 'InsufficientFreeAddressesInSubnet', untilMs: 31_000 }],
  ]);
  assert.deepEqual(ids(facts({ subnets, exhausted })), ['subnet-b', 'subnet-node']);
  assert.deepEqual(ids(facts({ subnets, exhausted, now: 31_000 })), ['subnet-a', 'subnet-b', 'subnet-node'], 'expired');
  exhausted.set('subnet-b', { code: 'InsufficientCidrBlocks', untilMs: 20_000 });
  exhausted.set('subnet-node', { code: 'InsufficientFreeAddressesInSubnet', untilMs: 40_000 });
  const p = planPlacement(facts({ subnets, exhausted }));
  assert.ok(!p.ok);
  assert.equal(p.kind, 'subnets_exhausted');
  assert.match(
    p.reason,
    /^every eligible subnet has no free addresses: subnet-node \(InsufficientFreeAddressesInSubnet\), subnet-a \(InsufficientFreeAddressesInSubnet\), subnet-b \(InsufficientCidrBlocks\); grow paused for 19 s$/,
  );
});

test('one exhausted subnet keeps the single-subnet wording', () => {
  assert.equal(
    exhaustedReason([{ subnetId: 'subnet-1', code: 'InsufficientFreeAddressesInSubnet' }], 30_000),
    'the subnet has no free addresses (EC2 InsufficientFreeAddressesInSubnet for subnet-1); grow paused for 30 s',
  );
});

test('a subnet the describe shows with no free address is skipped without a call; all empty lists them', () => {
  const subnets = [
    sn('subnet-node', 0),
    sn('subnet-a', 0, { [CNI_ROLE_TAG]: '1' }),
    sn('subnet-b', 3, { [CNI_ROLE_TAG]: '1' }),
  ];
  assert.deepEqual(ids(facts({ subnets })), ['subnet-b']);
  const p = planPlacement(facts({ subnets: subnets.slice(0, 2) }));
  assert.ok(!p.ok && p.kind === 'subnets_exhausted');
  assert.match(p.reason, /subnet-node \(AvailableIpAddressCount 0\), subnet-a \(AvailableIpAddressCount 0\)/);
});

test('cluster-scoped subnet tags (cni.networking.k8s.aws/cluster/<name>): a tagged subnet serves only the named cluster', () => {
  const tags = { [CNI_ROLE_TAG]: '1', 'cni.networking.k8s.aws/cluster/blue': '1' };
  const s = { subnetId: 'subnet-x', tags };
  assert.equal(discoveryEligible(s, 'subnet-node', 'blue'), true);
  assert.equal(discoveryEligible(s, 'subnet-node', 'green'), false);
  assert.equal(discoveryEligible(s, 'subnet-node'), true, 'CLUSTER_NAME unset: not checked');
  assert.equal(
    discoveryEligible({ subnetId: 'subnet-y', tags: { [CNI_ROLE_TAG]: '1' } }, 'subnet-node', 'green'),
    true,
  );
  const subnets = [sn('subnet-node', 10), sn('subnet-blue', 500, tags)];
  assert.deepEqual(ids(facts({ subnets, node: { ...node, clusterName: 'green' } })), ['subnet-node']);
});
