/**
 * The (docs/design.md#10-the-warm-pool-at-depth) warm-pool fault scenarios that had no "nothing lost" ending elsewhere: the
 * real ipamd against the simulated cloud (stand-in CRI, so releases are not frozen):
 * - throttling of both EC2 action classes while pods come and go (grow and shrink both
 *   need EC2), then the throttle lifts;
 * - subnet exhaustion, for secondary IPs (InsufficientFreeAddressesInSubnet) and for /28
 *   prefixes (InsufficientCidrBlocks): a batch bigger than what is left is cut down, not
 *   refused, so every address the subnet has is served; waiting ADDs beyond fail with
 *   the reason, the pool keeps serving what it holds, and freed addresses are served again;
 * - item 5, "no release decision from a failed or partial describe": while every
 *   DescribeNetworkInterfaces fails, or fails on its second page, the leaked-ENI sweep
 *   deletes nothing and the reconcile changes nothing; once describes work, both act.
 * Each ends with the "nothing lost" check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { UnassignPrivateIpAddressesCommand } from '@aws-sdk/client-ec2';
import type { GrpcError } from '../../kit/ipamd-client.js';
import { ageEnis, createEniVia, createLifecycleNode, nothingLost, waitUnfrozen } from '../helpers/lifecycle-node.js';
import { releaseCallsSince } from '../../kit/nothing-lost.js';
import { addOnEc2, waitConverged } from '../helpers/unknown-outcome.js';
import { waitFor } from '../../kit/wait.js';
import { createRounds } from '../helpers/create-rounds.js';

test('throttled EC2 (both classes) while pods come and go: every ADD served with an IP EC2 shows; nothing lost once it lifts', async (t) => {
  const n = await createLifecycleNode({
    env: { WARM_IP_TARGET: '2', ENI_IPAM_SHRINK_DELAY: '1s', ENI_IPAM_ADD_WAIT_TIMEOUT: '20s' },
  });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  for (const id of ['live0', 'live1', 'live2']) await n.add(id);
  await waitFor('2 warm', async () => (await n.status()).counts.available >= 2);
  const from = n.h.sim.calls.length;
  n.h.sim.faults.setThrottle('mutating', { burst: 1, refillPerSecond: 0.5 });
  n.h.sim.faults.setThrottle('describe', { burst: 2, refillPerSecond: 1 });
  // Grow through the throttle (8 pods > 2 warm), then a surplus that shrink wants to release, then demand again.
  await Promise.all(Array.from({ length: 8 }, (_, i) => addOnEc2(n, `a${i}`)));
  for (let i = 0; i < 6; i++) await n.del(`a${i}`);
  const dels = n.h.sim.calls.length;
  await waitFor(
    'shrink to try releasing the surplus through the throttle',
    () => n.h.sim.calls.slice(dels).some((c) => c.action === 'UnassignPrivateIpAddresses'),
    15_000,
  );
  await Promise.all(Array.from({ length: 4 }, (_, i) => addOnEc2(n, `b${i}`)));
  const throttledCalls = () => n.h.sim.calls.slice(from).filter((c) => c.errorCode === 'RequestLimitExceeded');
  await waitFor('the cloud to throttle ipamd twice', () => throttledCalls().length >= 2, 10_000).catch(() => undefined);
  const throttled = throttledCalls();
  assert.ok(throttled.length >= 2, `the cloud throttled ipamd (${throttled.length} calls)`);
  n.h.sim.faults.setThrottle('mutating', null);
  n.h.sim.faults.setThrottle('describe', null);
  await waitConverged(n);
  assert.equal(new Set(n.pods.values()).size, n.pods.size, 'no IP twice');
  assert.deepEqual(await nothingLost(n), []);
});

test('subnet out of addresses: waiting ADDs fail saying so, the pool keeps serving, freed IPs are served again; nothing lost', async (t) => {
  // /28: 11 usable; the instance takes 1, the primary ENI fills with 9; a new ENI's primary takes the last.
  const n = await createLifecycleNode({ subnetCidr: '10.0.0.0/28', env: { ENI_IPAM_ADD_WAIT_TIMEOUT: '1500ms' } });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  await waitFor('the primary ENI filled', async () => (await n.status()).counts.total === 9);
  for (let i = 0; i < 9; i++) await addOnEc2(n, `p${i}`);
  await assert.rejects(
    n.add('p9'),
    (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED && /subnet has no free addresses/.test(e.details),
  );
  n.cri.removePod('p9'); // kubelet tears the failed sandbox down
  await n.client.del('p9');
  for (const id of ['p0', 'p1']) await n.del(id);
  for (const id of ['q0', 'q1']) await addOnEc2(n, id);
  // Each creation round asks for 9, 4, 2, then 1 (EC2 refuses a batch whole); a refused 1 pauses grow.
  const { rounds, calls } = createRounds(n.h.sim.calls);
  assert.ok(rounds >= 1 && rounds <= 2, `grow paused instead of hammering EC2: ${rounds} refused rounds`);
  assert.ok(calls <= 2 * 4, `${calls} CreateNetworkInterface calls`);
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
});

test('prefix delegation, no free /28 left (InsufficientCidrBlocks): every block served, ADDs beyond fail saying so; nothing lost', async (t) => {
  // /26: of its four /28 blocks the first (the instance's IP, AWS-reserved) and the last (broadcast) cannot be delegated.
  // WARM_PREFIX_TARGET=3 asks for more /28s than are left: EC2 refuses the batch whole, ipamd asks for fewer.
  const n = await createLifecycleNode({
    subnetCidr: '10.0.0.0/26',
    env: { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '3', ENI_IPAM_ADD_WAIT_TIMEOUT: '1500ms' },
  });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  for (let i = 0; i < 32; i++) await addOnEc2(n, `p${i}`);
  await assert.rejects(
    n.add('p32'),
    (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED && /InsufficientCidrBlocks/.test(e.details),
  );
  n.cri.removePod('p32');
  await n.client.del('p32');
  assert.ok(n.h.sim.calls.some((c) => c.errorCode === 'InsufficientCidrBlocks'));
  for (const id of ['p0', 'p1', 'p2']) await n.del(id);
  for (const id of ['q0', 'q1', 'q2']) await addOnEc2(n, id);
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
});

test('a failed or partial DescribeNetworkInterfaces decides nothing: no sweep delete, no reconcile change; both act once it reads', async (t) => {
  // One attempt per call: each failed describe still backs the describe class off (0.5 s doubling).
  const n = await createLifecycleNode({ env: { WARM_IP_TARGET: '2', ENI_IPAM_EC2_MAX_ATTEMPTS: '1' } });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  for (let i = 0; i < 9; i++) await n.add(`p${i}`);
  await waitFor('2 ENIs attached', async () => (await n.status()).counts.enis === 2);
  // The refill's assign must be done before `before` is taken: under load it can land after the attach.
  await waitFor('the pool refilled to WARM_IP_TARGET', async () => (await n.status()).counts.available >= 2);
  const tags = { 'node.k8s.amazonaws.com/instance_id': n.h.instanceId };
  const leaked = [
    await createEniVia(n, tags, `aws-K8S-${n.h.instanceId}`),
    await createEniVia(n, tags, `aws-K8S-${n.h.instanceId}`),
  ];
  // An available IP taken off the second ENI behind ipamd's back: only a complete describe may drop it.
  const second = [...n.h.sim.state.enis.values()].find(
    (e) => e.attachment?.instanceId === n.h.instanceId && e.attachment.deviceIndex === 1,
  )!;
  const spare = second.secondaryIps.find((ip) => ![...n.pods.values()].includes(ip))!;
  await n.ec2.send(
    new UnassignPrivateIpAddressesCommand({
      NetworkInterfaceId: second.networkInterfaceId,
      PrivateIpAddresses: [spare],
    }),
  );
  const before = await n.status();
  const from = n.h.sim.calls.length;
  for (const mode of ['every call fails', 'the second page fails'] as const) {
    n.h.sim.faults.reset();
    if (mode === 'every call fails')
      n.h.sim.faults.injectError({ action: 'DescribeNetworkInterfaces', code: 'InternalError', count: 100_000 });
    else {
      n.h.sim.faults.setDescribePageSize(1);
      n.h.sim.faults.injectError({
        action: 'DescribeNetworkInterfaces',
        code: 'InternalError',
        count: 100_000,
        laterPagesOnly: true,
      });
    }
    const passes = (await n.status()).eniLifecycle.reconcilePasses as number;
    await ageEnis(n, leaked);
    await waitFor(
      `${mode}: a failed sweep and two failed reconcile passes`,
      async () => {
        const s = (await n.status()).eniLifecycle;
        return (
          /describe failed/.test(s.lastSweep?.skipped ?? '') &&
          s.reconcilePasses >= passes + 2 &&
          s.lastReconcile?.ok === false
        );
      },
      40_000,
      100,
    );
    assert.deepEqual(releaseCallsSince(n.h.sim.calls, from), [], `${mode}: no release`);
    for (const id of leaked) assert.ok(n.h.sim.state.enis.has(id), `${mode}: ${id} kept`);
    const s = await n.status();
    assert.deepEqual(
      s.enis.map((e: { eniId: string; total: number }) => [e.eniId, e.total]),
      before.enis.map((e: { eniId: string; total: number }) => [e.eniId, e.total]),
      `${mode}: datastore unchanged`,
    );
  }
  n.h.sim.faults.reset();
  await waitFor(
    'the reconcile dropped the spare IP',
    async () => (await n.status()).eniLifecycle.lastReconcile?.removedIps.includes(spare),
    30_000,
  );
  await waitFor('the sweep deleted both leaks', () => leaked.every((id) => !n.h.sim.state.enis.has(id)), 30_000);
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
});
