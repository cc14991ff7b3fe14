/**
 * docs/design.md#13-evidence-before-trust item 6 / docs/design.md#12-running-on-a-cluster item 6: taking over a node from aws-node without losing a
 * pod, through real containerd. The node starts as aws-node left it: its conflist
 * `10-aws.conflist` (plugin: a stand-in wiring pods the aws way, aws-cni-standin.ts),
 * secondary IPs it assigned on the primary ENI and an ENI it created with its tags
 * (made here through the real AWS SDK against the simulated EC2, as aws-node would),
 * 12 live pods spanning both ENIs, and its checkpoint `/var/run/aws-node/ipam.json`
 * (here in the node's temp dir, named by ENI_IPAM_AWS_NODE_CHECKPOINT_PATH). Then aws-node
 * goes and ipamd starts with no checkpoint of its own, installing its conflist:
 * every pod keeps its IP, zero Unassign/Detach/Delete, new pods get fresh IPs through
 * ipamd's conflist (which sorts first; the aws one is left in place), a migrated pod's
 * DEL through containerd releases its IP, and the nothing-lost check holds.
 *
 * Needs root, containerd, runc, iproute2, and a built tree. Run under the containerd lock:
 * `flock /tmp/eni-ipam-containerd.lock node --test dist/test/integration/aws-node-migration.test.js`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ipIn } from '../../kit/netns.js';
import {
  awsConflist,
  awsNodeCheckpoint,
  installAwsCniStandIn,
  leaveEnisAsAwsNode,
  parseAdds,
} from '../helpers/aws-cni-standin.js';
import { createInstalledCniNode } from '../helpers/containerd-cni-node.js';
import { findLosses } from '../../kit/nothing-lost.js';
import { waitFor } from '../../kit/wait.js';

const RELEASE_ACTIONS = ['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface'];

test('aws-node → eni-ipam on a node with 12 live pods: every pod keeps its IP, nothing released, new pods get fresh IPs', async (t) => {
  const awsCkpt = (dir: string) => path.join(dir, 'aws-node', 'ipam.json');
  // Short GC/shrink/cooldown so a wrong release would happen within the test.
  const ipamdEnv: NodeJS.ProcessEnv = {
    ENI_IPAM_GC_INTERVAL: '500ms',
    ENI_IPAM_GC_GRACE: '1s',
    ENI_IPAM_SHRINK_DELAY: '1s',
    IP_COOLDOWN_PERIOD: '1s',
    ENI_IPAM_MIN_ENI_AGE: '0s',
    // aws-node's checkpoint is written just before ipamd starts: ipamd waits until it has been quiet this long.
    ENI_IPAM_AWS_NODE_QUIET: '2s',
  };
  const n = await createInstalledCniNode({ instanceType: 'm5.large', ipamdEnv });
  t.after(() => n.close());
  ipamdEnv.ENI_IPAM_AWS_NODE_CHECKPOINT_PATH = awsCkpt(n.dir);

  // --- The node as aws-node left it ---------------------------------------------------
  // m5.large: 3 ENIs × 10 IPv4 (9 secondary each).
  const { ec2, primary, eni1, secondaries } = await leaveEnisAsAwsNode(n.sim, n.instanceId, 9);
  t.after(() => ec2.destroy());
  // 8 pods on the primary ENI (route table main), 4 on device 1 (table 2).
  const pool = [
    ...secondaries(primary.networkInterfaceId)
      .slice(0, 8)
      .map((ip) => `${ip} main`),
    ...secondaries(eni1)
      .slice(0, 4)
      .map((ip) => `${ip} 2`),
  ];
  const stateDir = path.join(n.dir, 'aws-cni-state');
  await mkdir(stateDir);
  await writeFile(path.join(stateDir, 'pool'), pool.join('\n') + '\n');
  await installAwsCniStandIn(n.binDir, stateDir);
  await writeFile(path.join(n.confDir, '10-aws.conflist'), JSON.stringify(awsConflist()));
  await waitFor('the eni-link plug to show device 1', () => n.eniLinks!.links.has(eni1), 10_000, 100);

  // 12 live pods wired by "aws-cni" (containerd may need a moment to load the conflist).
  const podName = (i: number) => `aws-pod-${i}`;
  let lastErr = '';
  t.after(() => {
    if (lastErr) console.log('last RunPodSandbox error:', lastErr);
  });
  for (let i = 0; i < 12; i++) {
    await waitFor(
      `RunPodSandbox ${podName(i)} through aws-cni`,
      async () => {
        try {
          return await n.cri.runPodSandbox({ name: podName(i), namespace: 'default', uid: randomUUID() });
        } catch (e) {
          if (i > 0) throw e;
          lastErr = `${(e as Error).message}\n${await readFile(path.join(stateDir, 'stderr'), 'utf8').catch(() => '')}`;
          return undefined; // the first one may race containerd's conf reload
        }
      },
      15_000,
      200,
    );
  }
  const awsPods = parseAdds(await readFile(path.join(stateDir, 'adds'), 'utf8'));
  assert.equal(awsPods.length, 12);
  const live0 = await n.cri.liveSandboxes();
  assert.deepEqual(
    live0.map((s) => s.ip).sort(),
    awsPods.map((p) => p.ip).sort(),
    'containerd reports the aws-wired IPs',
  );
  const routes = await ipIn(n.nodeNetns.path, ['-4', 'route', 'show', 'table', 'main']);
  for (const p of awsPods)
    assert.match(
      routes,
      new RegExp(`^${p.ip.replace(/\./g, '\\.')} dev eni[0-9a-f]{11} scope link`, 'm'),
      `aws-style host route of ${p.ip}`,
    );
  // aws-node's checkpoint (written by its ipamd on every change; this boot).
  await mkdir(path.dirname(awsCkpt(n.dir)), { recursive: true });
  await writeFile(awsCkpt(n.dir), awsNodeCheckpoint(awsPods));

  // --- aws-node goes; ipamd starts with no checkpoint of its own ----------------------
  await writeFile(path.join(stateDir, 'gone'), '');
  const callsBefore = n.sim.calls.length;
  await n.startIpamd();
  t.after(async () => {
    await n.ipamd?.stop(10_000);
  });
  const imported = await n.allocations();
  const byId = new Map(imported.map((a) => [a.containerID, a.ipv4]));
  for (const p of awsPods) assert.equal(byId.get(p.containerID), p.ip, `${p.name} keeps ${p.ip} (imported)`);
  assert.deepEqual(
    // The checkpoint's files only: ipamd's own socket for the network policy agent
    // (ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET, aws-node's ipamd.sock) shares the directory.
    (await readdir(path.dirname(awsCkpt(n.dir))))
      .filter((f) => f.startsWith('ipam.json'))
      .map((f) => f.replace(/-\d{4}-.*$/, '')),
    ['ipam.json.imported-by-eni-ipam'],
    'aws-node checkpoint renamed once imported',
  );
  const conf = (await readdir(n.confDir)).filter((f) => !f.startsWith('.')).sort();
  assert.deepEqual(
    conf,
    ['05-eni-ipam.conflist', '10-aws.conflist'],
    'ours installed, sorting first; the aws one left in place',
  );
  // The ENI aws-node created is adopted (served from), not freed.
  const s1 = await waitFor(
    'a clean evidence pass',
    async () => {
      const s = await n.status();
      return s.evidence.passes >= 1 && !s.releasesFrozen ? s : undefined;
    },
    20_000,
    100,
  );
  assert.ok(
    s1.enis.some((e) => e.eniId === eni1),
    'the aws-node ENI is in the datastore',
  );
  assert.equal(s1.counts.assigned, 12);

  // New pods go through our conflist (once containerd reloaded it) and get fresh IPs.
  const fresh: string[] = [];
  for (let i = 0; i < 3; i++) {
    const id = await waitFor(
      `new pod ${i} through eni-ipam`,
      async () => {
        const name = `new-pod-${i}-${randomUUID().slice(0, 6)}`;
        try {
          return await n.cri.runPodSandbox({ name, namespace: 'default', uid: randomUUID() });
        } catch {
          // aws-cni refused (containerd had not reloaded yet): drop the failed sandbox record, retry.
          for (const sb of await n.cri.listPodSandbox())
            if (sb.metadata?.name === name) await n.cri.removePodSandbox(sb.id).catch(() => undefined);
          return undefined;
        }
      },
      20_000,
      200,
    );
    fresh.push((await n.cri.podSandboxStatus(id)).status!.network!.ip);
  }
  const awsIps = new Set(awsPods.map((p) => p.ip));
  assert.equal(new Set(fresh).size, 3, `fresh IPs distinct: ${fresh}`);
  for (const ip of fresh) assert.equal(awsIps.has(ip), false, `new pod got ${ip}, a migrated pod's IP`);

  // The plugin log named in ipamd's conflist (AWS_VPC_K8S_PLUGIN_LOG_FILE) has the new pods' ADDs, run in ipamd.
  const pluginLog = (await readFile(path.join(n.dir, 'plugin.log'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { verb: string; ip?: string; outcome: string });
  assert.deepEqual(
    pluginLog
      .filter((l) => l.verb === 'ADD' && l.outcome === 'ok')
      .map((l) => l.ip)
      .sort(),
    [...fresh].sort(),
  );
  // A migrated pod's DEL through containerd (now our plugin) releases its imported allocation.
  const victim = awsPods[11]!;
  await n.cri.stopPodSandbox(victim.containerID);
  await n.cri.removePodSandbox(victim.containerID);
  await waitFor(
    "the migrated pod's allocation released",
    async () => !(await n.allocations()).some((a) => a.containerID === victim.containerID),
    10_000,
    100,
  );

  // Nothing lost, after a GC pass past the grace.
  const passes = (await n.status()).evidence.passes;
  const notBefore = Date.now() + 1100;
  await waitFor(
    'a GC pass after the grace',
    async () => {
      const s = await n.status();
      return s.evidence.passes > passes + 1 && (s.evidence.lastPassAt ?? 0) >= notBefore ? s : undefined;
    },
    20_000,
    100,
  );
  const live = await n.cri.liveSandboxes();
  assert.equal(live.length, 14);
  const ipInNetns = new Map<string, string | undefined>();
  for (const sb of live) {
    const ns = await n.cri.netnsPath(sb.id);
    const out = ns ? await ipIn(ns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']).catch(() => '') : '';
    ipInNetns.set(sb.id, /inet (\d+\.\d+\.\d+\.\d+)\/32/.exec(out)?.[1]);
  }
  const allocations = await n.allocations();
  const losses = findLosses({
    live,
    ipAtStart: new Map(awsPods.map((p) => [p.containerID, p.ip])),
    ipInNetns,
    sim: n.sim.state,
    calls: n.sim.calls,
    instanceId: n.instanceId,
    allocations,
  });
  assert.deepEqual(losses, [], `nothing-lost check failed:\n${losses.join('\n')}`);
  const s2 = await n.status();
  assert.equal(s2.counts.assigned, live.length, 'assigned == live sandboxes');
  const releases = n.sim.calls.slice(callsBefore).filter((c) => RELEASE_ACTIONS.includes(c.action));
  assert.deepEqual(
    releases.map((c) => `${c.action} ${JSON.stringify(c.params)}`),
    [],
    'zero Unassign/Detach/Delete since ipamd started',
  );
});
