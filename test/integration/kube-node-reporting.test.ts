/**
 * ipamd tells Kubernetes what its pool can do, end to end: the real ipamd binary on the
 * simulated cloud (real SDK over HTTP) with a /28 subnet that runs dry, writing through
 * @kubernetes/client-node to the test run's real kube-apiserver as the chart's
 * ServiceAccount (RBAC as the chart grants it: a 403 in the audit log fails the test). A
 * failed ADD leaves a Warning Event on its pod naming the reason and the binding limit;
 * the node condition eni-ipam.io/IPAllocatable turns False (SubnetFull) and, with
 * ENI_IPAM_TAINT_WHEN_EXHAUSTED=true (the chart's taintWhenExhausted ClusterRole), the
 * node is tainted; once an address comes back the condition is True again and the taint
 * is gone. A frozen-but-serving node is never tainted. kubectl shows it all. Every wait
 * polls with a deadline.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { clusterBinaries } from '../../kit/cluster/binaries.js';
import { kubectlRunner } from '../../kit/cluster/kubectl.js';
import { assertNoForbidden } from '../../kit/cluster/apiserver-objects.js';
import { createNode } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';
import { waitFor } from '../../kit/wait.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function setup(t: { after(fn: () => Promise<void> | void): void; diagnostic(m: string): void }, taint: boolean) {
  const diagnostic = (m: string) => t.diagnostic(m);
  const env = await realKubeEnv(t, { prefix: 'report' });
  const NODE = env.nodeName;
  const identity = taint ? 'ipamd-taint' : 'ipamd';
  const user = `system:serviceaccount:kube-system:${taint ? 'eni-ipam-taint' : 'eni-ipam'}`;
  // What the ClusterRole does not grant answers 403: each test ends asserting none reached ipamd
  // (named in the diagnostics when a test fails first). Never thrown from a hook: later hooks must run.
  const since = Date.now();
  const concerns = (uri: string) => uri.includes(NODE) || uri.includes('/events');
  const rbacHeld = () => assertNoForbidden(env.server, user, since, concerns);
  t.after(() => {
    try {
      rbacHeld();
    } catch (e) {
      diagnostic((e as Error).message);
    }
  });
  // /28: 11 usable addresses; the instance takes 1, the primary ENI fills with 9, 1 is left: no room for another ENI.
  const h = await createNode({ subnetCidr: '10.0.0.0/28' });
  t.after(() => h.close());
  await h.startIpamd({
    MY_NODE_NAME: NODE,
    KUBECONFIG: env.kubeconfig(identity),
    ENI_IPAM_TAINT_WHEN_EXHAUSTED: String(taint),
    ENI_IPAM_ADD_WAIT_TIMEOUT: '30s',
    ENI_IPAM_INSTALL_CNI: 'false',
    IP_COOLDOWN_PERIOD: '1',
    // No runtime to read: releases stay frozen from missing evidence the whole test.
    CRI_RUNTIME_ENDPOINT: `unix://${path.join(h.dir, 'no-cri.sock')}`,
  });
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const node = async (): Promise<Obj> => env.kube.get(`/api/v1/nodes/${NODE}`);
  const condition = async () =>
    ((await node()).status.conditions ?? []).find((x: Obj) => x.type === 'eni-ipam.io/IPAllocatable') as
      Obj | undefined;
  const tainted = async () =>
    ((await node()).spec.taints ?? []).some(
      (x: Obj) => x.key === 'eni-ipam.io/no-ip-available' && x.effect === 'NoSchedule',
    );
  const addPod = (id: string) =>
    env.kube.upsertPod({ namespace: 'default', name: `pod-${id}`, nodeName: NODE, phase: 'Pending' });
  /** The Events ipamd on this node wrote (the server is shared: by source host). */
  const events = async (): Promise<Obj[]> =>
    ((await env.kube.get('/api/v1/namespaces/default/events')).items as Obj[]).filter((e) => e.source?.host === NODE);
  const kubectl = kubectlRunner(await clusterBinaries(), env.server.adminKubeconfig);
  return { NODE, c, condition, tainted, addPod, events, kubectl, rbacHeld };
}

