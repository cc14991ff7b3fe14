/**
 * Custom networking in the pool (virtual time, the simulator's EC2 model in-process):
 * the primary ENI's addresses serve no new pod and are not in the pool, allocations
 * restored on it keep serving, and an ENIConfig refusal creates no ENI, blocks the
 * refill with its reason, and lifts the moment the ENIConfig is usable.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { executorKit } from '../helpers/executor-kit.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import type { EniConfigBlock } from '../../ipamd/eniconfig/select.js';
import { growBlockedReason } from '../../ipamd/pool/grow-limits.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

const key = (c: string) => ({ networkName: 'aws-cni', containerID: c, ifName: 'eth0' });

test('primary ENI closed: restored allocations keep serving, free addresses are not in the pool', () => {
  const ds = new Datastore(0, 'ip', { primaryServesNewPods: false });
  ds.upsertEni({
    eniId: 'eni-p',
    mac: '02:00:00:00:00:01',
    deviceNumber: 0,
    subnetId: 'subnet-a',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.10',
    isPrimary: true,
    createdAtMs: 0,
    capacity: 9,
  });
  ds.addIps('eni-p', ['10.0.0.11', '10.0.0.12', '10.0.0.13']);
  assert.equal(ds.restoreAllocation({ ...key('old'), ipv4: '10.0.0.12', eniId: 'eni-p', allocatedAt: 1 }), 'restored');
  const again = ds.assign(key('old'), undefined, 10);
  assert.equal(again.kind, 'existing', 'the restored pod is served its address');
  assert.equal(again.kind === 'existing' ? again.allocation.ipv4 : '', '10.0.0.12');
  assert.equal(ds.assign(key('new'), undefined, 10).kind, 'empty', 'no new pod on the primary ENI');
  assert.deepEqual(
    { total: ds.counts(10).total, assigned: ds.counts(10).assigned, available: ds.counts(10).available },
    { total: 1, assigned: 1, available: 0 },
  );
  const [v] = ds.poolViews(10);
  assert.deepEqual(
    { total: v!.total, assigned: v!.assigned, roomSlots: v!.roomSlots, capacity: v!.capacity },
    {
      total: 1,
      assigned: 1,
      roomSlots: 0,
      capacity: 9,
    },
  );
  // Released: it cools and then stays out of the pool; the addresses stay on the ENI (nothing is unassigned).
  ds.unassign(key('old'), 20);
  assert.equal(ds.counts(20).available, 0);
  assert.deepEqual(ds.eniIps('eni-p'), ['10.0.0.11', '10.0.0.12', '10.0.0.13']);
  const open = new Datastore(0, 'ip');
  open.upsertEni({ ...ds.getEni('eni-p')! });
  open.addIps('eni-p', ['10.0.0.11']);
  assert.equal(open.assign(key('new'), undefined, 10).kind, 'assigned', 'without custom networking the primary serves');
});

test('ENIConfig missing: no EC2 mutation, the refill is blocked naming it; once usable, a new ENI is created', async () => {
  let refusal: EniConfigBlock | undefined = {
    kind: 'eniconfig_missing',
    reason: 'custom networking: ENIConfig "pods-a" (label k8s.amazonaws.com/eniConfig=pods-a) is missing: …',
  };
  const k = executorKit({
    targets: { warmIpTarget: 2 },
    primaryServesNewPods: false,
    eniCreationRefused: () => refusal,
  });
  const out = await k.grow(1);
  assert.equal(out.changed, false);
  assert.match(out.blocked ?? '', /ENIConfig "pods-a" \(label k8s\.amazonaws\.com\/eniConfig=pods-a\) is missing/);
  assert.deepEqual(
    k.ec2.calls.map((c) => c.action).filter((a) => !a.startsWith('Describe')),
    [],
    'no EC2 mutation: the primary ENI gets no IP, no ENI is created',
  );
  assert.equal(k.grower.blockedKindNow(0)?.kind, 'eniconfig_missing');

  refusal = undefined;
  await k.grow(1);
  const ours = k.attached().filter((e) => e.attachment!.deviceIndex > 0);
  assert.equal(ours.length, 1, 'one ENI created once the ENIConfig is usable');
  assert.equal(k.ec2.count('AssignPrivateIpAddresses'), 0, 'still nothing assigned to the primary ENI');
  assert.ok(k.ds.counts(k.clock.now()).available >= 2, 'the new ENI serves the pool');
  assert.equal(k.grower.blockedKindNow(0), undefined);
  assert.ok(k.addPod().length > 0);
});

test('a refusal does not block what existing ENIs with room can serve', async () => {
  const k = executorKit({
    targets: { warmIpTarget: 2 },
    eniCreationRefused: () => ({ kind: 'eniconfig_unknown', reason: 'custom networking: not known yet' }),
  });
  const out = await k.grow(1);
  assert.equal(out.blocked, undefined, 'the primary ENI (not closed here) has room: no new ENI is needed');
  assert.equal(k.ec2.count('AssignPrivateIpAddresses'), 1);
  assert.equal(k.grower.blockedKindNow(0), undefined);
});

test('at the ENI limit, the blocked reason says the primary ENI serves no new pod', () => {
  const view = (eniId: string, isPrimary: boolean, closed: boolean) => ({
    eniId,
    deviceNumber: isPrimary ? 0 : 1,
    isPrimary,
    ...(closed ? { closed: true } : {}),
    createdAtMs: 0,
    capacity: 9,
    total: isPrimary ? 0 : 9,
    assigned: isPrimary ? 0 : 9,
    cooling: 0,
    roomSlots: 0,
  });
  const limits = { instanceType: 't3.small', instanceMaxEnis: 2, ipv4PerEni: 10 };
  const outside = { unmanaged: 0, pending: 0, orphans: 0, creating: 0 };
  const targets = { warmEniTarget: 1, maxEni: 2 };
  assert.match(
    growBlockedReason([view('eni-p', true, true), view('eni-1', false, false)], targets, limits, outside),
    /at its ENI limit \(2 ENIs\).*; the primary ENI serves no new pod \(custom networking/,
  );
  assert.doesNotMatch(
    growBlockedReason([view('eni-p', true, false), view('eni-1', false, false)], targets, limits, outside),
    /custom networking/,
  );
});
