/**
 * The subnet free-address gauge costs a restart no DescribeSubnets (controller/eni-lifecycle/subnet-free-cache.ts):
 * real ipamd (in-process) on the simulated cloud, reconcile every 300 ms.
 * - A restart right after a start that described its subnet makes no DescribeSubnets
 *   over several reconcile passes (the reading in `subnet-free.json` is fresh and the
 *   node holds the same addresses); once the pool grows in that subnet, it describes again.
 * - A reading older than the refresh period (10 min) is not trusted: the restart describes.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fastRestartNode } from '../helpers/fast-restart-node.js';
import { waitFor } from '../../kit/wait.js';

async function setup(t: { after(fn: () => Promise<void>): void }) {
  const { sim, subnet, node, addPod } = await fastRestartNode(t, 12, {
    ENI_IPAM_RESTART_CONFIRM_JITTER: '50ms',
    ENI_IPAM_RECONCILE_INTERVAL: '300ms',
    WARM_IP_TARGET: '2',
  });
  const describes = (from: number) => sim.calls.slice(from).filter((x) => x.action === 'DescribeSubnets').length;
  const passes = async () => ((await node.status()).eniLifecycle?.reconcilePasses ?? 0) as number;
  const file = path.join(node.dir, 'subnet-free.json');
  await node.start();
  await addPod('a');
  await waitFor(
    'the first start described its subnet and kept the reading',
    () => (describes(0) > 0 && existsSync(file) && readFileSync(file, 'utf8').includes(subnet.subnetId)) || undefined,
  );
  // The reading kept is of what the node holds now (the pool settled before the last describe).
  const heldNow = () => {
    const ds = node.daemonHandle!.ds;
    const totals = new Map(ds.poolViews(Date.now()).map((v) => [v.eniId, v.total]));
    return ds
      .listEnis()
      .filter((e) => e.subnetId === subnet.subnetId)
      .reduce((n, e) => n + (totals.get(e.eniId) ?? 0), 0);
  };
  await waitFor('the reading kept is of what the node holds now', async () => {
    await waitFor('a reconcile pass', async () => (await passes()) >= 2 || undefined);
    const f = JSON.parse(readFileSync(file, 'utf8')) as { subnets: Record<string, { held: number }> };
    return f.subnets[subnet.subnetId]?.held === heldNow() || undefined;
  });
  return { sim, node, addPod, describes, passes, file, subnetId: subnet.subnetId };
}

test('restart: no DescribeSubnets for the gauge while the reading is fresh; one once the pool grows', async (t) => {
  const { sim, node, addPod, describes, passes, file } = await setup(t);
  const reading = readFileSync(file, 'utf8');
  await node.stop();
  const from = sim.calls.length;
  await node.start();
  await waitFor(
    'EC2 confirmed the cached inventory',
    () => !node.daemonHandle!.gate.describe().some((r) => r.startsWith('ec2-confirm')) || undefined,
  );
  // Each pass ends with the gauge's decision; after three, the first two have surely made theirs.
  await waitFor('three reconcile passes after the restart', async () => (await passes()) >= 3 || undefined);
  assert.equal(describes(from), 0, 'no DescribeSubnets: the reading from before the restart is fresh');
  assert.equal(readFileSync(file, 'utf8'), reading, 'the reading kept as it was');
  // The pool grows (WARM_IP_TARGET after 4 more pods): the node's holdings in the subnet changed.
  for (const id of ['b', 'c', 'd', 'e']) await addPod(id);
  await waitFor('a DescribeSubnets once the holdings changed', () => describes(from) > 0 || undefined);
});

test('restart: a reading older than the refresh period is described again', async (t) => {
  const { sim, node, describes, file, subnetId } = await setup(t);
  await node.stop();
  const f = JSON.parse(readFileSync(file, 'utf8')) as { subnets: Record<string, { at: number }> };
  f.subnets[subnetId]!.at = Date.now() - 11 * 60_000;
  writeFileSync(file, JSON.stringify(f));
  const from = sim.calls.length;
  await node.start();
  await waitFor('a DescribeSubnets for the stale reading', () => describes(from) > 0 || undefined);
});
