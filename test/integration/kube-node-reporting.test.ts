/**
 * ipamd tells Kubernetes what its pool can do, end to end: the real ipamd binary on the
 * simulated cloud (real SDK over HTTP) with a /28 subnet that runs dry, writing through
 * @kubernetes/client-node to the Kubernetes API stand-in. A failed ADD leaves a Warning
 * Event on its pod naming the reason and the binding limit; the node condition
 * eni-ipam.io/IPAllocatable turns False (SubnetFull) and, with
 * ENI_IPAM_TAINT_WHEN_EXHAUSTED=true, the node is tainted; once an address comes back
 * the condition is True again and the taint is gone. A frozen-but-serving node is never
 * tainted. kubectl (when installed) shows it all. Every wait polls with a deadline.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { KubeApiStandIn } from '../../sim/kube/index.js';
import { createNode } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';

const run = promisify(execFile);
const haveKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
const NODE = 'node-1';
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function setup(t: { after(fn: () => Promise<void> | void): void }, taint: boolean) {
  const api = new KubeApiStandIn();
  await api.start();
  t.after(() => api.stop());
  api.upsertNode(NODE);
  // /28: 11 usable addresses; the instance takes 1, the primary ENI fills with 9, 1 is left: no room for another ENI.
  const h = await createNode({ subnetCidr: '10.0.0.0/28' });
  t.after(() => h.close());
  const kubeconfig = path.join(h.dir, 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  await h.startIpamd({
    MY_NODE_NAME: NODE,
    KUBECONFIG: kubeconfig,
    ENI_IPAM_TAINT_WHEN_EXHAUSTED: String(taint),
    ENI_IPAM_ADD_WAIT_TIMEOUT: '30s',
    ENI_IPAM_INSTALL_CNI: 'false',
    IP_COOLDOWN_PERIOD: '1',
    // No runtime to read: releases stay frozen from missing evidence the whole test.
    CRI_RUNTIME_ENDPOINT: `unix://${path.join(h.dir, 'no-cri.sock')}`,
  });
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const node = () => api.getObject('nodes', undefined, NODE)!;
  const condition = () =>
    (node().status as Obj).conditions.find((x: Obj) => x.type === 'eni-ipam.io/IPAllocatable') as Obj | undefined;
  const tainted = () =>
    ((node().spec as Obj).taints ?? []).some(
      (x: Obj) => x.key === 'eni-ipam.io/no-ip-available' && x.effect === 'NoSchedule',
    );
  const addPod = (id: string) =>
    api.upsertPod({ namespace: 'default', name: `pod-${id}`, uid: `uid-${id}`, nodeName: NODE, phase: 'Pending' });
  const kubectl = async (...args: string[]) =>
    (
      await run('kubectl', ['--kubeconfig', kubeconfig, ...args], {
        env: { ...process.env, HOME: h.dir },
        timeout: 30_000,
      })
    ).stdout;
  return { api, h, c, condition, tainted, addPod, kubectl };
}

test('a subnet that runs dry: pod Event, condition False, taint; an address back: condition True, taint gone', async (t) => {
  const { api, c, condition, tainted, addPod, kubectl } = await setup(t, true);
  // Frozen from missing evidence while the pool can serve: True, reason ReleasesFrozen, never a taint.
  const first = await waitFor(
    'the condition written at start',
    () => (condition()?.status === 'True' ? condition() : undefined),
    20_000,
  );
  assert.equal(first.reason, 'ReleasesFrozen');
  assert.match(first.message, /releases frozen \(cri: /);
  assert.equal(tainted(), false, 'frozen releases alone never taint');
  const ids = Array.from({ length: 9 }, (_, i) => `fill${i}`);
  for (const id of ids) addPod(id);
  await Promise.all(ids.map((id) => c.add(id)));
  addPod('stuck');
  await assert.rejects(c.add('stuck'), /no free IP and the pool cannot grow/);

  const ev = (await waitFor(
    'the pod Event',
    () =>
      api
        .listObjects('events')
        .find((e: Obj) => e.involvedObject.kind === 'Pod' && e.involvedObject.name === 'pod-stuck'),
    15_000,
  )) as Obj;
  assert.equal(ev.reason, 'FailedIPAllocation');
  assert.equal(ev.type, 'Warning');
  assert.equal(ev.involvedObject.uid, 'uid-stuck');
  assert.equal(ev.metadata.namespace, 'default');
  assert.match(ev.message, /\(subnet_full\)/);
  assert.match(
    ev.message,
    /the subnet has no free addresses \(EC2 InsufficientFreeAddressesInSubnet for subnet-/,
    'names the limit that binds',
  );
  const down = await waitFor(
    'condition False',
    () => (condition()?.status === 'False' ? condition() : undefined),
    15_000,
  );
  assert.equal(down.reason, 'SubnetFull');
  assert.match(down.message, /pool cannot grow/);
  assert.ok(down.lastHeartbeatTime && down.lastTransitionTime);
  await waitFor('the taint', () => tainted(), 15_000);
  await waitFor(
    'a Node Event for the transition',
    () =>
      api
        .listObjects('events')
        .some((e: Obj) => e.involvedObject.kind === 'Node' && e.reason === 'SubnetFull' && e.type === 'Warning'),
    15_000,
  );

  // The same pod failing again is the same Event, its count grown (dedup), not a second one.
  await assert.rejects(c.add('stuck'), /no free IP/);
  await waitFor(
    'count 2 on the same Event',
    () => {
      const evs = api.listObjects('events').filter((e: Obj) => e.involvedObject.name === 'pod-stuck');
      return evs.length === 1 && evs[0]!.count === 2;
    },
    30_000,
  );

  if (haveKubectl) {
    const events = await kubectl('get', 'events', '-n', 'default');
    const described = await kubectl('describe', 'node', NODE);
    t.diagnostic(`kubectl get events -n default\n${events}`);
    t.diagnostic(`kubectl describe node ${NODE}\n${described}`);
    assert.match(
      events,
      /Warning\s+FailedIPAllocation\s+pod\/pod-stuck\s+eni-ipam could not assign an IP on node node-1 \(subnet_full\)/,
    );
    assert.match(described, /^Taints:\s+eni-ipam\.io\/no-ip-available:NoSchedule$/m);
    assert.match(described, /^\s+eni-ipam\.io\/IPAllocatable\s+False\s+.*SubnetFull\s+no IP can be had now/m);
    assert.match(described, /Warning\s+SubnetFull\s+.*eni-ipamd\s+eni-ipam\.io\/IPAllocatable=False/);
  }

  // An address comes back (a pod deleted, cooldown 1 s): the node can serve again.
  const transitionedAt = down.lastTransitionTime;
  await c.del('fill0');
  const up = await waitFor(
    'condition True again',
    () => (condition()?.status === 'True' ? condition() : undefined),
    15_000,
  );
  assert.notEqual(up.lastTransitionTime, undefined);
  assert.ok(Date.parse(up.lastTransitionTime) >= Date.parse(transitionedAt));
  await waitFor('the taint removed', () => !tainted(), 15_000);
  assert.ok((await c.add('stuck')).ipv4_addr, 'the pod gets its IP');
});

test('taint off (the default): condition False when dry, but no taint', async (t) => {
  const { c, condition, tainted, addPod } = await setup(t, false);
  const ids = Array.from({ length: 9 }, (_, i) => `fill${i}`);
  for (const id of ids) addPod(id);
  await Promise.all(ids.map((id) => c.add(id)));
  await assert.rejects(c.add('one-more'), /no free IP/);
  await waitFor('condition False', () => condition()?.status === 'False', 15_000);
  assert.equal(tainted(), false);
});
