/**
 * Two releases of the chart on one real node (issue 37): the second one's cluster-wide
 * objects carry its release, so helm installs it beside the first; its ipamd finds the node
 * owned by the first release's DaemonSet (the owner Lease) and steps aside for good: up,
 * not crash-looping, saying so in its log and a StandingAside Event. When the first
 * release's ipamd pod is deleted and replaced (as an upgrade, OOM or eviction does), the
 * first keeps the node: the stray one never serves. Today's failure was the reverse: the
 * stray release won the node at the first one's restart and the real one crash-looped.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { CHART } from '../../kit/helm.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { clusterValues, installEniIpam, ipamdPodUids, NAMESPACE, waitEniIpamReady } from '../../kit/cluster/install.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
const STRAY_NS = 'ipam-stray';

describe('two releases of the chart on one node', { skip, timeout: 20 * 60_000 }, () => {
  let c: TestCluster;
  before(async () => {
    c = await startCluster();
  });
  after(async () => {
    await c?.close();
  });

  /** The holder of the node's owner Lease. */
  const leaseHolder = async () =>
    (
      await c.kubectl.json<{ spec: { holderIdentity: string } }>([
        '-n',
        NAMESPACE,
        'get',
        'lease',
        `eni-ipam-node-${c.nodeName}`,
      ])
    ).spec.holderIdentity;

  /** The stray release's ipamd pod: name, restarts, whether it served, and its log. */
  const stray = async () => {
    const l = await c.kubectl.json<{
      items: Array<{ metadata: { name: string }; status: { containerStatuses?: Array<{ restartCount: number }> } }>;
    }>(['-n', STRAY_NS, 'get', 'pods', '-l', 'app.kubernetes.io/instance=stray']);
    const p = l.items[0];
    if (!p) return undefined;
    const logs = await c.kubectl.try(['-n', STRAY_NS, 'logs', p.metadata.name, '-c', 'ipamd']);
    return { name: p.metadata.name, restarts: p.status.containerStatuses?.[0]?.restartCount ?? 0, log: logs.stdout };
  };

  it('the first release owns the node; a second release installs and steps aside for good', async () => {
    await installEniIpam(c, { wait: true });
    assert.equal(await leaseHolder(), `${NAMESPACE}/eni-ipam`);
    const dir = await mkdtemp('/tmp/eni-ipam-values-');
    try {
      // Its own metrics port: with the first one's, the scheduler keeps the pod Pending (a
      // hostNetwork pod's container port is a host port), and the case never arises.
      await writeFile(`${dir}/values.json`, JSON.stringify({ ...(await clusterValues(c)), metrics: { port: 61690 } }));
      const r = await c.kubectl.helm([
        'install',
        'stray',
        CHART,
        '-n',
        STRAY_NS,
        '--create-namespace',
        '-f',
        `${dir}/values.json`,
      ]);
      assert.equal(r.code, 0, `the second release collides with the first: ${r.stderr}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const s = await waitFor(
      'the stray ipamd to step aside',
      async () => {
        const p = await stray();
        return p?.log.includes('steps aside for good') ? p : undefined;
      },
      180_000,
      1000,
    );
    assert.match(s.log, new RegExp(`this node is owned by DaemonSet ${NAMESPACE}/eni-ipam`));
    const events = await c.kubectl.json<{ items: Array<{ message: string }> }>([
      'get',
      'events',
      '-A',
      '--field-selector',
      'reason=StandingAside',
    ]);
    assert.ok(
      events.items.some((e) => e.message.includes(`of DaemonSet ${STRAY_NS}/eni-ipam`)),
      'a StandingAside Event',
    );
  });

  it("the first release's ipamd pod is replaced: it keeps the node, the stray one never serves or crash-loops", async () => {
    const before = await ipamdPodUids(c);
    await c.kubectl.run([
      '-n',
      NAMESPACE,
      'delete',
      'pod',
      '-l',
      'app.kubernetes.io/instance=eni-ipam',
      '--wait=false',
    ]);
    await waitFor(
      'a new ipamd pod of the first release',
      async () => {
        const now = await ipamdPodUids(c);
        return now.length > 0 && now.every((u) => !before.includes(u));
      },
      120_000,
      1000,
    );
    await waitEniIpamReady(c);
    assert.equal(await leaseHolder(), `${NAMESPACE}/eni-ipam`);
    const s = await stray();
    assert.ok(s, 'the stray pod is there');
    assert.equal(s.restarts, 0, 'the stray ipamd never restarted');
    assert.ok(!s.log.includes('ipamd serving'), 'the stray ipamd never served');
    await c.kubectl.helm(['uninstall', 'stray', '-n', STRAY_NS, '--wait']);
  });
});
