/**
 * Restarts in the same boot serve from the cached ENI inventory (startup/fast-start.ts)
 * without waiting for EC2, and stay safe: real ipamd (in-process) on the simulated cloud.
 * - EC2 failing every DescribeNetworkInterfaces at the restart: ipamd serves the pods it
 *   had and new ADDs, makes no EC2 call before serving, and keeps releases frozen
 *   ("ec2-confirm") until EC2 answers; then the freeze lifts.
 * - EC2 lost one free and one held IP while ipamd was down: after the background confirm
 *   the free one is gone from the datastore (unless EC2 gave it back meanwhile), the
 *   held one is kept (its pod keeps it, reported), and every IP handed out after the
 *   confirm is one EC2 shows on the node's ENIs.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Ec2Api } from '../../ipamd/cloud/ec2.js';
import { fastRestartNode } from '../helpers/fast-restart-node.js';
import { waitFor } from '../../kit/wait.js';

async function setup(t: { after(fn: () => Promise<void>): void }) {
  const { sim, node, c, addPod } = await fastRestartNode(t, 11, {
    ENI_IPAM_RESTART_CONFIRM_JITTER: '100ms',
    WARM_IP_TARGET: '4',
    MINIMUM_IP_TARGET: '6',
  });
  await node.start();
  const ips = new Map<string, string>();
  for (const id of ['a', 'b', 'c']) ips.set(id, await addPod(id));
  const cache = path.join(node.dir, 'eni-inventory.json');
  // The periodic write has caught up with the pool (all IPs EC2 gave are in the file).
  await waitFor('inventory cache holds every IP of the datastore', () => {
    if (!existsSync(cache)) return undefined;
    const text = readFileSync(cache, 'utf8');
    const ds = node.daemonHandle!.ds;
    return (
      ds
        .listEnis()
        .flatMap((e) => ds.eniIps(e.eniId))
        .every((ip) => text.includes(`"${ip}"`)) || undefined
    );
  });
  return { sim, node, c, addPod, ips };
}

test('restart with EC2 failing: serves old and new pods from the cached inventory, releases frozen until EC2 answers', async (t) => {
  const { sim, node, addPod, ips } = await setup(t);
  const known = new Set(node.daemonHandle!.ds.listEnis().flatMap((e) => node.daemonHandle!.ds.eniIps(e.eniId)));
  await node.stop();
  sim.faults.injectError({ action: 'DescribeNetworkInterfaces', code: 'InternalError', count: 10_000 });
  const calls0 = sim.calls.length;
  await node.start();
  assert.deepEqual(
    sim.calls.slice(calls0).map((x) => x.action),
    [],
    'no EC2 call before serving',
  );
  for (const [id, ip] of ips) assert.equal(await addPod(id), ip, `pod ${id} keeps its IP`);
  const fresh = await addPod('d');
  assert.ok(known.has(fresh), `new pod got ${fresh}, an IP EC2 had confirmed`);
  await waitFor(
    'a failed confirm attempt',
    () => sim.calls.slice(calls0).some((x) => x.action === 'DescribeNetworkInterfaces') || undefined,
    10_000,
  );
  assert.ok(
    node.daemonHandle!.gate.describe().some((r) => r.startsWith('ec2-confirm')),
    'releases frozen while EC2 has not confirmed',
  );
  sim.faults.reset();
  await waitFor(
    'confirm lifts the freeze',
    () => !node.daemonHandle!.gate.describe().some((r) => r.startsWith('ec2-confirm')) || undefined,
    20_000,
  );
});

test('restart after EC2 dropped a free and a held IP: the free one is never handed out after the confirm, the held one is kept', async (t) => {
  const { sim, node, addPod, ips } = await setup(t);
  const ds = node.daemonHandle!.ds;
  const now = Date.now();
  const eni = ds.listEnis().find((e) => ds.eniIps(e.eniId).some((ip) => ds.ipState(ip, now) === 'available'))!;
  const free = ds.eniIps(eni.eniId).find((ip) => ds.ipState(ip, now) === 'available')!;
  const heldId = 'a';
  const held = ips.get(heldId)!;
  const heldEni = ds.listEnis().find((e) => ds.eniIps(e.eniId).includes(held))!.eniId;
  await node.stop();
  const api = new Ec2Api({ region: 'us-east-1', endpoint: sim.ec2Endpoint });
  t.after(() => api.close());
  await api.unassignIps(eni.eniId, [free]);
  await api.unassignIps(heldEni, [held]);
  await node.start();
  const d = node.daemonHandle!;
  await waitFor(
    'confirm lifts the freeze',
    () => !d.gate.describe().some((r) => r.startsWith('ec2-confirm')) || undefined,
    20_000,
  );
  const onEc2 = async () =>
    new Set(
      (await api.describeEnisByFilters({ 'attachment.instance-id': [node.instanceId] })).flatMap((e) => e.secondaryIps),
    );
  const ec2Ips = await onEc2();
  if (!ec2Ips.has(free))
    assert.equal(d.ds.ipState(free, Date.now()), undefined, `${free} (gone from EC2, was free) left the datastore`);
  assert.equal(d.ds.holderOf(held)?.containerID, heldId, `${held} (gone from EC2, held) is still tracked for its pod`);
  const handed = [];
  for (let i = 0; i < 8; i++) handed.push(await addPod(`n${i}`));
  const after = await onEc2();
  for (const ip of handed) assert.ok(after.has(ip), `${ip} handed out after the confirm is on our ENIs in EC2`);
});
