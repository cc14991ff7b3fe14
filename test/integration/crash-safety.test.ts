/**
 * docs/design.md#10-the-warm-pool-at-depth item 4, crash-safety: the real ipamd is killed with SIGKILL between two EC2
 * steps of grow (created-not-attached, attached-not-DeleteOnTermination,
 * attached-not-in-datastore) or shrink (unassigned-not-removed, detached-not-deleted),
 * then restarted. The window is found with sim latency on the next action (the sim
 * finishes the call after the client died, as EC2 would). Each test ends with the
 * "nothing lost" check: every live pod's IP on an ENI attached to the node, no IP twice,
 * no release touching a live pod, and no `available` ENI of ours left after the sweep.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import {
  ageEnis,
  createLifecycleNode,
  leakedEnis,
  listParam,
  nothingLost,
  ourEnis,
  waitInFlight,
  waitUnfrozen,
  type LifecycleNode,
} from '../helpers/lifecycle-node.js';
import { waitFor } from '../../kit/wait.js';

/** Waits for the in-flight `action` to be finished by the sim (after ipamd died). */
async function simFinishes(n: LifecycleNode, action: string): Promise<void> {
  await waitFor(
    `${action} finished`,
    () => n.h.sim.calls.filter((c) => c.action === action).every((c) => c.durationMs !== undefined),
    10_000,
    20,
  );
}

/** Starts a node with 3 live pods and a warm pool; returns it. */
async function nodeWithPods(t: TestContext, env: NodeJS.ProcessEnv = {}): Promise<LifecycleNode> {
  const n = await createLifecycleNode({ env });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  for (const id of ['live0', 'live1', 'live2']) await n.add(id);
  return n;
}

/** Kills ipamd while `action` is in flight (latency `ms`), lets the sim finish it, restarts. */
async function crashDuring(
  n: LifecycleNode,
  action: string,
  ms: number,
  trigger: () => Promise<unknown>,
): Promise<void> {
  n.h.sim.faults.setLatency(action, ms);
  const done = trigger();
  await waitInFlight(n, action);
  await n.h.ipamd!.kill9();
  await done.catch(() => undefined);
  await simFinishes(n, action);
  n.h.sim.faults.setLatency(action, null);
  await n.start();
  await waitUnfrozen(n);
}

/**
 * ADDs that need a new ENI (WARM_IP_TARGET=2 with 3 live pods: 7 more fill the primary
 * ENI and ask for one). Those cut off by the crash are torn down after the restart, as
 * kubelet does with a failed ADD (CNI DEL).
 */
function growAdds(n: LifecycleNode, failed: string[]): () => Promise<unknown> {
  const ids = Array.from({ length: 7 }, (_, i) => `g${i}`);
  return async () => {
    const r = await Promise.allSettled(ids.map((id) => n.add(id)));
    r.forEach((x, i) => {
      if (x.status === 'rejected') failed.push(ids[i]!);
    });
  };
}

/** kubelet's DEL for ADDs that failed with the crash. */
async function tearDown(n: LifecycleNode, failed: string[]): Promise<void> {
  for (const id of failed) await n.client.del(id);
}

/** Ages every leaked ENI of ours past 5 minutes and waits for the sweep to delete them. */
async function sweepLeaks(n: LifecycleNode): Promise<string[]> {
  const leaked = leakedEnis(n).map((e) => e.networkInterfaceId);
  await ageEnis(n, leaked);
  await waitFor('leaked ENIs swept', () => leakedEnis(n).length === 0, 10_000);
  return leaked;
}

test('grow: crash between CreateNetworkInterface and AttachNetworkInterface → the restarted ipamd attaches or deletes the unattached ENI', async (t) => {
  const n = await nodeWithPods(t, { WARM_IP_TARGET: '2' });
  const failed: string[] = [];
  const before = new Set(ourEnis(n).map((e) => e.networkInterfaceId));
  await crashDuring(n, 'CreateNetworkInterface', 1500, growAdds(n, failed));
  await tearDown(n, failed);
  await waitFor('the pool warm again after restart', async () => (await n.status()).counts.available >= 2, 15_000);
  // Settled at the start (eni-settle.ts), not by the sweep: never aged past its 5 minutes.
  const s = await waitFor('the start-up settle done', async () => (await n.status()).eniLifecycle.startSettle, 15_000);
  await waitFor('no ENI of ours left available', () => leakedEnis(n).length === 0, 15_000);
  const settled = [...s.attached, ...s.deleted];
  assert.equal(settled.length, 1, JSON.stringify(s));
  assert.ok(!before.has(settled[0]), 'the ENI the crash left');
  assert.deepEqual(await nothingLost(n), []);
});

