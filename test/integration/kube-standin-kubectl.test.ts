/**
 * The Kubernetes API stand-in checked with an independent client, kubectl: discovery,
 * list with a field selector (-o json), server-side tables (get nodes), get by name,
 * NotFound, watches (full Table rows with -w), and what ipamd writes (Events, the node
 * condition, the taint) as kubectl get events / describe show it. Skipped with a message when kubectl is not installed
 * (scripts/ensure-deps.sh --containerd installs Debian's kubernetes-client).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { isoSeconds, KubeWrites, statusOf } from '../../ipamd/observability/kube-writes.js';
import { CONDITION_TYPE, EXHAUSTED_TAINT } from '../../ipamd/observability/node-ip-state.js';
import { startKubeStandIn } from '../helpers/kube-standin-env.js';
import { waitFor } from '../../kit/wait.js';

const run = promisify(execFile);
const haveKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
const skip = haveKubectl ? false : 'kubectl not installed (run scripts/ensure-deps.sh --containerd)';

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  const { api, dir, kubeconfig } = await startKubeStandIn(t, 'eni-ipam-kubectl-');
  api.upsertNode('node-1');
  api.upsertNode('node-2');
  api.upsertPod({ namespace: 'default', name: 'web-1', nodeName: 'node-1', podIP: '10.0.1.10', containerID: 'abc123' });
  api.upsertPod({ namespace: 'kube-system', name: 'dns-1', nodeName: 'node-1', podIP: '10.0.1.11' });
  api.upsertPod({ namespace: 'default', name: 'web-2', nodeName: 'node-2', podIP: '10.0.2.10' });
  // HOME in the temp dir keeps kubectl's discovery cache out of the real home.
  const env = { ...process.env, HOME: dir, KUBECONFIG: kubeconfig };
  const kubectl = async (...args: string[]) =>
    (await run('kubectl', ['--kubeconfig', kubeconfig, ...args], { env, timeout: 30_000 })).stdout;
  return { api, kubeconfig, env, kubectl };
}

test('kubectl get pods -A --field-selector spec.nodeName=node-1 -o json', { skip }, async (t) => {
  const { kubectl } = await setup(t);
  const list = JSON.parse(await kubectl('get', 'pods', '-A', '--field-selector', 'spec.nodeName=node-1', '-o', 'json'));
  assert.equal(list.kind, 'List');
  const pods = list.items
    .map((p: { metadata: { namespace: string; name: string } }) => `${p.metadata.namespace}/${p.metadata.name}`)
    .sort();
  assert.deepEqual(pods, ['default/web-1', 'kube-system/dns-1']);
  const web = list.items.find((p: { metadata: { name: string } }) => p.metadata.name === 'web-1');
  assert.equal(web.kind, 'Pod');
  assert.equal(web.spec.nodeName, 'node-1');
  assert.equal(web.status.podIP, '10.0.1.10');
  assert.deepEqual(web.status.podIPs, [{ ip: '10.0.1.10' }]);
  assert.equal(web.status.containerStatuses[0].containerID, 'containerd://abc123');
  assert.match(web.metadata.resourceVersion, /^\d+$/);
});

test('kubectl get nodes, get pod by name, NotFound, version', { skip }, async (t) => {
  const { kubectl } = await setup(t);
  const nodes = await kubectl('get', 'nodes');
  assert.match(nodes, /^NAME\s+STATUS/m);
  assert.match(nodes, /^node-1\s+Ready/m);
  assert.match(nodes, /^node-2\s+Ready/m);
  const wide = await kubectl('get', 'pods', '-A', '-o', 'wide');
  assert.match(wide, /default\s+web-2\s+.*10\.0\.2\.10\s+node-2/);
  const one = JSON.parse(await kubectl('get', 'pod', '-n', 'default', 'web-1', '-o', 'json'));
  assert.equal(one.metadata.name, 'web-1');
  const node = JSON.parse(await kubectl('get', 'node', 'node-2', '-o', 'json'));
  assert.equal(node.kind, 'Node');
  await assert.rejects(kubectl('get', 'pod', '-n', 'default', 'nope'), (e: { stderr?: string }) =>
    /NotFound|not found/.test(e.stderr ?? ''),
  );
  assert.match(await kubectl('version', '-o', 'json'), /v1\.30\.0-standin/);
});

test('kubectl get pods --watch sees a pod added later', { skip }, async (t) => {
  const { api, kubeconfig, env } = await setup(t);
  const child = spawn(
    'kubectl',
    ['--kubeconfig', kubeconfig, 'get', 'pods', '-n', 'default', '--watch', '-o', 'name'],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await waitFor('initial pods', () => out.includes('pod/web-1'), 15_000);
  api.upsertPod({ namespace: 'default', name: 'late-1', nodeName: 'node-1', podIP: '10.0.1.30' });
  await waitFor('late-1 via the watch', () => out.includes('pod/late-1'), 10_000);
});

test('kubectl get pods -w prints full rows for pods added later (Table watch events)', { skip }, async (t) => {
  const { api, kubeconfig, env } = await setup(t);
  const child = spawn('kubectl', ['--kubeconfig', kubeconfig, 'get', 'pods', '-n', 'default', '--watch'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await waitFor('initial rows', () => /^web-1\s+1\/1\s+Running\s+0\s+\d+s$/m.test(out), 15_000);
  api.upsertPod({
    namespace: 'default',
    name: 'late-1',
    nodeName: 'node-1',
    podIP: '10.0.1.30',
    containerID: 'def456',
  });
  await waitFor(
    'late-1 row with READY, STATUS, RESTARTS, AGE',
    () => /^late-1\s+1\/1\s+Running\s+0\s+\d+s$/m.test(out),
    10_000,
  );
  assert.match(out, /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/m);
  assert.doesNotMatch(out, /^NAME\s+AGE$/m, `a bare NAME AGE header means the watch sent objects, not Tables:\n${out}`);
});

test(
  "Events, the node condition and the taint written by ipamd's client show in kubectl get events / describe",
  { skip },
  async (t) => {
    const { api, kubeconfig, kubectl } = await setup(t);
    api.upsertPod({ namespace: 'default', name: 'stuck', nodeName: 'node-1', uid: 'uid-stuck', phase: 'Pending' });
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const w = new KubeWrites(kc, 'node-1');
    const now = Date.now();
    await w.patchCondition({
      type: CONDITION_TYPE,
      status: 'False',
      reason: 'SubnetFull',
      message: 'no IP can be had now',
      lastHeartbeatTime: isoSeconds(now),
      lastTransitionTime: isoSeconds(now),
    });
    const node = await w.readNode();
    assert.equal(
      node.status?.conditions?.find((c) => c.type === 'Ready')?.status,
      'True',
      'the strategic merge kept the other conditions',
    );
    await assert.rejects(
      w.patchTaints([{ key: EXHAUSTED_TAINT.key, effect: 'NoSchedule' }], '1'),
      (e) => statusOf(e) === 409,
      'a stale resourceVersion is a conflict',
    );
    await w.patchTaints([{ key: EXHAUSTED_TAINT.key, effect: 'NoSchedule' }], node.metadata!.resourceVersion!);
    const occ = {
      involved: { kind: 'Pod' as const, name: 'stuck', namespace: 'default', uid: 'uid-stuck' },
      namespace: 'default',
      type: 'Warning' as const,
      reason: 'FailedIPAllocation',
      message: 'no IP (subnet_full)',
    };
    const name = await w.writeEvent({
      key: 'k',
      op: 'create',
      occurrence: occ,
      count: 1,
      firstTimestamp: now - 30_000,
      lastTimestamp: now,
    });
    await w.writeEvent({
      key: 'k',
      op: 'patch',
      name,
      occurrence: occ,
      count: 4,
      firstTimestamp: now - 30_000,
      lastTimestamp: now,
    });

    assert.match(
      await kubectl('get', 'events', '-n', 'default'),
      /\(x4 over \d+s\)\s+Warning\s+FailedIPAllocation\s+pod\/stuck\s+no IP \(subnet_full\)/,
    );
    const dn = await kubectl('describe', 'node', 'node-1');
    assert.match(dn, /^Taints:\s+eni-ipam\.io\/no-ip-available:NoSchedule$/m);
    assert.match(dn, /^\s+eni-ipam\.io\/IPAllocatable\s+False\s+.*SubnetFull\s+no IP can be had now$/m);
    assert.match(
      await kubectl('describe', 'pod', '-n', 'default', 'stuck'),
      /Warning\s+FailedIPAllocation\s+\d+s \(x4 over \d+s\)\s+eni-ipamd\s+no IP \(subnet_full\)/,
    );
    assert.match(await kubectl('get', 'namespaces'), /^kube-system\s+Active/m);
  },
);
