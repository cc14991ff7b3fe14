/**
 * One owner per node (ipamd/startup/node-owner.ts, take-node.ts), on the run's real API
 * server with the chart's RBAC. Issue 37: a second release of the chart was refused on a
 * node only while the first one's ipamd ran; at the first one's next restart the stray one
 * won the node and the real one crash-looped. Now the owner is a Lease naming the
 * DaemonSet: a second DaemonSet's ipamd steps aside for good (up, idle, an Event), also
 * while the owner's ipamd is down, and takes the node only once the owner's DaemonSet is
 * gone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadKubeConfig } from '../../ipamd/kube/config.js';
import { claimNode, ownerLeaseName } from '../../ipamd/startup/node-owner.js';
import { uniqueName } from '../../kit/cluster/apiserver-objects.js';
import { IPAMD_PATH, ipamdChildEnv } from '../../kit/ipamd-process.js';
import { startedSimNode } from '../../kit/sim-node.js';
import { waitFor } from '../../kit/wait.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { realKubeEnv, type RealKubeEnv } from '../helpers/real-kube-env.js';

const NS = 'kube-system';

/** Creates DaemonSet kube-system/<name> (existence is all the owner record asks); deleted after the test. */
async function daemonSet(
  env: RealKubeEnv,
  t: { after(fn: () => unknown): void },
  name: string,
): Promise<() => Promise<void>> {
  const labels = { app: name };
  const body = {
    metadata: { name },
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'x', image: 'registry.k8s.io/pause:3.10' }] } },
    },
  };
  const r = await env.kube.api.call('POST', `/apis/apps/v1/namespaces/${NS}/daemonsets`, body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const del = async () => void (await env.kube.api.call('DELETE', `/apis/apps/v1/namespaces/${NS}/daemonsets/${name}`));
  t.after(del);
  return del;
}

async function leaseOf(env: RealKubeEnv) {
  return (await env.kube.get(
    `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${ownerLeaseName(env.nodeName)}`,
  )) as { spec: { holderIdentity: string }; metadata: { ownerReferences: Array<{ kind: string; uid: string }> } };
}

test('the owner Lease: created for the first DaemonSet, refused to a second while the first exists, taken once it is gone', async (t) => {
  const env = await realKubeEnv(t, { prefix: 'owner' });
  t.after(() =>
    env.kube.api.call('DELETE', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${ownerLeaseName(env.nodeName)}`),
  );
  const [a, b] = [uniqueName('ds-a'), uniqueName('ds-b')];
  const deleteA = await daemonSet(env, t, a);
  await daemonSet(env, t, b);
  const kc = loadKubeConfig(env.kubeconfig()).kc; // the chart's ServiceAccount
  const claim = (me: string) => claimNode({ kc, node: env.nodeName, me: `${NS}/${me}`, namespace: NS });

  assert.deepEqual(await claim(a), { kind: 'mine', lease: ownerLeaseName(env.nodeName) });
  const lease = await leaseOf(env);
  assert.equal(lease.spec.holderIdentity, `${NS}/${a}`);
  const node = (await env.kube.get(`/api/v1/nodes/${env.nodeName}`)) as { metadata: { uid: string } };
  assert.deepEqual(
    lease.metadata.ownerReferences.map((r) => [r.kind, r.uid]),
    [['Node', node.metadata.uid]],
    'the Lease goes with its Node',
  );
  const other = await claim(b);
  assert.equal(other.kind, 'other');
  assert.equal(other.kind === 'other' && other.owner, `${NS}/${a}`);
  assert.equal((await claim(a)).kind, 'mine', 'the owner keeps it across its restarts');
  assert.equal((await leaseOf(env)).spec.holderIdentity, `${NS}/${a}`);

  await deleteA();
  assert.deepEqual(await claim(b), { kind: 'mine', lease: ownerLeaseName(env.nodeName), took: `${NS}/${a}` });
  assert.equal((await leaseOf(env)).spec.holderIdentity, `${NS}/${b}`);
});

test("a second DaemonSet's ipamd steps aside for good: up and idle, also while the owner's ipamd is down", async (t) => {
  const env = await realKubeEnv(t, { prefix: 'owner-ipamd' });
  t.after(() =>
    env.kube.api.call('DELETE', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${ownerLeaseName(env.nodeName)}`),
  );
  const [a, b] = [uniqueName('ds-a'), uniqueName('ds-b')];
  await daemonSet(env, t, a);
  await daemonSet(env, t, b);
  const kube = { MY_NODE_NAME: env.nodeName, KUBECONFIG: env.kubeconfig(), ENI_IPAM_LEASE_NAMESPACE: NS };
  const { node } = await startedSimNode(t, 53, {
    mode: 'child',
    cri: false,
    env: { ...kube, ENI_IPAM_DAEMONSET: `${NS}/${a}`, WARM_IP_TARGET: '1' },
  });
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const held = (await c.add('held')).ipv4_addr;
  assert.equal((await leaseOf(env)).spec.holderIdentity, `${NS}/${a}`);

  // The owner's ipamd stops (upgrade, OOM, eviction): B starts meanwhile and must not take the node.
  await node.stop();
  // B: the same node and directories (a second release with the chart's defaults), its own DaemonSet.
  const out = path.join(node.dir, 'b.out');
  const bEnv = ipamdChildEnv({ env: { ...node.env, ...kube, ENI_IPAM_DAEMONSET: `${NS}/${b}` }, logFile: out });
  const log = createWriteStream(out);
  const bProc = spawn(process.execPath, [IPAMD_PATH], { env: bEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  bProc.stdout.pipe(log);
  bProc.stderr.pipe(log);
  let bExit: number | null | undefined;
  bProc.on('exit', (code) => (bExit = code));
  t.after(() => bProc.kill('SIGKILL'));
  const aside = await waitFor(
    'B to say it steps aside',
    async () => (await readFile(out, 'utf8')).split('\n').find((l) => l.includes('steps aside for good')),
    30_000,
  );
  assert.ok(aside.includes(`this node is owned by DaemonSet ${NS}/${a}`), aside);
  assert.ok(aside.includes('StandingAside'), aside);
  // The Event is posted after the log line: wait for it.
  let reasons: string[] = [];
  await waitFor(
    'a StandingAside Event on the Node',
    async () => {
      const events = (await env.kube.get(
        `/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=${env.nodeName}`,
      )) as { items: Array<{ reason: string; message: string }> };
      reasons = events.items.map((e) => e.reason);
      return events.items.some((e) => e.reason === 'StandingAside' && e.message.includes(`${NS}/${b}`));
    },
    30_000,
  ).catch((e: Error) => {
    throw new Error(`${e.message}: ${JSON.stringify(reasons)}`);
  });

  // A comes back: it gets its node and allocations; B stays up and aside.
  await node.start();
  assert.equal((await c.add('held')).ipv4_addr, held, 'the owner kept the node and its allocations');
  assert.equal(bExit, undefined, 'B is still up (no crash loop)');
  assert.ok(!(await readFile(out, 'utf8')).includes('ipamd serving'), 'B never served');
  assert.equal((await leaseOf(env)).spec.holderIdentity, `${NS}/${a}`);
});
