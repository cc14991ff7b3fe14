/**
 * One ipamd per node across network namespaces (ipamd/startup/checkpoint-lock.ts: a flock
 * on the state directory's lock file). Issue 37: two ipamds in two network namespaces that
 * shared one checkpoint file both ran, because the one-ipamd guards were abstract sockets,
 * which live in a network namespace; the second rewrote the first's checkpoint at start and
 * dropped its journal records at shutdown, and the first, restarted, had lost 3 live pods'
 * allocations and offered their addresses to new pods.
 *
 * The real ipamd binary twice, each in a network namespace of its own (`unshare --net`,
 * entered with `nsenter`), reaching the simulated EC2 and IMDS of one instance through a
 * relay (kit/netns-bridge.ts), with one checkpoint path: the second must exit naming the
 * first (pid, network namespace) before it reads or writes the checkpoint, and the first,
 * restarted, must still hold every pod it served.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readlinkSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { buildNode } from '../../kit/node.js';
import { createProcNetns, type Netns } from '../../kit/netns.js';
import { bridgeNetns } from '../../kit/netns-bridge.js';
import { startIpamd, type IpamdProcess } from '../../kit/ipamd-process.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { checkpointFingerprint, startSecondIpamd } from '../helpers/second-ipamd.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

test('a second ipamd in another network namespace sharing the checkpoint exits naming the first; nothing of the first is lost', async (t) => {
  ensureDummyAwsCredentials();
  const node = await buildNode({ simOptions: { seed: 37 }, dirPrefix: 'eni-ipam-xnetns-' });
  t.after(() => node.close());
  const port = (url: string) => Number(new URL(url).port);
  const namespaces: Netns[] = [];
  for (const name of ['a', 'b']) {
    const ns = await createProcNetns(`xnetns-${name}`);
    node.cleanups.push(() => ns.remove());
    const bridgeDir = path.join(node.dir, `bridge-${name}`);
    await mkdir(bridgeDir);
    const bridge = await bridgeNetns({
      netnsPath: ns.path,
      dir: bridgeDir,
      inward: [port(node.sim.ec2Endpoint), port(node.sim.imdsEndpoint)],
      outward: [],
    });
    node.cleanups.push(() => bridge.close());
    namespaces.push(ns);
  }
  const [nsA, nsB] = namespaces as [Netns, Netns];
  const checkpoint = path.join(node.dir, 'state', 'ipam.json');
  const envFor = (name: string): NodeJS.ProcessEnv => ({
    AWS_EC2_ENDPOINT: node.sim.ec2Endpoint,
    AWS_EC2_METADATA_SERVICE_ENDPOINT: node.sim.imdsEndpointFor(node.instanceId),
    ENI_IPAM_SOCKET: path.join(node.dir, name, 'ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: checkpoint, // shared, as two harnesses shared /run/eni-ipam/ipam.json
    WARM_IP_TARGET: '3',
    ENI_IPAM_POOL_INTERVAL: '200ms',
  });
  const start = async (name: string, ns: Netns): Promise<IpamdProcess> => {
    const d = await startIpamd({
      env: envFor(name),
      dir: path.join(node.dir, name),
      logFile: path.join(node.dir, `${name}.out`),
      prefix: ['nsenter', `--net=${ns.path}`, '--'],
      timeoutMs: 30_000,
    });
    node.cleanups.push(() => d.stop(5000));
    return d;
  };
  for (const name of ['a', 'b']) await mkdir(path.join(node.dir, name));

  const a = await start('a', nsA);
  const c = ipamdClient(envFor('a').ENI_IPAM_SOCKET!);
  t.after(() => c.close());
  const held: Record<string, string> = {};
  for (const pod of ['live-0', 'live-1', 'live-2']) held[pod] = (await c.add(pod)).ipv4_addr;
  // Journal records past the snapshot: what a second ipamd's start would fold in and rewrite.
  for (let i = 0; i < 5; i++) {
    await c.add(`churn${i}`);
    await c.del(`churn${i}`);
  }
  const before = await checkpointFingerprint(checkpoint);
  assert.ok(before['ipam.json.journal'], 'the journal exists');

  const netnsA = readlinkSync(nsA.path);
  assert.notEqual(netnsA, readlinkSync(nsB.path), 'two network namespaces');
  const err = await startSecondIpamd({
    env: envFor('b'),
    dir: path.join(node.dir, 'b'),
    logFile: path.join(node.dir, 'b.out'),
    prefix: ['nsenter', `--net=${nsB.path}`, '--'],
    timeoutMs: 30_000,
  });
  assert.ok(err, 'the second ipamd started serving beside the first, on the same checkpoint');
  assert.match(err.message, /exited with 1 before serving/);
  const line = err.message.split('\n').find((l) => l.startsWith('eni-ipamd: another ipamd'));
  assert.ok(line, err.message);
  assert.ok(line.includes(`pid ${a.pid}, netns ${netnsA}, instance ${node.instanceId}`), line);
  assert.ok(line.includes(`lock file ${path.dirname(checkpoint)}/ipamd.lock`), line);
  assert.deepEqual(await checkpointFingerprint(checkpoint), before, 'the second ipamd changed the checkpoint files');

  // The first keeps serving, and after a restart still holds every live pod.
  for (const [pod, ip] of Object.entries(held)) assert.equal((await c.add(pod)).ipv4_addr, ip, pod);
  await a.stop(10_000);
  await start('a', nsA);
  for (const [pod, ip] of Object.entries(held))
    assert.equal((await c.add(pod)).ipv4_addr, ip, `${pod} keeps its address across the restart`);
  const fresh = (await c.add('new-pod')).ipv4_addr;
  assert.ok(!Object.values(held).includes(fresh), `a new pod got ${fresh}, an address a live pod holds`);
});
