/**
 * The start-up settle of the ENIs a previous ipamd created for this node and never attached
 * (controller/eni-lifecycle/eni-settle.ts), over the in-memory EC2 with the real pool
 * controller, ENI manager and datastore on virtual time: wanted and fitting → attached (as
 * a creation the pool counts), unwanted → deleted; never one of another instance, one the
 * datastore knows or the checkpoint has a pod on, nor anything without a checkpoint.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import type { Ec2Eni } from '../../ipamd/cloud/ec2-port.js';
import { settleLeftoverEnis, whyNotLeftover } from '../../ipamd/controller/eni-lifecycle/eni-settle.js';
import { ENI_DESCRIPTION_PREFIX, TAG_INSTANCE_ID } from '../../ipamd/controller/eni-lifecycle/eni-ownership.js';
import { controllerKit } from '../helpers/controller-kit.js';

const log = pino({ level: 'silent' });

/** A node whose previous ipamd left `n` available ENIs of ours (3 secondary IPs each), and the settle's options. */
async function leftoverNode(o: { warmIpTarget: number; leftovers?: number; instanceId?: string }) {
  // As in ipamd: no new ENI before the settle has decided (pool-wiring.ts leftoversSettled).
  let settled!: () => void;
  const newEnisAfter = new Promise<void>((r) => (settled = r));
  const n = controllerKit({ targets: { warmIpTarget: o.warmIpTarget, minimumIpTarget: 0 }, newEnisAfter });
  await n.fillPrimary();
  n.pool.start();
  await n.vt.tick();
  await n.pool.idle();
  const owner = o.instanceId ?? n.instanceId;
  const leftovers: Ec2Eni[] = [];
  for (let i = 0; i < (o.leftovers ?? 1); i++)
    leftovers.push(
      await n.ec2.createEni({
        subnetId: n.subnetId,
        description: `${ENI_DESCRIPTION_PREFIX}${owner}`,
        tags: { [TAG_INSTANCE_ID]: owner, 'node.k8s.amazonaws.com/createdAt': new Date(n.vt.now()).toISOString() },
        secondaryCount: 3,
        securityGroupIds: [],
      }),
    );
  const settle = (deleteUnwanted = true) =>
    settleLeftoverEnis({
      ec2: n.ec2,
      log,
      gate: n.gate,
      scope: {
        instanceId: n.instanceId,
        vpcId: n.ec2.state.vpcId,
        known: (id) => n.ds.getEni(id),
        allocations: () => [...n.ds.allocations(), ...n.ds.pendingAllocations()],
        isBusy: (id) => n.enis.isBusy(id),
      },
      placement: n.enis.placement,
      pool: n.pool,
      deleteUnwanted,
    }).finally(settled);
  const status = (id: string) => n.ec2.state.enis.get(id)?.status ?? 'deleted';
  return { n, leftovers, settle, status };
}

test('wanted: the pool needs addresses beyond the primary ENI → the leftover is attached, no new ENI created', async (t) => {
  const { n, leftovers, settle, status } = await leftoverNode({ warmIpTarget: 2 });
  t.after(() => n.pool.stop());
  const created = n.ec2.count('CreateNetworkInterface');
  const r = await settle();
  assert.deepEqual(r.attached, [leftovers[0]!.eniId]);
  await n.pool.idle();
  assert.equal(status(leftovers[0]!.eniId), 'in-use');
  assert.ok(n.ds.getEni(leftovers[0]!.eniId), 'its addresses serve the pool');
  assert.equal(n.available(), 3);
  assert.equal(n.ec2.count('CreateNetworkInterface'), created, 'the leftover stood in for a new ENI');
});

test('unwanted: the pool is at its target → the leftovers are deleted at once, whatever the sweep', async (t) => {
  const { n, leftovers, settle, status } = await leftoverNode({ warmIpTarget: 0, leftovers: 2 });
  t.after(() => n.pool.stop());
  const r = await settle();
  assert.deepEqual(r.deleted.sort(), leftovers.map((e) => e.eniId).sort());
  for (const e of leftovers) assert.equal(status(e.eniId), 'deleted');
  assert.equal(n.ec2.count('AttachNetworkInterface'), 0);
});

test('DISABLE_LEAKED_ENI_CLEANUP keeps an unwanted leftover', async (t) => {
  const { n, leftovers, settle, status } = await leftoverNode({ warmIpTarget: 0 });
  t.after(() => n.pool.stop());
  const r = await settle(false);
  assert.deepEqual(r.deleted, []);
  assert.equal(status(leftovers[0]!.eniId), 'available');
});

test('never: without a checkpoint, another instance’s ENI, one the checkpoint has a pod on', async (t) => {
  const none = await leftoverNode({ warmIpTarget: 0 });
  t.after(() => none.n.pool.stop());
  none.n.gate.freeze('checkpoint', 'no checkpoint at /run/eni-ipam/ipam.json');
  const r = await none.settle();
  assert.match(r.skipped ?? '', /no checkpoint/);
  assert.equal(none.status(none.leftovers[0]!.eniId), 'available');
  assert.equal(none.n.ec2.count('DeleteNetworkInterface'), 0);

  const other = await leftoverNode({ warmIpTarget: 0, instanceId: 'i-0someoneelse0000' });
  t.after(() => other.n.pool.stop());
  assert.deepEqual((await other.settle()).deleted, []);
  assert.equal(other.status(other.leftovers[0]!.eniId), 'available');

  const eni = none.leftovers[0]!;
  const scope = {
    instanceId: none.n.instanceId,
    vpcId: none.n.ec2.state.vpcId,
    known: () => undefined,
    isBusy: () => false,
  };
  const pod = { networkName: 'aws-cni', containerID: 'c', ifName: 'eth0', eniId: '', allocatedAt: 0 };
  assert.equal(whyNotLeftover(eni, { ...scope, allocations: [] }), undefined);
  assert.match(
    whyNotLeftover(eni, { ...scope, allocations: [{ ...pod, ipv4: eni.secondaryIps[1]! }] }) ?? '',
    /the checkpoint has pods on its addresses/,
  );
  assert.match(whyNotLeftover(eni, { ...scope, allocations: [], isBusy: () => true }) ?? '', /in use/);
  assert.match(whyNotLeftover({ ...eni, status: 'in-use' }, { ...scope, allocations: [] }) ?? '', /status in-use/);
  assert.match(
    whyNotLeftover(
      { ...eni, tags: { ...eni.tags, 'node.k8s.amazonaws.com/no_manage': 'true' } },
      { ...scope, allocations: [] },
    ) ?? '',
    /not created by eni-ipam/,
  );
  // Tagged with this instance but not described as ipamd describes its ENIs: someone else's.
  assert.match(
    whyNotLeftover({ ...eni, description: 'my own ENI' }, { ...scope, allocations: [] }) ?? '',
    /not created by eni-ipam/,
  );
  assert.match(whyNotLeftover({ ...eni, vpcId: 'vpc-0other' }, { ...scope, allocations: [] }) ?? '', /another VPC/);
  // With CLUSTER_NAME, only what ipamd tags for that cluster.
  assert.match(
    whyNotLeftover(eni, { ...scope, clusterName: 'c1', allocations: [] }) ?? '',
    /not tagged for this cluster/,
  );
  const tagged = { ...eni, tags: { ...eni.tags, 'cluster.k8s.amazonaws.com/name': 'c1' } };
  assert.equal(whyNotLeftover(tagged, { ...scope, clusterName: 'c1', allocations: [] }), undefined);
});
