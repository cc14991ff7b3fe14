/**
 * docs/design.md#13-evidence-before-trust item 5: the containers ipamd served a DEL for are remembered across a
 * restart. containerd's StopPodSandbox runs the CNI DEL first and only then stops the
 * sandbox, so a runtime can list a sandbox READY, with its IP, after its DEL was served;
 * if ipamd restarts in that window (kill -9), the first evidence pass must not adopt it
 * (its IP went back to the pool). Once the runtime stops listing it, the memory expires.
 *
 * The real ipamd binary in a child process (so the restart is a SIGKILL), the real AWS
 * SDK against the simulated EC2, the CRI stand-in (a real gRPC server) as the runtime.
 * Also (docs/design.md#13-evidence-before-trust item 6, bad input): a corrupt aws-node checkpoint found when ipamd has
 * none of its own is kept aside, not imported, and releases nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile, utimes } from 'node:fs/promises';
import path from 'node:path';
import { readCheckpoint, type CheckpointData } from '../../ipamd/checkpoint/index.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { testSimNode } from '../../kit/sim-node.js';

interface Alloc {
  containerID: string;
  ipv4: string;
}

/** The checkpoint as ipamd reads it at start (snapshot + journal). */
async function checkpointData(file: string): Promise<CheckpointData> {
  const r = await readCheckpoint(file);
  if (r.kind !== 'ok') throw new Error(`checkpoint ${file}: ${r.kind}`);
  return r.data;
}

test('a DEL served before a kill -9 is remembered: the sandbox the runtime still lists READY is not re-adopted; the memory expires once it is gone', async (t) => {
  const { node } = await testSimNode(t, {
    seed: 5,
    mode: 'child',
    env: {
      WARM_IP_TARGET: '3',
      ENI_IPAM_GC_INTERVAL: '200ms',
      ENI_IPAM_GC_GRACE: '1s',
      ENI_IPAM_POOL_INTERVAL: '100ms',
    },
  });
  await node.start();
  const cri = node.cri!;
  let c = ipamdClient(node.socket);
  t.after(() => c.close());

  for (const id of ['live', 'stopping']) {
    cri.add({ id, name: `pod-${id}`, namespace: 'default', uid: `uid-${id}` });
    cri.setIp(id, (await c.add(id)).ipv4_addr);
  }
  const stoppingIp = cri.sandboxes.get('stopping')!.ip!;
  // StopPodSandbox: the DEL is served; the sandbox is still READY with its IP.
  assert.equal((await c.del('stopping')).released, true);
  const ckpt = await checkpointData(node.checkpoint);
  assert.deepEqual(
    (ckpt.released ?? []).map((e: { containerID: string }) => e.containerID),
    ['stopping'],
    'the DEL is in the checkpoint written before it was answered',
  );

  await node.stop({ crash: true });
  c.close();
  await node.start();
  c = ipamdClient(node.socket);
  const lists = cri.lists;
  await waitFor(
    'two evidence passes after the restart',
    async () => cri.lists >= lists + 2 && (await node.status()).evidence.passes >= 2,
    15_000,
    50,
  );
  const allocs = async (): Promise<Alloc[]> =>
    (await fetch(`http://127.0.0.1:${(node as unknown as { port: number }).port}/v1/allocations`)).json() as Promise<
      Alloc[]
    >;
  const held = await allocs();
  assert.deepEqual(
    held.map((a) => a.containerID).sort(),
    ['live'],
    `the stopping sandbox was re-adopted: ${JSON.stringify(held)}`,
  );
  assert.notEqual(held.find((a) => a.ipv4 === stoppingIp)?.containerID, 'stopping');

  // The sandbox goes: once a runtime read no longer lists it (and the grace has passed), the memory expires.
  cri.remove('stopping');
  await waitFor(
    'the remembered DEL to expire from the checkpoint',
    async () => {
      await c.add('nudge'); // a write, so the checkpoint shows the current memory
      await c.del('nudge');
      const now = await checkpointData(node.checkpoint);
      return !(now.released ?? []).some((e: { containerID: string }) => e.containerID === 'stopping');
    },
    15_000,
    300,
  );
});

test('a corrupt aws-node checkpoint is kept aside and not imported; with IPs on the ENIs and no runtime, nothing is released', async (t) => {
  const { sim, node } = await testSimNode(t, {
    seed: 6,
    cri: false,
    env: {
      WARM_IP_TARGET: '1',
      ENI_IPAM_GC_INTERVAL: '200ms',
      ENI_IPAM_GC_GRACE: '0s',
      ENI_IPAM_SHRINK_DELAY: '0s',
      IP_COOLDOWN_PERIOD: '0',
      ENI_IPAM_POOL_INTERVAL: '100ms',
    },
  });
  // A first life: 6 pods' worth of IPs on the primary ENI, then ipamd goes and its checkpoint with it.
  await node.start();
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  await waitFor(
    'IPs on the ENI',
    async () => {
      try {
        await c.add('probe');
        return true;
      } catch {
        return false;
      }
    },
    20_000,
    200,
  );
  for (let i = 0; i < 5; i++) await c.add(`p${i}`);
  await node.stop();
  await rm(node.checkpoint);
  const awsFile = path.join(node.dir, 'aws-node-ipam.json');
  await writeFile(awsFile, '{"version":"vpc-cni-ipam/1","allocations":[{"networkName":"aws-cni","contain');
  // Written by an aws-node removed two minutes ago (a recent write would make ipamd wait for aws-node to be gone).
  const twoMinutesAgo = new Date(Date.now() - 120_000);
  await utimes(awsFile, twoMinutesAgo, twoMinutesAgo);
  node.env.ENI_IPAM_AWS_NODE_CHECKPOINT_PATH = awsFile;
  const calls = sim.calls.length;
  await node.start();
  const s = await node.status();
  assert.equal(s.releasesFrozen, true);
  assert.match(s.freezeReasons.join('\n'), /no checkpoint at .*ENIs hold \d+ secondary IPs/);
  assert.ok(s.counts.unverified >= 6, `the IPs on the ENIs are unverified: ${JSON.stringify(s.counts)}`);
  assert.equal(s.counts.assigned, 0, 'nothing imported');
  const aside = (await readdir(node.dir)).filter((f) => f.startsWith('aws-node-ipam.json.rejected-'));
  assert.equal(aside.length, 1, 'a copy kept aside');
  assert.equal(
    await readFile(awsFile, 'utf8'),
    '{"version":"vpc-cni-ipam/1","allocations":[{"networkName":"aws-cni","contain',
    'original untouched',
  );
  // Several GC passes (200 ms each), and pool passes with them: no release reaches EC2.
  const passes = (await node.status()).evidence.passes as number;
  await waitFor('five more GC passes', async () => (await node.status()).evidence.passes >= passes + 5, 15_000);
  assert.deepEqual(
    sim.calls
      .slice(calls)
      .filter((x) =>
        ['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface'].includes(x.action),
      )
      .map((x) => x.action),
    [],
  );
});
