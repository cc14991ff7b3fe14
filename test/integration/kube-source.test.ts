/**
 * ipamd's Kubernetes pod source (@kubernetes/client-node list+watch) against the
 * project's Kubernetes API stand-in on loopback: node filtering, watch add/delete,
 * outage behaviour (timeouts, 5xx, cut watches: never a partial list, synced=false)
 * and recovery, and 410 Gone handling.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStandIn } from '../../sim/kube/index.js';
import { KubePodSource, KubeUnavailableError, type KubePod } from '../../ipamd/restore/kube-source.js';
import { waitFor } from '../../kit/wait.js';

async function setup(t: { after(fn: () => Promise<void> | void): void }, o: { historyLimit?: number } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'eni-ipam-kube-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const api = new KubeApiStandIn({ historyLimit: o.historyLimit });
  await api.start();
  t.after(() => api.stop());
  const kubeconfig = join(dir, 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  api.upsertNode('node-1');
  api.upsertNode('node-2');
  api.upsertPod({ namespace: 'default', name: 'web-1', nodeName: 'node-1', podIP: '10.0.1.10', containerID: 'c1' });
  api.upsertPod({
    namespace: 'kube-system',
    name: 'aws-node-x',
    nodeName: 'node-1',
    podIP: '10.0.0.5',
    hostNetwork: true,
  });
  api.upsertPod({ namespace: 'default', name: 'pending-1', nodeName: 'node-1', phase: 'Pending' });
  api.upsertPod({ namespace: 'default', name: 'web-2', nodeName: 'node-2', podIP: '10.0.2.10' });
  const source = (timeoutMs = 1000) => {
    const s = new KubePodSource({
      nodeName: 'node-1',
      kubeconfigPath: kubeconfig,
      timeoutMs,
      retryMinMs: 50,
      retryMaxMs: 300,
    });
    t.after(() => s.stop());
    return s;
  };
  return { api, kubeconfig, source };
}

const names = (pods: KubePod[]) => pods.map((p) => `${p.namespace}/${p.name}`).sort();

test('listOnce returns only the pods bound to this node, with IP, uid, hostNetwork and phase', async (t) => {
  const { api, source } = await setup(t);
  const pods = await source().listOnce();
  assert.deepEqual(names(pods), ['default/pending-1', 'default/web-1', 'kube-system/aws-node-x']);
  const web = pods.find((p) => p.name === 'web-1')!;
  assert.equal(web.podIP, '10.0.1.10');
  assert.equal(web.hostNetwork, false);
  assert.equal(web.phase, 'Running');
  assert.match(web.uid, /^[0-9a-f-]{36}$/);
  assert.equal(pods.find((p) => p.name === 'aws-node-x')!.hostNetwork, true);
  assert.equal(pods.find((p) => p.name === 'pending-1')!.podIP, undefined);
  const listReq = api.requests.find((r) => r.path.startsWith('/api/v1/pods?'));
  assert.ok(listReq, 'a pod list request reached the stand-in');
  assert.equal(new URL(listReq.path, 'http://x').searchParams.get('fieldSelector'), 'spec.nodeName=node-1');
});

test('the watch picks up pods added, modified and deleted on this node, and ignores other nodes', async (t) => {
  const { api, source } = await setup(t);
  const s = source();
  let changes = 0;
  s.onChange(() => changes++);
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 5000);
  assert.equal(s.snapshot().pods.length, 3);
  assert.ok(s.snapshot().syncedAt! <= Date.now());

  api.upsertPod({ namespace: 'default', name: 'new-1', nodeName: 'node-1', podIP: '10.0.1.11' });
  api.upsertPod({ namespace: 'default', name: 'other-node', nodeName: 'node-2', podIP: '10.0.2.11' });
  await waitFor('new-1 seen', () => s.snapshot().pods.some((p) => p.name === 'new-1'), 2000);
  api.upsertPod({ namespace: 'default', name: 'pending-1', nodeName: 'node-1', podIP: '10.0.1.12' });
  await waitFor(
    'pending-1 got its IP',
    () => s.snapshot().pods.find((p) => p.name === 'pending-1')?.podIP === '10.0.1.12',
    2000,
  );
  api.deletePod('default', 'web-1');
  await waitFor('web-1 gone', () => !s.snapshot().pods.some((p) => p.name === 'web-1'), 2000);
  assert.deepEqual(names(s.snapshot().pods), ['default/new-1', 'default/pending-1', 'kube-system/aws-node-x']);
  assert.equal(s.snapshot().synced, true);
  assert.ok(changes >= 4, `onChange called ${changes} times`);
});

test("setFailure('timeout'): listOnce rejects within timeoutMs, the cut watch makes the cache unsynced; recovery re-syncs", async (t) => {
  const { api, source } = await setup(t);
  const timeoutMs = 800;
  const s = source(timeoutMs);
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 5000);

  api.setFailure('timeout');
  const t0 = Date.now();
  await assert.rejects(
    source(timeoutMs).listOnce(),
    (e: unknown) => e instanceof KubeUnavailableError && /timed out/.test(e.message),
  );
  const took = Date.now() - t0;
  assert.ok(took >= timeoutMs - 50 && took < timeoutMs + 1000, `listOnce rejected after ${took} ms`);
  await waitFor('unsynced after the watch was cut', () => !s.snapshot().synced, timeoutMs + 3000);
  const down = s.snapshot();
  assert.ok(down.lastError, 'lastError set');
  assert.deepEqual(
    names(down.pods),
    ['default/pending-1', 'default/web-1', 'kube-system/aws-node-x'],
    'last known pods kept while unsynced',
  );

  // Changes made while the source cannot see them, then recovery.
  api.setFailure('none');
  api.deletePod('default', 'web-1');
  api.upsertPod({ namespace: 'default', name: 'late-1', nodeName: 'node-1', podIP: '10.0.1.20' });
  await waitFor('synced again', () => s.snapshot().synced, 5000);
  assert.equal(s.snapshot().lastError, undefined);
  await waitFor(
    'cache caught up',
    () => names(s.snapshot().pods).join() === 'default/late-1,default/pending-1,kube-system/aws-node-x',
    2000,
  );
});

test("setFailure('error500') and a stopped server: listOnce rejects with KubeUnavailableError, never a partial list", async (t) => {
  const { api, source } = await setup(t);
  api.setFailure('error500');
  await assert.rejects(source().listOnce(), (e: unknown) => e instanceof KubeUnavailableError && e.statusCode === 500);
  api.setFailure('none');
  assert.equal((await source().listOnce()).length, 3);
  await api.stop();
  const t0 = Date.now();
  await assert.rejects(source().listOnce(), KubeUnavailableError);
  assert.ok(Date.now() - t0 < 1500);
});

test('a cut watch followed by more changes than the history holds: the source lists again and converges; a compacted resourceVersion gets 410', async (t) => {
  const { api, source } = await setup(t, { historyLimit: 5 });
  const s = source(800);
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 5000);
  const before = api.requests.length;
  // Cut the watch and, before the client can resume, make more changes than the history keeps.
  api.setFailure('error500');
  api.setFailure('none');
  for (let i = 0; i < 10; i++)
    api.upsertPod({ namespace: 'burst', name: `p-${i}`, nodeName: 'node-1', podIP: `10.0.3.${i + 1}` });
  api.deletePod('burst', 'p-0');
  await waitFor(
    'synced again with all burst pods',
    () => s.snapshot().synced && s.snapshot().pods.filter((p) => p.namespace === 'burst').length === 9,
    5000,
  );
  assert.deepEqual(
    s
      .snapshot()
      .pods.filter((p) => p.namespace === 'burst')
      .map((p) => p.name)
      .sort(),
    ['p-1', 'p-2', 'p-3', 'p-4', 'p-5', 'p-6', 'p-7', 'p-8', 'p-9'],
  );
  const after = api.requests.slice(before).map((r) => new URL(r.path, 'http://x'));
  assert.ok(
    after.some((u) => u.searchParams.get('watch') === null && u.pathname === '/api/v1/pods'),
    'listed again',
  );

  // The stand-in itself, as kube-apiserver does (test/integration/kube-contract.test.ts): a
  // watch from a compacted resourceVersion answers 200, then one ERROR event, Status 410 Expired.
  const ac = new AbortController();
  const r = await fetch(`${api.url}/api/v1/pods?watch=true&resourceVersion=2`, { signal: ac.signal });
  assert.equal(r.status, 200);
  const reader = r.body!.getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  ac.abort();
  const ev = JSON.parse(text.split('\n')[0]!) as {
    type: string;
    object: { kind: string; reason: string; code: number };
  };
  assert.deepEqual([ev.type, ev.object.kind, ev.object.reason, ev.object.code], ['ERROR', 'Status', 'Expired', 410]);
});

test('compaction: the watch gets ERROR 410, the source lists again and converges', async (t) => {
  const { api, source } = await setup(t);
  const s = source(800);
  let sawUnsynced = false;
  s.onChange(() => (sawUnsynced ||= !s.snapshot().synced && /410/.test(s.snapshot().lastError ?? '')));
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 5000);
  const before = api.requests.length;
  api.compact();
  api.upsertPod({ namespace: 'default', name: 'after-compaction', nodeName: 'node-1', podIP: '10.0.1.40' });
  await waitFor(
    'synced with the new pod',
    () => s.snapshot().synced && s.snapshot().pods.some((p) => p.name === 'after-compaction'),
    5000,
  );
  assert.ok(sawUnsynced, 'unsynced with a 410 lastError between the expiry and the new list');
  const after = api.requests.slice(before).map((r) => new URL(r.path, 'http://x'));
  assert.ok(
    after.some((u) => u.searchParams.get('watch') === null && u.pathname === '/api/v1/pods'),
    'listed again',
  );
});

test('without any configuration listOnce rejects with KubeUnavailableError and start() keeps retrying', async (t) => {
  const saved = {
    KUBECONFIG: process.env.KUBECONFIG,
    HOME: process.env.HOME,
    KUBERNETES_SERVICE_HOST: process.env.KUBERNETES_SERVICE_HOST,
  };
  const dir = await mkdtemp(join(tmpdir(), 'eni-ipam-kube-home-'));
  t.after(async () => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    await rm(dir, { recursive: true, force: true });
  });
  delete process.env.KUBECONFIG;
  delete process.env.KUBERNETES_SERVICE_HOST;
  process.env.HOME = dir;
  const s = new KubePodSource({ nodeName: 'node-1', retryMinMs: 20, retryMaxMs: 50 });
  t.after(() => s.stop());
  await assert.rejects(
    s.listOnce(),
    (e: unknown) => e instanceof KubeUnavailableError && /configuration/.test(e.message),
  );
  s.start();
  await waitFor('lastError', () => s.snapshot().lastError, 2000);
  assert.equal(s.snapshot().synced, false);
});
