/**
 * Subnet discovery and failover with the real ipamd process on the simulated cloud (real
 * SDK, real gRPC, stand-in CRI), ENABLE_SUBNET_DISCOVERY at its default (true):
 * - three subnets tagged `kubernetes.io/role/cni=1` with different free counts (the node
 *   subnet tagged `=0`): each new ENI lands in the subnet with the most free addresses at
 *   the time of its creation;
 * - the subnet the node's ENIs are in is drained by a neighbour mid-burst: EC2 refuses
 *   the next assign there (InsufficientFreeAddressesInSubnet), the subnet is marked
 *   exhausted and the burst completes on new ENIs in the next subnet, with no failed ADD;
 * - every eligible subnet dry: the ADD that needs a new ENI fails, its message listing
 *   each exhausted subnet.
 * The EC2 calls of each scenario are printed (t.diagnostic); each ends with the
 * "nothing lost" check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { CreateNetworkInterfaceCommand, CreateTagsCommand } from '@aws-sdk/client-ec2';
import type { Subnet } from '../../sim/index.js';
import type { GrpcError } from '../../kit/ipamd-client.js';
import { createLifecycleNode, nothingLost, waitUnfrozen, type LifecycleNode } from '../helpers/lifecycle-node.js';
import { addOnEc2, waitConverged } from '../helpers/unknown-outcome.js';

const ROLE = 'kubernetes.io/role/cni';

/** A node whose own subnet is tagged out, with three tagged subnets: /26 (59 free), /26 less `takenB`, /27 (27 free). */
async function discoveryNode(
  t: { after(fn: () => Promise<void> | void): void },
  instanceType: string,
  takenB: number,
): Promise<{ n: LifecycleNode; a: Subnet; b: Subnet; c: Subnet }> {
  const n = await createLifecycleNode({ instanceType, env: { WARM_IP_TARGET: '2', ENI_IPAM_ADD_WAIT_TIMEOUT: '20s' } });
  t.after(() => n.close());
  const sim = n.h.sim;
  const tags = { [ROLE]: '1' };
  const a = sim.addSubnet({ cidr: '10.0.64.0/26', tags });
  const b = sim.addSubnet({ cidr: '10.0.65.0/26', tags });
  const c = sim.addSubnet({ cidr: '10.0.66.0/27', tags });
  await n.ec2.send(new CreateTagsCommand({ Resources: [n.h.subnetId], Tags: [{ Key: ROLE, Value: '0' }] }));
  // Someone else's ENI takes addresses of b (untagged: not ours, never touched).
  await n.ec2.send(
    new CreateNetworkInterfaceCommand({ SubnetId: b.subnetId, SecondaryPrivateIpAddressCount: takenB - 1 }),
  );
  await n.start();
  await waitUnfrozen(n);
  return { n, a, b, c };
}

/** Subnet of each of the node's secondary ENIs, by device index. */
function landed(n: LifecycleNode): string[] {
  return [...n.h.sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === n.h.instanceId && e.attachment.deviceIndex > 0)
    .sort((x, y) => x.attachment!.deviceIndex - y.attachment!.deviceIndex)
    .map((e) => e.subnetId);
}

