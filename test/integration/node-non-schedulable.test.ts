/**
 * AWS_MANAGE_ENIS_NON_SCHEDULABLE as aws-node (pkg/ipamd/ipamd.go `isNodeNonSchedulable`,
 * `isENIAttachmentAllowed`, `tryFreeENI`): the real ipamd on the simulated cloud, reading
 * its Node from the run's real kube-apiserver as the chart's ServiceAccount. Unset (false),
 * a node carrying `node.kubernetes.io/unschedulable:NoSchedule` (what the node lifecycle
 * controller puts on a cordoned node; no controller runs here, so the test puts it) gets no
 * new address: ADDs are served from the warm pool, then one finds none and fails at once
 * naming the setting, no EC2 assign or create is made, and ipamd says so once in its log;
 * the taint removed, the pool grows again. With the setting true the cordoned node's pool
 * grows as any.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { clusterBinaries } from '../../kit/cluster/binaries.js';
import { kubectlRunner } from '../../kit/cluster/kubectl.js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';

const TAINT = 'node.kubernetes.io/unschedulable:NoSchedule';
const GROW = ['AssignPrivateIpAddresses', 'CreateNetworkInterface', 'AttachNetworkInterface'];

/** Lines of ipamd's log whose message matches `re`. */
async function logLines(h: NodeHarness, re: RegExp): Promise<string[]> {
  const text = await readFile(path.join(h.dir, 'ipamd.log'), 'utf8').catch(() => '');
  return text.split('\n').filter((l) => re.test(l));
}

async function setup(t: { after(fn: () => Promise<void> | void): void }, manage?: string) {
  const env = await realKubeEnv(t, { prefix: 'cordon' });
  const kubectl = kubectlRunner(await clusterBinaries(), env.server.adminKubeconfig);
  const h = await createNode({});
  t.after(() => h.close());
  await h.startIpamd({
    MY_NODE_NAME: env.nodeName,
    KUBECONFIG: env.kubeconfig('ipamd'),
    WARM_IP_TARGET: '2',
    MINIMUM_IP_TARGET: '0',
    ENI_IPAM_POOL_INTERVAL: '1s',
    ENI_IPAM_INSTALL_CNI: 'false',
    CRI_RUNTIME_ENDPOINT: `unix://${path.join(h.dir, 'no-cri.sock')}`,
    ...(manage !== undefined ? { AWS_MANAGE_ENIS_NON_SCHEDULABLE: manage } : {}),
  });
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const available = async () => (await h.ipamd!.status()).counts.available as number;
  await waitFor('the warm pool of 2', async () => (await available()) === 2);
  const cordon = (on: boolean) =>
    kubectl.run(['taint', 'nodes', env.nodeName, on ? TAINT : `${TAINT}-`]).then(() => undefined);
  return { env, h, c, cordon, available };
}

test('unset: a cordoned node gets no new address (ADDs fail at once naming the setting), logged once; uncordoned it grows', async (t) => {
  const { h, c, cordon, available } = await setup(t);
  await cordon(true);
  // The one line ipamd logs on the change (other lines may carry the same words as a reason).
  const paused =
    /"msg":"node \S+ is unschedulable \(taint node\.kubernetes\.io\/unschedulable:NoSchedule\) and AWS_MANAGE_ENIS_NON_SCHEDULABLE is false/;
  await waitFor('ipamd saw the cordon', async () => (await logLines(h, paused)).length > 0, 30_000);
  const before = h.sim.countCalls(GROW);
  // The warm pool still serves.
  for (const id of ['a', 'b']) assert.equal((await c.add(`cordoned-${id}`)).success, true);
  const t0 = Date.now();
  await assert.rejects(c.add('cordoned-c'), (e: Error) => /AWS_MANAGE_ENIS_NON_SCHEDULABLE/.test(e.message));
  assert.ok(Date.now() - t0 < 5000, 'failed at once, not after the ADD wait');
  assert.equal(await available(), 0, 'the pool was not refilled');
  assert.equal(h.sim.countCalls(GROW) - before, 0, 'no EC2 assign, create or attach while cordoned');
  assert.equal((await logLines(h, paused)).length, 1, 'said once');

  await cordon(false);
  await waitFor(
    'ipamd saw the uncordon',
    async () => (await logLines(h, /"msg":"node schedulable again/)).length === 1,
    30_000,
  );
  assert.equal((await c.add('uncordoned')).success, true);
  await waitFor('the warm pool refilled', async () => (await available()) === 2);
  assert.ok(h.sim.countCalls(GROW) > before, 'grown through EC2 again');
});

test('AWS_MANAGE_ENIS_NON_SCHEDULABLE=true: the cordoned node grows as any', async (t) => {
  const { h, c, cordon, available } = await setup(t, 'true');
  await cordon(true);
  for (const id of ['a', 'b', 'c', 'd']) assert.equal((await c.add(`managed-${id}`)).success, true);
  await waitFor('the warm pool refilled', async () => (await available()) === 2);
  assert.deepEqual(await logLines(h, /is unschedulable/), [], 'nothing paused');
});