test('grow: crash between AttachNetworkInterface and DeleteOnTermination → adopted, DeleteOnTermination set', async (t) => {
  const n = await nodeWithPods(t, { WARM_IP_TARGET: '2' });
  const failed: string[] = [];
  await crashDuring(n, 'AttachNetworkInterface', 1500, growAdds(n, failed));
  await tearDown(n, failed);
  const eni = ourEnis(n).find((e) => e.attachment)!;
  assert.ok(eni, 'attached after the crash');
  await waitFor('DeleteOnTermination fixed', () => eni.attachment?.deleteOnTermination === true, 10_000);
  const s = await n.status();
  assert.ok(
    s.enis.some((e: { eniId: string }) => e.eniId === eni.networkInterfaceId),
    'the ENI is served from',
  );
  assert.equal(n.h.sim.countCalls('CreateNetworkInterface'), 1, 'adopted, not created again');
  for (let i = 0; i < 10; i++) await n.add(`new${i}`);
  assert.deepEqual(await nothingLost(n), []);
});

test('grow: crash after DeleteOnTermination, before the datastore knew the ENI → adopted with its IPs', async (t) => {
  const n = await nodeWithPods(t, { WARM_IP_TARGET: '2' });
  const failed: string[] = [];
  await crashDuring(n, 'ModifyNetworkInterfaceAttribute', 1500, growAdds(n, failed));
  await tearDown(n, failed);
  const eni = ourEnis(n).find((e) => e.attachment)!;
  assert.equal(eni.attachment!.deleteOnTermination, true);
  const s = await n.status();
  assert.ok(
    s.enis.some((e: { eniId: string }) => e.eniId === eni.networkInterfaceId),
    'adopted at start',
  );
  // EC2's side and ipamd's are read at two moments; a refill in flight between them (seen at
  // load average 40) differs by its batch, so wait until they agree.
  const total = async (): Promise<number | undefined> =>
    (await n.status()).enis.find((e: { eniId: string }) => e.eniId === eni.networkInterfaceId)?.total;
  await waitFor('ipamd holds the IPs EC2 shows on it', async () => (await total()) === eni.secondaryIps.length, 20_000);
  assert.equal(n.h.sim.countCalls('CreateNetworkInterface'), 1);
  for (let i = 0; i < 12; i++) await n.add(`new${i}`);
  assert.deepEqual(await nothingLost(n), []);
});

test('shrink: crash between UnassignPrivateIpAddresses and the datastore update → the IPs are gone for good', async (t) => {
  const n = await nodeWithPods(t, { WARM_IP_TARGET: '2', ENI_IPAM_SHRINK_DELAY: '500ms' });
  const extra = Array.from({ length: 6 }, (_, i) => `x${i}`);
  for (const id of extra) await n.add(id);
  await crashDuring(n, 'UnassignPrivateIpAddresses', 1500, () => Promise.all(extra.map((id) => n.del(id))));
  const unassigned = n.h.sim.calls
    .filter((c) => c.action === 'UnassignPrivateIpAddresses')
    .flatMap((c) => listParam(c.params, 'PrivateIpAddress'));
  assert.ok(unassigned.length > 0);
  // The datastore holds exactly what EC2 shows on our ENIs: none of the unassigned IPs.
  const onEc2 = [...n.h.sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === n.h.instanceId)
    .flatMap((e) => e.secondaryIps);
  for (const ip of unassigned)
    assert.ok(
      !onEc2.includes(ip) || n.h.sim.calls.some((c) => c.action === 'AssignPrivateIpAddresses'),
      `${ip} still on EC2`,
    );
  await waitFor('datastore and EC2 agree after restart', async () => {
    const total = [...n.h.sim.state.enis.values()]
      .filter((e) => e.attachment?.instanceId === n.h.instanceId)
      .reduce((k, e) => k + e.secondaryIps.length, 0);
    return (await n.status()).counts.total === total;
  });
  const got = [];
  for (let i = 0; i < 6; i++) got.push((await n.add(`new${i}`)).ipv4_addr);
  assert.equal(new Set(got).size, 6);
  assert.deepEqual(await nothingLost(n), []);
});

test('shrink: crash between DetachNetworkInterface and DeleteNetworkInterface → never served from, then deleted', async (t) => {
  const n = await nodeWithPods(t, { ENI_IPAM_MIN_ENI_AGE: '1s', ENI_IPAM_SHRINK_DELAY: '500ms' });
  const extra = Array.from({ length: 15 }, (_, i) => `x${i}`);
  for (const id of extra) await n.add(id);
  await waitFor('3 ENIs', async () => (await n.status()).counts.enis === 3);
  const before = new Set(ourEnis(n).map((e) => e.networkInterfaceId));
  n.h.sim.faults.setAttachmentDelays({ detachMs: 4000 });
  await Promise.all(extra.map((id) => n.del(id)));
  await waitFor(
    'a detach sent',
    () => n.h.sim.calls.some((c) => c.action === 'DetachNetworkInterface' && c.durationMs !== undefined),
    15_000,
  );
  await n.h.ipamd!.kill9();
  const detaching = ourEnis(n).find((e) => e.status === 'detaching')!;
  assert.ok(detaching, 'killed while the ENI is detaching');
  await n.start();
  const s = await n.status();
  assert.ok(
    !s.enis.some((e: { eniId: string }) => e.eniId === detaching.networkInterfaceId),
    'a detaching ENI is not served from',
  );
  // Still detaching when ipamd came back: an orphan to delete once detached. On a loaded machine
  // the 4 s detach can end first: then it is an available ENI of ours, which the start-up settle deletes.
  assert.ok(
    s.eniLifecycle.orphanEnis.includes(detaching.networkInterfaceId) ||
      n.h.sim.state.enis.get(detaching.networkInterfaceId)?.status !== 'detaching',
    'it is an orphan to delete',
  );
  await waitUnfrozen(n);
  await waitFor(
    'the orphan deleted once detached',
    () => !n.h.sim.state.enis.has(detaching.networkInterfaceId),
    15_000,
  );
  assert.ok(before.has(detaching.networkInterfaceId));
  if (leakedEnis(n).length) await sweepLeaks(n);
  assert.deepEqual(await nothingLost(n), []);
});

