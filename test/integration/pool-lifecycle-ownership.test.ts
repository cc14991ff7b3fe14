/**
 * docs/design.md#10-the-warm-pool-at-depth item 4, ENI ownership, against the real ipamd binary and the simulated cloud:
 * the leaked-ENI sweep deletes only our tagged, `available` ENIs older than 5 minutes
 * (in CLUSTER_NAME scope: any instance of the cluster; see ipamd/controller/eni-lifecycle/leak-sweep.ts),
 * never while releases are frozen, never with DISABLE_LEAKED_ENI_CLEANUP; untagged and
 * `no_manage=true` ENIs attached to the node are never touched, and new ENIs take the
 * first free device index around them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AttachNetworkInterfaceCommand } from '@aws-sdk/client-ec2';
import {
  createEniVia,
  createLifecycleNode,
  nothingLost,
  waitUnfrozen,
  type LifecycleNode,
} from '../helpers/lifecycle-node.js';
import { waitFor } from '../../kit/wait.js';

const OLD = new Date(Date.now() - 10 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const YOUNG = new Date(Date.now() + 60 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z'); // still young for the whole test

/** One ENI of each kind the sweep must tell apart; returns their ids by name. */
async function seedEnis(n: LifecycleNode): Promise<Record<string, string>> {
  const me = n.h.instanceId;
  const ours = (extra: Record<string, string> = {}) => ({
    'node.k8s.amazonaws.com/instance_id': me,
    'node.k8s.amazonaws.com/createdAt': OLD,
    'cluster.k8s.amazonaws.com/name': 'c1',
    ...extra,
  });
  return {
    oursOld: await createEniVia(n, ours(), `aws-K8S-${me}`, 2),
    otherNodeSameCluster: await createEniVia(
      n,
      ours({ 'node.k8s.amazonaws.com/instance_id': 'i-0terminated000000' }),
      'aws-K8S-i-0terminated000000',
    ),
    oursYoung: await createEniVia(n, ours({ 'node.k8s.amazonaws.com/createdAt': YOUNG }), `aws-K8S-${me}`),
    oursNoCreatedAt: await createEniVia(
      n,
      { 'node.k8s.amazonaws.com/instance_id': me, 'cluster.k8s.amazonaws.com/name': 'c1' },
      `aws-K8S-${me}`,
    ),
    untagged: await createEniVia(n, {}, `aws-K8S-${me}`),
    noManage: await createEniVia(n, ours({ 'node.k8s.amazonaws.com/no_manage': 'true' }), `aws-K8S-${me}`),
    otherCluster: await createEniVia(n, ours({ 'cluster.k8s.amazonaws.com/name': 'c2' }), `aws-K8S-${me}`),
    otherDescription: await createEniVia(n, ours(), 'my own ENI'),
  };
}

/**
 * Waits for the start-up settle (eni-settle.ts), which attaches or deletes this instance's
 * leftover ENIs at once whatever their age: the ENIs these sweep tests seed come after it.
 */
async function afterStartSettle(n: LifecycleNode): Promise<void> {
  await waitFor(
    'the start-up settle of leftover ENIs done',
    async () => (await n.status()).eniLifecycle?.startSettle != null,
    30_000,
  );
}

