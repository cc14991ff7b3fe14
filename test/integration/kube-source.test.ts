/**
 * ipamd's Kubernetes pod source (@kubernetes/client-node list+watch) against the real
 * kube-apiserver and etcd of this test run (test/cluster/apiserver-shared.ts), as the
 * chart's ServiceAccount: node filtering, watch add/modify/delete, a server that stops
 * answering (a relay that holds every connection: never a partial list, synced=false)
 * and recovery, refused credentials, and a watch resumed from a resourceVersion that etcd
 * compacted (ERROR 410: the source lists again and converges). What reached the server
 * is read from its audit log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubePodSource, KubeUnavailableError, type KubePod } from '../../ipamd/kube/pod-source.js';
import { compactEtcd } from '../../kit/cluster/apiserver.js';
import { auditEntries, uniqueName } from '../../kit/cluster/apiserver-objects.js';
import { realKubeEnv, type RealKubeEnv } from '../helpers/real-kube-env.js';
import { waitFor } from '../../kit/wait.js';

type Env = RealKubeEnv & { ns: string; other: string };

async function setup(t: { after(fn: () => Promise<void> | void): void }): Promise<Env> {
  const env = await realKubeEnv(t, { prefix: 'ks' });
  const ns = uniqueName('ks');
  const other = uniqueName('ks-other');
  await env.kube.registerNode(other);
  const k = env.kube;
  await k.upsertPod({ namespace: ns, name: 'web-1', nodeName: env.nodeName, podIP: '10.0.1.10', containerID: 'c1' });
  await k.upsertPod({ namespace: ns, name: 'host-x', nodeName: env.nodeName, podIP: '127.0.0.1', hostNetwork: true });
  await k.upsertPod({ namespace: ns, name: 'pending-1', nodeName: env.nodeName, phase: 'Pending' });
  await k.upsertPod({ namespace: ns, name: 'web-2', nodeName: other, podIP: '10.0.2.10' });
  return { ...env, ns, other };
}

function source(
  t: { after(fn: () => Promise<void> | void): void },
  e: Env,
  o: { kubeconfig?: string; timeoutMs?: number; watchTimeoutSeconds?: number } = {},
): KubePodSource {
  const s = new KubePodSource({
    nodeName: e.nodeName,
    kubeconfigPath: o.kubeconfig ?? e.kubeconfig(),
    timeoutMs: o.timeoutMs ?? 2000,
    retryMinMs: 50,
    retryMaxMs: 300,
    ...(o.watchTimeoutSeconds ? { watchTimeoutSeconds: o.watchTimeoutSeconds } : {}),
  });
  t.after(() => s.stop());
  return s;
}

const names = (pods: KubePod[]) => pods.map((p) => p.name).sort();
/** LISTs (not watches) of pods by this node that reached the server as the chart's ServiceAccount. */
const lists = (e: Env) =>
  auditEntries(
    e.server,
    (a) =>
      a.verb === 'list' &&
      a.user.username === 'system:serviceaccount:kube-system:eni-ipam' &&
      decodeURIComponent(a.requestURI).includes(`fieldSelector=spec.nodeName=${e.nodeName}`),
  ).length;

test('listOnce returns only the pods bound to this node, with IP, uid, hostNetwork and phase', async (t) => {
  const e = await setup(t);
  const pods = await source(t, e).listOnce();
  assert.deepEqual(names(pods), ['host-x', 'pending-1', 'web-1']);
  const web = pods.find((p) => p.name === 'web-1')!;
  assert.equal(web.podIP, '10.0.1.10');
  assert.equal(web.hostNetwork, false);
  assert.equal(web.phase, 'Running');
  assert.equal(web.uid, (await e.kube.get(`/api/v1/namespaces/${e.ns}/pods/web-1`)).metadata.uid);
  assert.equal(pods.find((p) => p.name === 'host-x')!.hostNetwork, true);
  assert.equal(pods.find((p) => p.name === 'pending-1')!.podIP, undefined);
  await waitFor('the list in the audit log, by fieldSelector, as the chart ServiceAccount', () => lists(e) >= 1, 5000);
});

test('the watch picks up pods added, modified and deleted on this node, and ignores other nodes', async (t) => {
  const e = await setup(t);
  const s = source(t, e);
  let changes = 0;
  s.onChange(() => changes++);
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 10_000);
  assert.equal(s.snapshot().pods.length, 3);
  assert.ok(s.snapshot().syncedAt! <= Date.now());

  await e.kube.upsertPod({ namespace: e.ns, name: 'new-1', nodeName: e.nodeName, podIP: '10.0.1.11' });
  await e.kube.upsertPod({ namespace: e.ns, name: 'other-node', nodeName: e.other, podIP: '10.0.2.11' });
  await waitFor('new-1 seen', () => s.snapshot().pods.some((p) => p.name === 'new-1'), 5000);
  await e.kube.upsertPod({ namespace: e.ns, name: 'pending-1', nodeName: e.nodeName, podIP: '10.0.1.12' });
  await waitFor(
    'pending-1 got its IP',
    () => s.snapshot().pods.find((p) => p.name === 'pending-1')?.podIP === '10.0.1.12',
    5000,
  );
  await e.kube.deletePod(e.ns, 'web-1');
  await waitFor('web-1 gone', () => !s.snapshot().pods.some((p) => p.name === 'web-1'), 5000);
  assert.deepEqual(names(s.snapshot().pods), ['host-x', 'new-1', 'pending-1']);
  assert.equal(s.snapshot().synced, true);
  assert.ok(changes >= 4, `onChange called ${changes} times`);
});