test('grow: crash between AssignPrivateIpAddresses and the datastore update → the IPs come back from EC2, none twice', async (t) => {
  const n = await nodeWithPods(t, { WARM_IP_TARGET: '2' });
  const failed: string[] = [];
  const ids = ['a0', 'a1', 'a2'];
  await crashDuring(n, 'AssignPrivateIpAddresses', 1500, async () => {
    const r = await Promise.allSettled(ids.map((id) => n.add(id)));
    r.forEach((x, i) => {
      if (x.status === 'rejected') failed.push(ids[i]!);
    });
  });
  await tearDown(n, failed);
  const primary = [...n.h.sim.state.enis.values()].find(
    (e) => e.attachment?.instanceId === n.h.instanceId && e.attachment.deviceIndex === 0,
  )!;
  await waitFor(
    'the datastore holds what EC2 shows',
    async () =>
      (await n.status()).counts.total ===
      primary.secondaryIps.length + ourEnis(n).reduce((k, e) => k + e.secondaryIps.length, 0),
  );
  const got = new Set(n.pods.values());
  for (let i = 0; i < 6; i++) {
    const ip = (await n.add(`new${i}`)).ipv4_addr;
    assert.ok(!got.has(ip), `${ip} handed out twice`);
    got.add(ip);
  }
  // These ADDs grow the pool: let an ENI between create and attach get attached, then sweep
  // one the crash itself left (a CreateNetworkInterface that raced the crash), as after 5 min.
  await waitFor('no ENI of ours between create and attach', () => leakedEnis(n).length === 0, 15_000).catch(
    () => undefined,
  );
  await sweepLeaks(n);
  assert.deepEqual(await nothingLost(n), []);
});

test('prefix mode: crashes between AssignPrivateIpAddresses (Ipv4PrefixCount) or UnassignPrivateIpAddresses (Ipv4Prefix) and the datastore', async (t) => {
  const n = await nodeWithPods(t, {
    ENABLE_PREFIX_DELEGATION: 'true',
    WARM_PREFIX_TARGET: '1',
    ENI_IPAM_SHRINK_DELAY: '500ms',
  });
  const failed: string[] = [];
  const ids = Array.from({ length: 14 }, (_, i) => `p${i}`);
  await crashDuring(n, 'AssignPrivateIpAddresses', 1500, async () => {
    const r = await Promise.allSettled(ids.map((id) => n.add(id)));
    r.forEach((x, i) => {
      if (x.status === 'rejected') failed.push(ids[i]!);
    });
  });
  await tearDown(n, failed);
  const prefixCount = () =>
    [...n.h.sim.state.enis.values()]
      .filter((e) => e.attachment?.instanceId === n.h.instanceId)
      .reduce((k, e) => k + e.ipv4Prefixes.length, 0);
  await waitFor(
    'every /28 EC2 shows is known again',
    async () => (await n.status()).counts.total === prefixCount() * 16,
  );
  assert.deepEqual(await nothingLost(n), []);
  // Now a prefix release cut off by the crash: its pods are gone, the /28 goes back to EC2.
  const held = [...n.pods.keys()].filter((id) => id.startsWith('p'));
  await crashDuring(n, 'UnassignPrivateIpAddresses', 1500, () => Promise.all(held.map((id) => n.del(id))));
  const unassigned = n.h.sim.calls
    .filter((c) => c.action === 'UnassignPrivateIpAddresses')
    .flatMap((c) => listParam(c.params, 'Ipv4Prefix'));
  assert.ok(unassigned.length > 0, 'a /28 was being released at the crash');
  await waitFor(
    'the datastore holds what EC2 shows',
    async () => (await n.status()).counts.total === prefixCount() * 16,
  );
  for (let i = 0; i < 20; i++) await n.add(`q${i}`);
  assert.equal(new Set(n.pods.values()).size, n.pods.size, 'no IP twice');
  assert.deepEqual(await nothingLost(n), []);
});
