/**
 * One ipamd per node (ipamd/startup/node-guard.ts, and ipamd/startup/checkpoint-lock.ts as a
 * second line). A DaemonSet rolled with `maxSurge` > 0, a second DaemonSet under another
 * release name, or a copy started by hand while debugging runs a new ipamd beside the live
 * one, with the same hostPath mounts or with directories of its own. The new one must touch
 * nothing before it refuses: not the checkpoint (which it used to compact before its gRPC
 * socket check refused it), not its own log or checkpoint directory, not the live ipamd's
 * service; and it must say which ipamd runs.
 *
 * The real ipamd binary twice, as child processes on one simulated node (real AWS SDK
 * against the simulated EC2 and IMDS over HTTP): sharing the checkpoint and socket paths,
 * and with a socket, checkpoint directory and log file of its own (two ran side by side
 * for 30 s before the node guard: the first counted 8 IPs on ENI 0 where EC2 had 7), also
 * with its IMDS endpoint spelled another way (issue 37: the guard was keyed by the
 * endpoint's spelling, and `…/latest/..` slipped past it). In other network namespaces:
 * one-ipamd-cross-netns.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readlinkSync } from 'node:fs';
import { mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { instanceEnis } from '../helpers/custom-net-containerd.js';
import { waitFor } from '../../kit/wait.js';
import { startIpamd } from '../../kit/ipamd-process.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { checkpointFingerprint, startSecondIpamd } from '../helpers/second-ipamd.js';
import { startedSimNode } from '../../kit/sim-node.js';

test('a second ipamd on the node refuses before it reads or writes the checkpoint; the live one keeps serving', async (t) => {
  const { node } = await startedSimNode(t, 41, { mode: 'child', cri: false, env: { WARM_IP_TARGET: '3' } });
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const held = (await c.add('held')).ipv4_addr;
  // Journal records past the snapshot: what a start's compaction would fold in and rewrite.
  for (let i = 0; i < 5; i++) {
    await c.add(`churn${i}`);
    await c.del(`churn${i}`);
  }
  const before = await checkpointFingerprint(node.checkpoint);
  assert.ok(before['ipam.json.journal'], 'the journal exists');

  await assert.rejects(
    startIpamd({ env: node.env, logFile: path.join(node.dir, 'second-ipamd.log'), timeoutMs: 20_000 }),
    /exited with 1 before serving:[\s\S]*another ipamd is running on this node \(pid \d+, netns net:\[\d+\], instance i-[0-9a-f]+, socket /,
  );
  assert.deepEqual(
    await checkpointFingerprint(node.checkpoint),
    before,
    'the second ipamd changed the checkpoint files',
  );

  // The live ipamd still serves, and still holds what it handed out.
  assert.equal((await c.add('held')).ipv4_addr, held, 'a repeated ADD returns the same IP');
  assert.ok((await c.add('after')).ipv4_addr);
  const allocations = (await node.introspect('/v1/allocations')) as Array<{ containerID: string }>;
  assert.deepEqual(allocations.map((a) => a.containerID).sort(), ['after', 'held']);

  // Once it stops, the next ipamd takes the node.
  await node.stop();
  await node.start();
  assert.equal((await c.add('held')).ipv4_addr, held);
});

/** ipamd's view of its ENIs (`/v1/enis`, upstream's shape): ENI id → its secondary IPs, sorted. */
async function ipamdEniIps(introspect: (p: string) => Promise<unknown>): Promise<Record<string, string[]>> {
  const cards = (await introspect('/v1/enis')) as Record<
    string,
    { ENIs: Record<string, { AvailableIPv4Cidrs: Record<string, unknown> }> }
  >;
  const out: Record<string, string[]> = {};
  for (const card of Object.values(cards))
    for (const [id, e] of Object.entries(card.ENIs))
      out[id] = Object.keys(e.AvailableIPv4Cidrs)
        .map((c) => c.replace(/\/32$/, ''))
        .sort();
  return out;
}