test('a subnet that runs dry: pod Event, condition False, taint; an address back: condition True, taint gone', async (t) => {
  const { NODE, c, condition, tainted, addPod, events, kubectl, rbacHeld } = await setup(t, true);
  // Frozen from missing evidence while the pool can serve: True, reason ReleasesFrozen, never a taint.
  const first = await waitFor(
    'the condition written at start',
    async () => ((await condition())?.status === 'True' ? condition() : undefined),
    20_000,
  );
  assert.equal(first.reason, 'ReleasesFrozen');
  assert.match(first.message, /releases frozen \(cri: /);
  assert.equal(await tainted(), false, 'frozen releases alone never taint');
  const ids = Array.from({ length: 9 }, (_, i) => `fill${i}`);
  for (const id of ids) await addPod(id);
  await Promise.all(ids.map((id) => c.add(id)));
  const stuck = await addPod('stuck');
  // The kubelet sends the pod's uid in the CNI arguments (K8S_POD_UID): the real one.
  const stuckUid = String(stuck.body.metadata.uid);
  await assert.rejects(c.add('stuck', { k8s_pod_uid: stuckUid }), /no free IP and the pool cannot grow/);

  const ev = await waitFor(
    'the pod Event',
    async () => (await events()).find((e) => e.involvedObject.kind === 'Pod' && e.involvedObject.name === 'pod-stuck'),
    15_000,
  );
  assert.equal(ev.reason, 'FailedIPAllocation');
  assert.equal(ev.type, 'Warning');
  assert.equal(ev.involvedObject.uid, stuckUid);
  assert.equal(ev.metadata.namespace, 'default');
  assert.match(ev.message, /\(subnet_full\)/);
  assert.match(
    ev.message,
    /the subnet has no free addresses \(EC2 InsufficientFreeAddressesInSubnet for subnet-/,
    'names the limit that binds',
  );
  const down = await waitFor(
    'condition False',
    async () => ((await condition())?.status === 'False' ? condition() : undefined),
    15_000,
  );
  assert.equal(down.reason, 'SubnetFull');
  assert.match(down.message, /pool cannot grow/);
  assert.ok(down.lastHeartbeatTime && down.lastTransitionTime);
  await waitFor('the taint', () => tainted(), 15_000);
  await waitFor(
    'a Node Event for the transition',
    async () =>
      (await events()).some(
        (e) => e.involvedObject.kind === 'Node' && e.reason === 'SubnetFull' && e.type === 'Warning',
      ),
    15_000,
  );

  // The same pod failing again is the same Event, its count grown (dedup), not a second one.
  await assert.rejects(c.add('stuck', { k8s_pod_uid: stuckUid }), /no free IP/);
  await waitFor(
    'count 2 on the same Event',
    async () => {
      const evs = (await events()).filter((e) => e.involvedObject.name === 'pod-stuck');
      return evs.length === 1 && evs[0]!.count === 2;
    },
    30_000,
  );

  // kubectl (built with the server) shows it all.
  const shown = await kubectl.run([
    'get',
    'events',
    '-n',
    'default',
    '--field-selector',
    'involvedObject.name=pod-stuck',
  ]);
  const described = await kubectl.run(['describe', 'node', NODE]);
  t.diagnostic(`kubectl get events -n default\n${shown}`);
  t.diagnostic(`kubectl describe node ${NODE}\n${described}`);
  assert.match(
    shown,
    new RegExp(
      `Warning\\s+FailedIPAllocation\\s+pod/pod-stuck\\s+eni-ipam could not assign an IP on node ${NODE} \\(subnet_full\\)`,
    ),
  );
  assert.match(described, /^Taints:\s+eni-ipam\.io\/no-ip-available:NoSchedule$/m);
  assert.match(described, /^\s+eni-ipam\.io\/IPAllocatable\s+False\s+.*SubnetFull\s+no IP can be had now/m);
  assert.match(described, /Warning\s+SubnetFull\s+.*eni-ipamd\s+eni-ipam\.io\/IPAllocatable=False/);

  // An address comes back (a pod deleted, cooldown 1 s): the node can serve again.
  const transitionedAt = down.lastTransitionTime;
  await c.del('fill0');
  const up = await waitFor(
    'condition True again',
    async () => ((await condition())?.status === 'True' ? condition() : undefined),
    15_000,
  );
  assert.notEqual(up.lastTransitionTime, undefined);
  assert.ok(Date.parse(up.lastTransitionTime) >= Date.parse(transitionedAt));
  await waitFor('the taint removed', async () => !(await tainted()), 15_000);
  assert.ok((await c.add('stuck', { k8s_pod_uid: stuckUid })).ipv4_addr, 'the pod gets its IP');
  rbacHeld();
});

test('taint off (the default): condition False when dry, but no taint', async (t) => {
  const { c, condition, tainted, addPod, rbacHeld } = await setup(t, false);
  const ids = Array.from({ length: 9 }, (_, i) => `fill${i}`);
  for (const id of ids) await addPod(id);
  await Promise.all(ids.map((id) => c.add(id)));
  await assert.rejects(c.add('one-more'), /no free IP/);
  await waitFor('condition False', async () => (await condition())?.status === 'False', 15_000);
  assert.equal(await tainted(), false);
  rbacHeld();
});
