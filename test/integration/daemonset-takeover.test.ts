/**
 * The DaemonSet end to end in containerd (docs/design.md#12-running-on-a-cluster item 6): the DaemonSet
 * `helm template` renders, from the image `npm run image` built, taking over a node from
 * aws-node (its 10-aws.conflist, plugin stand-in, ENI and checkpoint in /var/run/aws-node).
 * The node and pod are run as in daemonset-e2e.test.ts (shared steps:
 * ../helpers/daemonset-e2e-kit.ts).
 *
 * The image is built first if needed (`npm run image`'s build.mjs, a no-op when up to
 * date; ENI_IPAM_IMAGE_ARCHIVE names another archive). Skipped (with the reason) only
 * when no helm binary is installed. Run under `flock /tmp/eni-ipam-containerd.lock`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile, utimes } from 'node:fs/promises';
import path from 'node:path';
import {
  awsConflist,
  awsNodeCheckpoint,
  installAwsCniStandIn,
  leaveEnisAsAwsNode,
  parseAdds,
} from '../helpers/aws-cni-standin.js';
import { createDsNode } from '../helpers/containerd-ds-node.js';
import { runDaemonSetPod, waitProbe } from '../helpers/daemonset-node.js';
import { ensureImageArchive } from '../../kit/image-archive.js';
import { waitFor } from '../../kit/wait.js';
import { nothingLost, render, skip } from '../helpers/daemonset-e2e-kit.js';

test(
  'taking over a node from aws-node with the rendered DaemonSet: ours wins over 10-aws.conflist, running pods keep their IPs',
  { skip, timeout: 180_000 },
  async (t) => {
    const n = await createDsNode({ imageArchive: await ensureImageArchive(), instanceType: 'm5.large' });
    t.after(() => n.close());
    const ds = await render(n);
    // The node as aws-node left it: secondary IPs on the primary ENI and an ENI it created,
    // its conflist and plugin (a stand-in wiring pods the aws way), 6 pods, its checkpoint.
    const { ec2, primary, eni1, secondaries } = await leaveEnisAsAwsNode(n.sim, n.instanceId, 4);
    t.after(() => ec2.destroy());
    const stateDir = path.join(n.dir, 'aws-cni-state');
    await mkdir(stateDir);
    await writeFile(
      path.join(stateDir, 'pool'),
      [
        ...secondaries(primary.networkInterfaceId)
          .slice(0, 3)
          .map((ip) => `${ip} main`),
        ...secondaries(eni1)
          .slice(0, 3)
          .map((ip) => `${ip} 2`),
      ].join('\n') + '\n',
    );
    await installAwsCniStandIn(n.host('/opt/cni/bin'), stateDir);
    await writeFile(n.host('/etc/cni/net.d/10-aws.conflist'), JSON.stringify(awsConflist()));
    const ipAtStart = new Map<string, string>();
    for (let i = 0; i < 6; i++) {
      const id = await waitFor(
        `aws-pod-${i} through aws-cni`,
        async () => {
          const name = `aws-pod-${i}`;
          try {
            return await n.cri.runPodSandbox({ name, namespace: 'default', uid: randomUUID() });
          } catch (e) {
            if (i > 0) throw e; // the first one may race containerd's conf reload
            for (const sb of await n.cri.listPodSandbox())
              if (sb.metadata?.name === name) await n.cri.removePodSandbox(sb.id).catch(() => undefined);
            return undefined;
          }
        },
        15_000,
        200,
      );
      ipAtStart.set(id, (await n.cri.podSandboxStatus(id)).status!.network!.ip);
    }
    const awsPods = parseAdds(await readFile(path.join(stateDir, 'adds'), 'utf8'));
    assert.equal(awsPods.length, 6);
    for (const p of awsPods)
      n.kube.upsertPod({
        namespace: p.namespace,
        name: p.name,
        uid: randomUUID(),
        nodeName: n.nodeName,
        podIP: p.ip,
        containerID: p.containerID,
      });
    await writeFile(n.host('/run/aws-node/ipam.json'), awsNodeCheckpoint(awsPods));
    // aws-node was removed from the node two minutes ago: its checkpoint is stale, not a sign of a live aws-node.
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    await utimes(n.host('/run/aws-node/ipam.json'), twoMinutesAgo, twoMinutesAgo);
    await writeFile(path.join(stateDir, 'gone'), '');

    const callsBefore = n.sim.calls.length;
    const pod = await runDaemonSetPod({
      cri: n.cri,
      ds,
      id: {
        name: 'eni-ipam-ccccc',
        namespace: ds.metadata.namespace ?? 'kube-system',
        uid: randomUUID(),
        nodeName: n.nodeName,
        hostIP: n.nodeIp,
      },
      node: n.mountNs,
      logRoot: `${n.dir}/pod-logs`,
      passthrough: ['/run/netns'],
    });
    t.after(() => pod.remove().catch(() => undefined));
    await waitProbe(pod, 'readinessProbe', (c) => c === 0, 60_000);
    const conf = await waitFor(
      'our conflist beside the aws one',
      () => {
        const f = readdirSync(n.host('/etc/cni/net.d'))
          .filter((x) => !x.startsWith('.'))
          .sort();
        return f.length === 2 ? f : undefined;
      },
      30_000,
      100,
    );
    assert.deepEqual(
      conf,
      ['05-eni-ipam.conflist', '10-aws.conflist'],
      'ours sorts first (the runtime uses it); the aws one is left in place',
    );
    const byId = new Map((await n.allocations()).map((a) => [a.containerID, a.ipv4]));
    for (const p of awsPods) assert.equal(byId.get(p.containerID), p.ip, `${p.name} keeps ${p.ip}`);
    // Imported from the checkpoint (not only adopted from CRI/kernel evidence): ipamd renames
    // the file once imported, which it can only do if the chart mounts /var/run/aws-node.
    assert.deepEqual(
      // The checkpoint's files only: ipamd's socket for the network policy agent shares the directory.
      readdirSync(n.host('/run/aws-node'))
        .filter((f) => f.startsWith('ipam.json'))
        .map((f) => f.replace(/-\d{4}-.*$/, '')),
      ['ipam.json.imported-by-eni-ipam'],
      "aws-node's checkpoint imported and renamed",
    );
    // A new pod goes through our conflist and gets a fresh IP.
    const id = await waitFor(
      'a new pod through eni-ipam',
      async () => {
        const name = `new-${randomUUID().slice(0, 6)}`;
        try {
          return await n.cri.runPodSandbox({ name, namespace: 'default', uid: randomUUID() });
        } catch {
          for (const sb of await n.cri.listPodSandbox())
            if (sb.metadata?.name === name) await n.cri.removePodSandbox(sb.id).catch(() => undefined);
          return undefined;
        }
      },
      20_000,
      200,
    );
    const fresh = (await n.cri.podSandboxStatus(id)).status!.network!.ip;
    assert.equal(
      awsPods.some((p) => p.ip === fresh),
      false,
      `the new pod got ${fresh}, not a migrated pod's IP`,
    );
    ipAtStart.set(id, fresh);
    const lost = await nothingLost(n, ipAtStart);
    const released = n.sim.calls
      .slice(callsBefore)
      .filter((c) =>
        ['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface'].includes(c.action),
      );
    assert.deepEqual(
      released.map((c) => c.action),
      [],
      'nothing released during the takeover',
    );
    t.diagnostic(
      `aws-node takeover: ${conf.join(' < ')}; ${awsPods.length} aws-wired pods kept their IPs; new pod ${fresh}; live ${lost.live} == assigned ${lost.assigned}`,
    );
  },
);