test('a second ipamd with its own socket, checkpoint directory and log exits naming the first; the first never miscounts', async (t) => {
  const { sim, node } = await startedSimNode(t, 43, {
    mode: 'child',
    cri: false,
    env: { WARM_IP_TARGET: '3', IP_COOLDOWN_PERIOD: '0', ENI_IPAM_POOL_INTERVAL: '200ms' },
  });
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const held = (await c.add('held')).ipv4_addr;
  // EC2's view of the node, as ipamd must count it: every secondary IP of every attached ENI.
  const ec2View = () =>
    Object.fromEntries(
      instanceEnis(sim, node.instanceId).map((e) => [e.networkInterfaceId, [...e.secondaryIps].sort()]),
    );
  const agree = async () => JSON.stringify(await ipamdEniIps((p) => node.introspect(p))) === JSON.stringify(ec2View());
  await waitFor('ipamd and EC2 to agree', agree);

  const other = path.join(node.dir, 'second');
  await mkdir(other);
  const second = {
    ...node.env,
    ENI_IPAM_SOCKET: path.join(other, 'run', 'ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: path.join(other, 'state', 'ipam.json'),
    AWS_VPC_K8S_CNI_LOG_FILE: path.join(other, 'log', 'ipamd.log'),
    INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0',
  };
  const t0 = performance.now();
  const err = await startSecondIpamd({
    env: second,
    logFile: path.join(node.dir, 'second-ipamd.out'),
    timeoutMs: 20_000,
  });
  assert.ok(err, 'the second ipamd started serving beside the first');
  const line = err.message.split('\n').find((l) => l.startsWith('eni-ipamd: another ipamd'));
  assert.ok(line, err.message);
  assert.match(err.message, /exited with 1 before serving/);
  // It names the running one, by pid, network namespace, instance and paths.
  assert.ok(
    line.includes(
      `pid ${node.pid}, netns ${readlinkSync('/proc/self/ns/net')}, instance ${node.instanceId}, socket ${node.socket}, checkpoint ${node.checkpoint}`,
    ),
    line,
  );
  assert.ok(performance.now() - t0 < 10_000, 'it exits at once');
  // It read and wrote nothing of its own: no socket, checkpoint, cache or log.
  assert.deepEqual(await readdir(other), []);

  // The first keeps serving and counting exactly what EC2 holds, through churn and pool changes.
  for (let i = 0; i < 20; i++) {
    assert.ok((await c.add(`churn${i}`)).ipv4_addr);
    if (i % 2) await c.del(`churn${i}`);
  }
  await waitFor('ipamd and EC2 to agree after churn', agree);
  assert.equal((await c.add('held')).ipv4_addr, held);
  const allocated = ((await node.introspect('/v1/allocations')) as Array<{ ipv4: string }>).map((a) => a.ipv4);
  const ec2Ips = new Set(Object.values(ec2View()).flat());
  assert.deepEqual(
    allocated.filter((ip) => !ec2Ips.has(ip)),
    [],
    'every address ipamd handed out is assigned to this node in EC2',
  );
  // ipamd's view equals EC2's: the wait above; a second snapshot of both could straddle a
  // pool step (WARM_IP_TARGET, 200 ms), so it waits for agreement again rather than comparing once.
  await waitFor('ipamd and EC2 to agree at the end', agree);
});

test('a second ipamd whose IMDS endpoint is spelled another way is refused all the same', async (t) => {
  const { node } = await startedSimNode(t, 47, { mode: 'child', cri: false, env: { WARM_IP_TARGET: '1' } });
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const held = (await c.add('held')).ipv4_addr;
  const imds = node.env.AWS_EC2_METADATA_SERVICE_ENDPOINT!; // http://127.0.0.1:<port>/<instance id>
  const u = new URL(imds);
  const spellings = [
    `${imds}/latest/..`, // a path that resolves to the same place
    `${imds}/`,
    `http://localhost:${u.port}${u.pathname}`, // another name of the same host
    `HTTP://127.0.0.1:${u.port}${u.pathname}`,
  ];
  for (const [i, spelled] of spellings.entries()) {
    const other = path.join(node.dir, `spelled-${i}`);
    await mkdir(other);
    const err = await startSecondIpamd({
      env: {
        ...node.env,
        AWS_EC2_METADATA_SERVICE_ENDPOINT: spelled,
        ENI_IPAM_SOCKET: path.join(other, 'run', 'ipamd.sock'),
        ENI_IPAM_CHECKPOINT_PATH: path.join(other, 'state', 'ipam.json'),
        AWS_VPC_K8S_CNI_LOG_FILE: path.join(other, 'log', 'ipamd.log'),
        INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0',
      },
      logFile: path.join(node.dir, `spelled-${i}.out`),
      timeoutMs: 20_000,
    });
    assert.ok(err, `a second ipamd with IMDS ${spelled} started serving beside the first`);
    assert.match(
      err.message,
      new RegExp(`another ipamd is running on this node \\(pid ${node.pid}, .*instance ${node.instanceId}`),
      spelled,
    );
    assert.deepEqual(await readdir(other), [], `${spelled}: it wrote nothing of its own`);
  }
  assert.equal((await c.add('held')).ipv4_addr, held, 'the first still serves what it handed out');
});
