/**
 * The node condition / taint decision (ipamd/observability/node-ip-state.ts), table-driven:
 * the condition is False only when no new pod can be served; the taint only when that is
 * proven by the node's own evidence, never because releases are frozen from missing evidence.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  conditionBody,
  EXHAUSTED_TAINT,
  nodeIpState,
  taintsWith,
  type NodeIpFacts,
} from '../../ipamd/observability/node-ip-state.js';

const base: NodeIpFacts = {
  canServe: true,
  serveMessage: '5 IPs available',
  available: 5,
  frozen: false,
  freezeReasons: [],
  heldByFreeze: 0,
};
const subnetFull = {
  kind: 'subnet_full' as const,
  reason: 'the subnet has no free addresses (EC2 InsufficientFreeAddressesInSubnet for subnet-1)',
};
const eniLimit = { kind: 'eni_limit' as const, reason: 'instance type t3.medium is at its ENI limit (3 ENIs)' };
const empty = {
  canServe: false,
  serveMessage: 'no IP can be had now (9 assigned...) and the pool cannot grow: x',
  available: 0,
};

test('decision table', () => {
  const rows: Array<[string, Partial<NodeIpFacts>, { allocatable: boolean; reason: string; taint: boolean }]> = [
    ['healthy', {}, { allocatable: true, reason: 'IPsAvailable', taint: false }],
    ['IPs left, subnet full', { growBlocked: subnetFull }, { allocatable: true, reason: 'SubnetFull', taint: false }],
    ['IPs left, ENI limit', { growBlocked: eniLimit }, { allocatable: true, reason: 'EniLimitReached', taint: false }],
    [
      'IPs left, frozen',
      { frozen: true, freezeReasons: ['cri: unreadable'] },
      { allocatable: true, reason: 'ReleasesFrozen', taint: false },
    ],
    [
      'empty, subnet full',
      { ...empty, growBlocked: subnetFull },
      { allocatable: false, reason: 'SubnetFull', taint: true },
    ],
    [
      'empty, ENI limit',
      { ...empty, growBlocked: eniLimit },
      { allocatable: false, reason: 'EniLimitReached', taint: true },
    ],
    [
      'empty, not managed',
      { ...empty, growBlocked: { kind: 'not_managed', reason: 'DISABLE_NETWORK_RESOURCE_PROVISIONING' } },
      { allocatable: false, reason: 'PoolNotManaged', taint: true },
    ],
    [
      'IPs left, ENIConfig missing',
      { eniConfigBlocked: { kind: 'eniconfig_missing', reason: 'ENIConfig "a" is missing' } },
      { allocatable: true, reason: 'ENIConfigMissing', taint: false },
    ],
    [
      'IPs left, ENI limit and ENIConfig missing: the ENIConfig is named',
      { growBlocked: eniLimit, eniConfigBlocked: { kind: 'eniconfig_missing', reason: 'ENIConfig "a" is missing' } },
      { allocatable: true, reason: 'ENIConfigMissing', taint: false },
    ],
    [
      'empty, ENIConfig missing',
      { ...empty, growBlocked: { kind: 'eniconfig_missing', reason: 'ENIConfig "a" is missing' } },
      { allocatable: false, reason: 'ENIConfigMissing', taint: true },
    ],
    [
      'empty, ENIConfig unreadable (missing evidence: no taint)',
      { ...empty, growBlocked: { kind: 'eniconfig_unknown', reason: 'ENIConfigs cannot be read' } },
      { allocatable: false, reason: 'ENIConfigUnknown', taint: false },
    ],
    // The boundary: a freeze holding the addresses that would serve never taints.
    [
      'empty, ENI limit, frozen holding addresses',
      { ...empty, growBlocked: eniLimit, frozen: true, freezeReasons: ['kube: unreadable'], heldByFreeze: 4 },
      { allocatable: false, reason: 'ReleasesFrozen', taint: false },
    ],
    // Frozen but nothing held by it: the exhaustion is real, the freeze is not its cause.
    [
      'empty, subnet full, frozen holding nothing',
      { ...empty, growBlocked: subnetFull, frozen: true, freezeReasons: ['cri: unreadable'], heldByFreeze: 0 },
      { allocatable: false, reason: 'SubnetFull', taint: true },
    ],
  ];
  for (const [name, f, want] of rows) {
    const s = nodeIpState({ ...base, ...f });
    assert.deepEqual({ allocatable: s.allocatable, reason: s.reason, taint: s.taint }, want, name);
    assert.ok(s.message.length > 0 && s.message.length <= 1024, name);
  }
  const s = nodeIpState({
    ...base,
    ...empty,
    growBlocked: subnetFull,
    frozen: true,
    freezeReasons: ['cri: unreadable'],
  });
  assert.match(s.message, /releases frozen \(cri: unreadable\)/);
});

test('lastTransitionTime moves only when the status changes; heartbeat always now', () => {
  const ok = nodeIpState(base);
  const first = conditionBody(ok, undefined, '2026-01-01T00:00:00Z');
  assert.equal(first.lastTransitionTime, '2026-01-01T00:00:00Z');
  const again = conditionBody(nodeIpState({ ...base, growBlocked: subnetFull }), first, '2026-01-01T00:01:00Z');
  assert.equal(again.status, 'True');
  assert.equal(again.lastTransitionTime, '2026-01-01T00:00:00Z', 'reason change alone keeps the transition time');
  assert.equal(again.lastHeartbeatTime, '2026-01-01T00:01:00Z');
  const down = conditionBody(
    nodeIpState({ ...base, ...empty, growBlocked: subnetFull }),
    again,
    '2026-01-01T00:02:00Z',
  );
  assert.equal(down.status, 'False');
  assert.equal(down.lastTransitionTime, '2026-01-01T00:02:00Z');
});

test('taintsWith adds or removes only ours, keeps the others in order', () => {
  const other = { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' };
  const added = taintsWith([other], true, '2026-01-01T00:00:00Z')!;
  assert.deepEqual(added, [
    other,
    { key: EXHAUSTED_TAINT.key, effect: 'NoSchedule', timeAdded: '2026-01-01T00:00:00Z' },
  ]);
  assert.equal(taintsWith(added, true, 'x'), undefined, 'already there: no patch');
  assert.deepEqual(taintsWith(added, false, 'x'), [other]);
  assert.equal(taintsWith([other], false, 'x'), undefined);
  assert.equal(taintsWith(undefined, false, 'x'), undefined);
});