test('a server that stops answering: listOnce rejects within timeoutMs, the cut watch makes the cache unsynced; recovery re-syncs', async (t) => {
  const e = await setup(t);
  const { relay, kubeconfig } = await e.viaRelay();
  const timeoutMs = 800;
  const s = source(t, e, { kubeconfig, timeoutMs });
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 10_000);

  relay.hold();
  const t0 = Date.now();
  await assert.rejects(
    source(t, e, { kubeconfig, timeoutMs }).listOnce(),
    (err: unknown) => err instanceof KubeUnavailableError && /timed out/.test(err.message),
  );
  const took = Date.now() - t0;
  assert.ok(took >= timeoutMs - 50 && took < timeoutMs + 1000, `listOnce rejected after ${took} ms`);
  await waitFor('unsynced after the watch was cut', () => !s.snapshot().synced, timeoutMs + 3000);
  const down = s.snapshot();
  assert.ok(down.lastError, 'lastError set');
  assert.deepEqual(names(down.pods), ['host-x', 'pending-1', 'web-1'], 'last known pods kept while unsynced');

  // Changes made while the source cannot see them, then recovery.
  await e.kube.deletePod(e.ns, 'web-1');
  await e.kube.upsertPod({ namespace: e.ns, name: 'late-1', nodeName: e.nodeName, podIP: '10.0.1.20' });
  relay.resume();
  await waitFor('synced again', () => s.snapshot().synced, 10_000);
  assert.equal(s.snapshot().lastError, undefined);
  await waitFor('cache caught up', () => names(s.snapshot().pods).join() === 'host-x,late-1,pending-1', 5000);
});

test('refused credentials (401) and a stopped server: listOnce rejects with KubeUnavailableError, never a partial list', async (t) => {
  const e = await setup(t);
  const dir = await mkdtemp(join(tmpdir(), 'eni-ipam-kube-badtoken-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const bad = join(dir, 'kubeconfig');
  await writeFile(bad, (await readFile(e.kubeconfig(), 'utf8')).replace(/token: "[^"]+"/, 'token: "not-a-token"'));
  await assert.rejects(
    source(t, e, { kubeconfig: bad }).listOnce(),
    (err: unknown) => err instanceof KubeUnavailableError && err.statusCode === 401,
  );
  const { relay, kubeconfig } = await e.viaRelay();
  assert.equal((await source(t, e, { kubeconfig }).listOnce()).length, 3);
  await relay.close();
  const t0 = Date.now();
  await assert.rejects(source(t, e, { kubeconfig }).listOnce(), KubeUnavailableError);
  assert.ok(Date.now() - t0 < 1500);
});

test('a watch resumed from a compacted resourceVersion gets ERROR 410: the source lists again and converges', async (t) => {
  const e = await setup(t);
  // The server ends each watch after ~1 s: the source resumes from its last resourceVersion.
  const s = source(t, e, { watchTimeoutSeconds: 1 });
  let sawExpired = false;
  s.onChange(() => (sawExpired ||= !s.snapshot().synced && /410/.test(s.snapshot().lastError ?? '')));
  s.start();
  await waitFor('synced', () => s.snapshot().synced, 10_000);
  const listsBefore = lists(e);
  for (let i = 0; i < 5; i++)
    await e.kube.upsertPod({ namespace: e.ns, name: `p-${i}`, nodeName: e.nodeName, podIP: `10.0.3.${i + 1}` });
  await e.kube.deletePod(e.ns, 'p-0');
  // Two writes the source does not watch, then compaction past its last resourceVersion.
  await e.kube.upsertPod({ namespace: e.ns, name: 'elsewhere', nodeName: e.other, podIP: '10.0.2.12' });
  await e.kube.upsertPod({ namespace: e.ns, name: 'elsewhere', nodeName: e.other, podIP: '10.0.2.13' });
  await compactEtcd(e.server);
  // The open watch ends within ~1 s; its resume is too old (a pod event now would move it past the compaction).
  await waitFor('unsynced with a 410 lastError between the expiry and the new list', () => sawExpired, 10_000);
  await e.kube.upsertPod({ namespace: e.ns, name: 'after-compaction', nodeName: e.nodeName, podIP: '10.0.1.40' });
  await waitFor(
    'synced with every pod',
    () =>
      s.snapshot().synced &&
      names(s.snapshot().pods).join() === 'after-compaction,host-x,p-1,p-2,p-3,p-4,pending-1,web-1',
    15_000,
  );
  assert.ok(lists(e) > listsBefore, 'listed again');
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