/** EC2 calls since `from`, per action (`!code` for refusals). */
function callsPerAction(n: LifecycleNode, from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of n.h.sim.calls.slice(from)) {
    const k = `${c.action}${c.errorCode ? `!${c.errorCode}` : ''}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

test('discovery: each new ENI lands in the tagged subnet with the most free addresses; nothing lost', async (t) => {
  // a: 59 free; b: 59 - 4 = 55; c: 27. ENI 1 takes 10 of a (49 left) → ENI 2 goes to b.
  const { n, a, b, c } = await discoveryNode(t, 'm5.large', 4);
  const from = 0;
  const pods = Array.from({ length: 25 }, (_, i) => `d${i}`);
  await Promise.all(pods.map((id) => addOnEc2(n, id)));
  const where = landed(n);
  const name = (id: string) => ({ [a.subnetId]: 'a', [b.subnetId]: 'b', [c.subnetId]: 'c' })[id] ?? id;
  t.diagnostic(`ENIs landed in: ${where.map((id) => `${name(id)} (${id})`).join(', ')}`);
  t.diagnostic(`EC2 calls: ${JSON.stringify(callsPerAction(n, from))}`);
  assert.deepEqual(where.map(name), ['a', 'b'], 'most free at each creation: a (59), then b (55 > 49)');
  assert.ok(!where.includes(n.h.subnetId), 'the node subnet is tagged =0');
  // The placement's describes filter by VPC and zone; by-id describes are the free-addresses gauge's (after reconciles).
  const placementDescribes = n.h.sim.calls.filter(
    (x) => x.action === 'DescribeSubnets' && Object.values(x.params).includes('vpc-id'),
  ).length;
  t.diagnostic(`DescribeSubnets for placement: ${placementDescribes}, for ${where.length} ENIs`);
  assert.ok(placementDescribes >= 1 && placementDescribes <= where.length, 'at most one DescribeSubnets per new ENI');
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
});

test('the subnet of the ENIs runs dry mid-burst: the burst completes from the next subnet, no failed ADD; nothing lost', async (t) => {
  // m5.xlarge: 4 ENIs x 14 secondary IPs. a: 59 free; b: 59 - 10 = 49; c: 27.
  const { n, a, b, c } = await discoveryNode(t, 'm5.xlarge', 10);
  const name = (id: string) => ({ [a.subnetId]: 'a', [b.subnetId]: 'b', [c.subnetId]: 'c' })[id] ?? id;
  const first = Array.from({ length: 18 }, (_, i) => `f${i}`);
  await Promise.all(first.map((id) => addOnEc2(n, id)));
  assert.deepEqual(landed(n).map(name), ['a']);
  // A neighbour takes every free address of a: the next assign on the ENI there is refused by EC2.
  const sa = n.h.sim.state.subnets.get(a.subnetId)!;
  sa.addresses.allocate(sa.addresses.freeCount());
  const from = n.h.sim.calls.length;
  const second = Array.from({ length: 22 }, (_, i) => `s${i}`);
  const results = await Promise.allSettled(second.map((id) => addOnEc2(n, id)));
  const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [`${second[i]}: ${String(r.reason)}`] : []));
  // Each ADD ended within its 20 s wait, so a's 30 s mark (set mid-burst) still stands: /v1/status lists it.
  const marks = (await n.status()).exhaustedSubnets as Array<{ subnetId: string; code: string; until: string }>;
  const where = landed(n);
  t.diagnostic(`ENIs landed in: ${where.map((id) => `${name(id)} (${id})`).join(', ')}`);
  t.diagnostic(`exhausted subnets in /v1/status: ${JSON.stringify(marks)}`);
  t.diagnostic(`EC2 calls after the drain: ${JSON.stringify(callsPerAction(n, from))}`);
  t.diagnostic(`EC2 calls in all: ${JSON.stringify(callsPerAction(n, 0))}`);
  assert.deepEqual(failed, [], 'no failed ADD');
  assert.equal(where[0], a.subnetId);
  assert.ok(where.length >= 2, 'new ENIs were created after the drain');
  for (const id of where.slice(1)) assert.notEqual(id, a.subnetId, 'no new ENI in the drained subnet');
  assert.equal(name(where[1]!), 'b', 'the next most free subnet');
  const refused = n.h.sim.calls
    .slice(from)
    .filter((x) => x.errorCode === 'InsufficientFreeAddressesInSubnet' && x.params.SubnetId !== b.subnetId);
  assert.ok(refused.length >= 1, 'EC2 refused in the drained subnet (the failover was exercised)');
  assert.deepEqual(
    marks.map((m) => [name(m.subnetId), m.code]),
    [['a', 'InsufficientFreeAddressesInSubnet']],
    '/v1/status lists the drained subnet as exhausted',
  );
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
});

test('every eligible subnet dry: the waiting ADD fails with a message listing each exhausted subnet; nothing lost', async (t) => {
  const { n, a, b, c } = await discoveryNode(t, 'm5.large', 4);
  for (const s of [a, b, c]) {
    const sa = n.h.sim.state.subnets.get(s.subnetId)!;
    sa.addresses.allocate(sa.addresses.freeCount());
  }
  const from = n.h.sim.calls.length;
  // The primary ENI (node subnet, tagged =0 for new ENIs only) serves its 9; the 10th needs a new ENI.
  for (let i = 0; i < 9; i++) await addOnEc2(n, `p${i}`);
  const err = await n.add('p9').then(
    () => undefined,
    (e: GrpcError) => e,
  );
  t.diagnostic(`ADD failure: ${err?.details}`);
  t.diagnostic(`EC2 calls: ${JSON.stringify(callsPerAction(n, from))}`);
  assert.equal(err?.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.match(err?.details ?? '', /every eligible subnet has no free addresses/);
  for (const s of [a, b, c]) assert.match(err?.details ?? '', new RegExp(s.subnetId));
  assert.deepEqual(landed(n), [], 'no ENI was created');
  n.cri.removePod('p9'); // kubelet tears the failed sandbox down
  await n.client.del('p9');
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
});