test('the sweep deletes only our tagged, available ENIs older than 5 minutes (cluster scope with CLUSTER_NAME)', async (t) => {
  const n = await createLifecycleNode({ env: { CLUSTER_NAME: 'c1' } });
  t.after(() => n.close());
  await n.start();
  await afterStartSettle(n);
  const e = await seedEnis(n);
  await waitUnfrozen(n);
  await waitFor(
    'the two leaks deleted',
    () => !n.h.sim.state.enis.has(e.oursOld!) && !n.h.sim.state.enis.has(e.otherNodeSameCluster!),
    10_000,
  );
  const passes = (await n.status()).eniLifecycle.lastSweep.at;
  await waitFor('two more sweeps', async () => (await n.status()).eniLifecycle.lastSweep.at > passes + 500, 10_000);
  for (const k of ['oursYoung', 'oursNoCreatedAt', 'untagged', 'noManage', 'otherCluster', 'otherDescription']) {
    assert.ok(n.h.sim.state.enis.has(e[k]!), `${k} kept`);
  }
  const deletes = n.h.sim.calls
    .filter((c) => c.action === 'DeleteNetworkInterface')
    .map((c) => c.params.NetworkInterfaceId)
    .sort();
  assert.deepEqual(deletes, [e.oursOld, e.otherNodeSameCluster].sort());
  // The sweep asked EC2 with filters, not by listing the account.
  const sweepDescribe = n.h.sim.calls.find(
    (c) => c.action === 'DescribeNetworkInterfaces' && Object.values(c.params).includes('available'),
  );
  assert.ok(sweepDescribe, 'a filtered describe');
});

test("without CLUSTER_NAME the sweep stays on this instance's ENIs", async (t) => {
  const n = await createLifecycleNode();
  t.after(() => n.close());
  await n.start();
  await afterStartSettle(n);
  const e = await seedEnis(n);
  await waitUnfrozen(n);
  // Tagged with our instance id: ours whatever its cluster tag says.
  await waitFor(
    'our leaks deleted',
    () => !n.h.sim.state.enis.has(e.oursOld!) && !n.h.sim.state.enis.has(e.otherCluster!),
    10_000,
  );
  // A whole sweep pass that began after those deletions has looked at every ENI again.
  const swept = Date.now();
  await waitFor(
    'a sweep pass after the deletions',
    async () => ((await n.status()).eniLifecycle.lastSweep?.at ?? 0) > swept,
    10_000,
  );
  assert.ok(
    n.h.sim.state.enis.has(e.otherNodeSameCluster!),
    "another instance's ENI is not ours to sweep without a cluster scope",
  );
  for (const k of ['oursYoung', 'oursNoCreatedAt', 'untagged', 'noManage', 'otherDescription'])
    assert.ok(n.h.sim.state.enis.has(e[k]!), `${k} kept`);
});

test('no sweep while releases are frozen, nor with DISABLE_LEAKED_ENI_CLEANUP=true', async (t) => {
  const n = await createLifecycleNode({ env: { CLUSTER_NAME: 'c1' } });
  t.after(() => n.close());
  await n.start({ CRI_RUNTIME_ENDPOINT: `unix://${n.h.dir}/no-such-cri.sock` });
  await afterStartSettle(n);
  const e = await seedEnis(n);
  // Wait for the state asserted (a sweep pass that ran and skipped), not a fixed time.
  const s = await waitFor(
    'a sweep pass skipped',
    async () => {
      const x = await n.status();
      return x.eniLifecycle.lastSweep?.skipped ? x : undefined;
    },
    15_000,
  );
  assert.equal(s.releasesFrozen, true);
  assert.match(s.eniLifecycle.lastSweep?.skipped ?? '', /frozen/);
  assert.ok(n.h.sim.state.enis.has(e.oursOld!), 'frozen: nothing deleted');
  await n.h.ipamd!.stop();
  await n.start({ DISABLE_LEAKED_ENI_CLEANUP: 'true' });
  await waitUnfrozen(n);
  // Not a wait: with the sweep off there is no pass to wait for; 1.5 s is five sweep intervals in which nothing may be deleted.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal((await n.status()).eniLifecycle.sweepEnabled, false);
  assert.equal(n.h.sim.countCalls('DeleteNetworkInterface'), 0);
});

