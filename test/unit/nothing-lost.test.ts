/**
 * The "nothing lost" check itself ({@link findLosses}), table-driven over hand-built sim
 * states and call logs, with prefix delegation: a pod whose IP lies inside a /28 prefix
 * EC2 shows on an attached ENI is fine; an Unassign of that prefix (`Ipv4Prefix.N`),
 * the prefix gone from EC2, or the ENI detached is each a loss.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ApiCallRecord, Eni, SimState } from '../../sim/index.js';
import { eniPodAddresses, findLosses, prefixAddresses, type LossInput } from '../../kit/nothing-lost.js';

const INSTANCE = 'i-0123456789abcdef0';
const T0 = 1_700_000_000_000;

function eni(p: Partial<Eni> & { networkInterfaceId: string }): Eni {
  return {
    subnetId: 'subnet-1',
    vpcId: 'vpc-1',
    availabilityZone: 'us-west-2a',
    description: '',
    macAddress: '02:00:00:00:00:01',
    primaryIp: '10.0.0.10',
    secondaryIps: [],
    ipv4Prefixes: [],
    ipv6Addresses: [],
    ipv6Prefixes: [],
    status: 'in-use',
    tags: {},
    securityGroupIds: [],
    sourceDestCheck: true,
    ownerId: '1',
    createdAt: T0,
    attachment: {
      attachmentId: `attach-${p.networkInterfaceId}`,
      instanceId: INSTANCE,
      deviceIndex: 0,
      status: 'attached',
      deleteOnTermination: true,
      attachTime: T0,
    },
    ...p,
  };
}

function input(
  enis: Eni[],
  calls: Array<Partial<ApiCallRecord> & { action: string; params: Record<string, string> }> = [],
  live = [{ ip: '10.0.0.35', id: 'sb1' }],
): LossInput {
  const state: SimState = {
    region: 'us-west-2',
    availabilityZone: 'us-west-2a',
    vpcId: 'vpc-1',
    vpcCidr: '10.0.0.0/16',
    accountId: '1',
    subnets: new Map(),
    instances: new Map(),
    enis: new Map(enis.map((e) => [e.networkInterfaceId, e])),
  };
  return {
    live: live.map((s) => ({ id: s.id, ip: s.ip, podName: `pod-${s.id}`, podNamespace: 'default', createdAtMs: T0 })),
    ipAtStart: new Map(live.map((s) => [s.id, s.ip])),
    sim: state,
    instanceId: INSTANCE,
    calls: calls.map((c) => ({ at: T0 + 1000, ok: true, ...c })),
    allocations: live.map((s) => ({ containerID: s.id, ipv4: s.ip })),
  };
}

test('prefixAddresses and eniPodAddresses cover every address of a /28', () => {
  const a = prefixAddresses('10.0.0.32/28');
  assert.equal(a.length, 16);
  assert.equal(a[0], '10.0.0.32');
  assert.equal(a[15], '10.0.0.47');
  assert.deepEqual(eniPodAddresses({ secondaryIps: ['10.0.0.5'], ipv4Prefixes: ['10.0.0.32/28'] }).length, 17);
});

test('prefix mode: losses are found by content, one line per violation', () => {
  const withPrefix = eni({ networkInterfaceId: 'eni-a', ipv4Prefixes: ['10.0.0.32/28'] });
  const cases: Array<{ name: string; i: LossInput; want: RegExp[] }> = [
    { name: 'a pod inside a prefix EC2 shows on an attached ENI', i: input([withPrefix]), want: [] },
    {
      name: 'the prefix is gone from EC2',
      i: input([eni({ networkInterfaceId: 'eni-a' })]),
      want: [/EC2 has its IP 10\.0\.0\.35 on no ENI/],
    },
    {
      name: 'an Unassign of the prefix holding a live pod',
      i: input(
        [withPrefix],
        [
          {
            action: 'UnassignPrivateIpAddresses',
            params: { NetworkInterfaceId: 'eni-a', 'Ipv4Prefix.1': '10.0.0.32/28' },
          },
        ],
      ),
      want: [/UnassignPrivateIpAddresses of prefix 10\.0\.0\.32\/28, which holds 10\.0\.0\.35/],
    },
    {
      name: 'an Unassign of another prefix is fine',
      i: input(
        [withPrefix],
        [
          {
            action: 'UnassignPrivateIpAddresses',
            params: { NetworkInterfaceId: 'eni-a', 'Ipv4Prefix.1': '10.0.0.48/28' },
          },
        ],
      ),
      want: [],
    },
    {
      name: 'an Unassign of the prefix before the pod existed is fine',
      i: input(
        [withPrefix],
        [
          {
            action: 'UnassignPrivateIpAddresses',
            at: T0 - 1,
            params: { NetworkInterfaceId: 'eni-a', 'Ipv4Prefix.1': '10.0.0.32/28' },
          },
        ],
      ),
      want: [],
    },
    {
      name: 'the ENI holding the prefix is detached and deleted',
      i: input(
        [withPrefix],
        [
          { action: 'DetachNetworkInterface', params: { AttachmentId: 'attach-eni-a' } },
          { action: 'DeleteNetworkInterface', params: { NetworkInterfaceId: 'eni-a' } },
        ],
      ),
      want: [/DetachNetworkInterface of attach-eni-a/, /DeleteNetworkInterface of eni-a/],
    },
    {
      name: 'the ENI holding the prefix is not attached to the instance',
      i: input([
        eni({
          networkInterfaceId: 'eni-a',
          ipv4Prefixes: ['10.0.0.32/28'],
          status: 'available',
          attachment: undefined as never,
        }),
      ]),
      want: [/is on eni-a, which is not attached/],
    },
  ];
  for (const c of cases) {
    const got = findLosses(c.i);
    assert.equal(got.length, c.want.length, `${c.name}: ${JSON.stringify(got)}`);
    c.want.forEach((re, k) => assert.match(got[k]!, re, c.name));
  }
});

test('an address unassigned while free during the sandbox creation and assigned back before the hand-out is no loss', () => {
  const a = eni({ networkInterfaceId: 'eni-a', secondaryIps: ['10.0.0.35'] });
  const live = [{ ip: '10.0.0.35', id: 'sb1' }];
  const unassign = {
    action: 'UnassignPrivateIpAddresses',
    at: T0 + 100,
    durationMs: 50,
    params: { NetworkInterfaceId: 'eni-a', 'PrivateIpAddress.1': '10.0.0.35' },
  };
  const assignAgain = (at: number, assigned = ['10.0.0.35']) => ({
    action: 'AssignPrivateIpAddresses',
    at,
    durationMs: 40,
    assigned,
    params: { NetworkInterfaceId: 'eni-a', SecondaryPrivateIpAddressCount: '1' },
  });
  const lost = /UnassignPrivateIpAddresses of 10\.0\.0\.35 \(live pod pod-sb1\)/;
  const cases: Array<{
    name: string;
    calls: Array<Parameters<typeof input>[1]>[number];
    handedOutAt?: number;
    lost: boolean;
  }> = [
    {
      name: 're-assigned after the unassign completed, handed out after',
      calls: [unassign, assignAgain(T0 + 200)],
      handedOutAt: T0 + 300,
      lost: false,
    },
    { name: 'no hand-out time known', calls: [unassign, assignAgain(T0 + 200)], lost: true },
    {
      name: 'handed out before the re-assign completed',
      calls: [unassign, assignAgain(T0 + 200)],
      handedOutAt: T0 + 220,
      lost: true,
    },
    {
      name: 're-assign sent while the unassign was in flight',
      calls: [unassign, assignAgain(T0 + 120)],
      handedOutAt: T0 + 300,
      lost: true,
    },
    {
      name: 'the re-assign gave other addresses',
      calls: [unassign, assignAgain(T0 + 200, ['10.0.0.36'])],
      handedOutAt: T0 + 300,
      lost: true,
    },
    {
      name: 'the unassign has no answer yet',
      calls: [{ ...unassign, durationMs: undefined }, assignAgain(T0 + 200)],
      handedOutAt: T0 + 300,
      lost: true,
    },
  ];
  for (const c of cases) {
    const i = input([a], c.calls as never, live);
    if (c.handedOutAt !== undefined) i.handedOutAt = new Map([['sb1', c.handedOutAt]]);
    const got = findLosses(i);
    assert.equal(
      got.some((l) => lost.test(l)),
      c.lost,
      `${c.name}: ${JSON.stringify(got)}`,
    );
  }
});
