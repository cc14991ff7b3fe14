/**
 * ipamd killed between CreateNetworkInterface and AttachNetworkInterface (issue 37: OOM
 * during a scale-up), then restarted: the real ipamd on the simulated cloud over HTTP. EC2
 * creates the ENI but its answer never comes (the sim's `when: 'after'` NoResponse fault),
 * ipamd is SIGKILLed while it waits, and the ENI stays `available`, tagged for this node.
 * At its next start ipamd settles it within seconds, whatever the leaked-ENI sweep's
 * schedule (its first run drawn up to 5 min away, its 5 min minimum age): attached when the
 * pool wants a new ENI (no second one is created), deleted when it does not; never an
 * available ENI of another instance, one not made by ipamd, or an untagged one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CreateNetworkInterfaceCommand, EC2Client } from '@aws-sdk/client-ec2';
import { NO_RESPONSE } from '../../sim/index.js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';

/** Fills the primary ENI with pods so the pool wants a second ENI, and kills ipamd once EC2 created it (its answer withheld). */
async function killAfterCreate(t: { after(fn: () => Promise<void> | void): void }, h: NodeHarness): Promise<string> {
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const before = new Set(h.sim.state.enis.keys());
  h.sim.faults.injectError({ action: 'CreateNetworkInterface', code: NO_RESPONSE, count: 1, when: 'after' });
  // The primary ENI's addresses (m5.large: 9) and more: the pool asks for a second ENI.
  const adds = Array.from({ length: 10 }, (_, i) => c.add(`pod-${i}`).catch(() => undefined));
  const created = await waitFor('EC2 created the ENI (its answer withheld)', () =>
    [...h.sim.state.enis.keys()].find((id) => !before.has(id)),
  );
  await d.kill9();
  await Promise.all(adds);
  const eni = h.sim.state.enis.get(created)!;
  assert.equal(eni.status, 'available', 'created, never attached');
  assert.equal(eni.tags['node.k8s.amazonaws.com/instance_id'], h.instanceId);
  return created;
}

/**
 * Available ENIs the settle must never touch, made through the real SDK: another
 * instance's (tagged and described as ipamd does for it), one tagged with this instance
 * but not described as ipamd's (made by someone else), and an untagged one.
 * @returns their ids by name.
 */
async function seedDecoys(h: NodeHarness): Promise<Record<string, string>> {
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: h.sim.ec2Endpoint,
    credentials: { accessKeyId: 't', secretAccessKey: 't' },
    maxAttempts: 1,
  });
  const make = async (tags: Record<string, string>, description: string) =>
    (
      await ec2.send(
        new CreateNetworkInterfaceCommand({
          SubnetId: h.subnetId,
          Description: description,
          SecondaryPrivateIpAddressCount: 2,
          TagSpecifications: [
            { ResourceType: 'network-interface', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) },
          ],
        }),
      )
    ).NetworkInterface!.NetworkInterfaceId!;
  const createdAt = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  const other = 'i-0anothernode00000';
  try {
    return {
      otherInstance: await make(
        { 'node.k8s.amazonaws.com/instance_id': other, 'node.k8s.amazonaws.com/createdAt': createdAt },
        `aws-K8S-${other}`,
      ),
      notByIpamd: await make(
        { 'node.k8s.amazonaws.com/instance_id': h.instanceId, 'node.k8s.amazonaws.com/createdAt': createdAt },
        'my own ENI',
      ),
      untagged: await make({}, `aws-K8S-${h.instanceId}`),
    };
  } finally {
    ec2.destroy();
  }
}

test('wanted: the restarted ipamd attaches the ENI its predecessor created, instead of a new one', async (t) => {
  const h = await createNode({ instanceType: 'm5.large', ipamdEnv: { WARM_IP_TARGET: '2', MINIMUM_IP_TARGET: '0' } });
  t.after(() => h.close());
  const leftover = await killAfterCreate(t, h);
  const decoys = await seedDecoys(h);
  const creates = h.sim.countCalls('CreateNetworkInterface');
  const t0 = Date.now();
  const d = await h.startIpamd();
  await waitFor(
    'the leftover ENI attached to this instance',
    () => h.sim.state.enis.get(leftover)?.attachment?.instanceId === h.instanceId,
    60_000,
  );
  const settledInMs = Date.now() - t0;
  const lifecycle = (await d.status()).eniLifecycle as { startSettle: { attached: string[] } | null };
  assert.deepEqual(lifecycle.startSettle?.attached, [leftover]);
  await waitFor('its addresses in the pool', async () => ((await d.status()).counts.total as number) > 9, 60_000);
  assert.equal(h.sim.countCalls('CreateNetworkInterface'), creates, 'no second ENI was created');
  assert.ok(settledInMs < 60_000, `settled ${settledInMs} ms after the restart`);
  for (const [name, id] of Object.entries(decoys))
    assert.equal(h.sim.state.enis.get(id)?.status, 'available', `${name} (${id}) untouched`);
  assert.equal(h.sim.countCalls('DeleteNetworkInterface'), 0);
});

test('unwanted: the restarted ipamd deletes it at once, long before the sweep would', async (t) => {
  const h = await createNode({ instanceType: 'm5.large', ipamdEnv: { WARM_IP_TARGET: '2', MINIMUM_IP_TARGET: '0' } });
  t.after(() => h.close());
  const leftover = await killAfterCreate(t, h);
  const decoys = await seedDecoys(h);
  // Restarted with no warm target: the pods fit on the primary ENI, the pool wants no new ENI.
  const d = await h.startIpamd({ WARM_IP_TARGET: '0', MINIMUM_IP_TARGET: '0', WARM_ENI_TARGET: '0' });
  await waitFor('the leftover ENI deleted', () => !h.sim.state.enis.has(leftover), 60_000);
  const lifecycle = (await d.status()).eniLifecycle as { startSettle: { deleted: string[] } | null };
  assert.deepEqual(lifecycle.startSettle?.deleted, [leftover]);
  assert.equal(h.sim.countCalls('AttachNetworkInterface'), 0, 'never attached');
  for (const [name, id] of Object.entries(decoys))
    assert.equal(h.sim.state.enis.get(id)?.status, 'available', `${name} (${id}) untouched`);
  assert.equal(h.sim.countCalls('DeleteNetworkInterface'), 1, 'only the leftover was deleted');
});