test('the start-up settle deletes only what ipamd created for this node (and this cluster), whatever its age', async (t) => {
  // No warm target: the pool wants no new ENI, so each leftover is deleted, not attached.
  // The sweep's first run an hour away: what goes, the settle alone decided.
  const n = await createLifecycleNode({
    env: {
      CLUSTER_NAME: 'c1',
      WARM_ENI_TARGET: '0',
      WARM_IP_TARGET: '0',
      MINIMUM_IP_TARGET: '0',
      ENI_IPAM_LEAKED_ENI_SWEEP_JITTER: '1h',
    },
  });
  t.after(() => n.close());
  const e = await seedEnis(n);
  await n.start();
  await afterStartSettle(n);
  const settled = ['oursOld', 'oursYoung', 'oursNoCreatedAt'];
  await waitFor('the leftovers deleted', () => settled.every((k) => !n.h.sim.state.enis.has(e[k]!)), 10_000);
  for (const k of ['otherNodeSameCluster', 'untagged', 'noManage', 'otherCluster', 'otherDescription'])
    assert.equal(n.h.sim.state.enis.get(e[k]!)?.status, 'available', `${k} kept`);
  const s = await n.status();
  assert.deepEqual([...s.eniLifecycle.startSettle.deleted].sort(), settled.map((k) => e[k]).sort());
  assert.equal(n.h.sim.countCalls('AttachNetworkInterface'), 0);
});

test('untagged and no_manage ENIs attached to the node are never touched; new ENIs take the first free device index', async (t) => {
  // m5.xlarge: 4 ENIs of 15 IPv4s; two slots go to ENIs ipamd must leave alone.
  const n = await createLifecycleNode({
    instanceType: 'm5.xlarge',
    env: { ENI_IPAM_MIN_ENI_AGE: '1s', ENI_IPAM_SHRINK_DELAY: '500ms' },
  });
  t.after(() => n.close());
  const me = n.h.instanceId;
  const untagged = await createEniVia(n, {}, 'someone else', 3);
  const noManage = await createEniVia(
    n,
    {
      'node.k8s.amazonaws.com/instance_id': me,
      'node.k8s.amazonaws.com/createdAt': OLD,
      'node.k8s.amazonaws.com/no_manage': 'true',
    },
    `aws-K8S-${me}`,
    3,
  );
  await n.ec2.send(new AttachNetworkInterfaceCommand({ NetworkInterfaceId: untagged, InstanceId: me, DeviceIndex: 1 }));
  await n.ec2.send(new AttachNetworkInterfaceCommand({ NetworkInterfaceId: noManage, InstanceId: me, DeviceIndex: 3 }));
  await n.start();
  await waitUnfrozen(n);
  const ids = Array.from({ length: 14 }, (_, i) => `p${i}`);
  for (const id of ids) await n.add(id);
  await waitFor('a managed ENI created', async () => (await n.status()).counts.enis === 2);
  const created = [...n.h.sim.state.enis.values()].find(
    (x) =>
      x.tags['node.k8s.amazonaws.com/instance_id'] === me &&
      x.tags['node.k8s.amazonaws.com/no_manage'] !== 'true' &&
      x.attachment,
  )!;
  assert.equal(created.attachment!.deviceIndex, 2, 'first free device index around the unmanaged ENIs (1 and 3)');
  const ours = new Set(((await n.status()).enis as Array<{ eniId: string }>).map((x) => x.eniId));
  assert.ok(!ours.has(untagged) && !ours.has(noManage), 'unmanaged ENIs are not in the pool');
  for (const id of ids) await n.del(id);
  await waitFor('our ENI freed', () => !n.h.sim.state.enis.has(created.networkInterfaceId), 15_000);
  for (const c of n.h.sim.calls) {
    const target = c.params.NetworkInterfaceId ?? '';
    if (
      [
        'UnassignPrivateIpAddresses',
        'DeleteNetworkInterface',
        'ModifyNetworkInterfaceAttribute',
        'AssignPrivateIpAddresses',
      ].includes(c.action)
    ) {
      assert.ok(target !== untagged && target !== noManage, `${c.action} on an unmanaged ENI`);
    }
  }
  assert.equal(n.h.sim.state.enis.get(untagged)?.attachment?.deviceIndex, 1);
  assert.equal(n.h.sim.state.enis.get(noManage)?.attachment?.deviceIndex, 3);
  assert.equal(n.h.sim.state.enis.get(untagged)?.secondaryIps.length, 3);
  assert.deepEqual(await nothingLost(n), []);
});
