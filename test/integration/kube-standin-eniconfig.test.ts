/**
 * The ENIConfig custom resource (crd.k8s.amazonaws.com/v1alpha1 eniconfigs) on the
 * Kubernetes API stand-in, checked with two independent clients: the real kubectl
 * (discovery, get, apply create/configure, delete, schema errors, watch) and
 * @kubernetes/client-node (list/get/watch through CustomObjectsApi and Watch with
 * resourceVersion and label selectors), plus node label/annotation changes reaching a node
 * watcher, and the test kit building such a node. The kubectl tests are skipped with a message when kubectl is not installed
 * (scripts/ensure-deps.sh --containerd installs Debian's kubernetes-client).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CustomObjectsApi, KubeConfig, Watch } from '@kubernetes/client-node';
import { vpcCidrBlocks } from '../../sim/index.js';
import { buildNode } from '../../kit/node.js';
import { startKubeStandIn } from '../helpers/kube-standin-env.js';
import { waitFor } from '../../kit/wait.js';

const run = promisify(execFile);
const haveKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
const skip = haveKubectl ? false : 'kubectl not installed (run scripts/ensure-deps.sh --containerd)';
const GROUP = 'crd.k8s.amazonaws.com';
const VERSION = 'v1alpha1';

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  const { api, dir, kubeconfig } = await startKubeStandIn(t, 'eni-ipam-eniconfig-');
  api.upsertNode('node-1');
  // HOME in the temp dir keeps kubectl's discovery cache out of the real home.
  const env = { ...process.env, HOME: dir, KUBECONFIG: kubeconfig };
  const kubectl = async (...args: string[]) =>
    (await run('kubectl', ['--kubeconfig', kubeconfig, ...args], { env, timeout: 30_000 })).stdout;
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return { api, dir, kubeconfig, env, kubectl, kc };
}

const manifest = (name: string, spec: string, labels = '') => `apiVersion: crd.k8s.amazonaws.com/v1alpha1
kind: ENIConfig
metadata:
  name: ${name}
${labels}spec:
${spec}`;

test('kubectl apply creates and then configures an ENIConfig; get, -o json, delete', { skip }, async (t) => {
  const { api, dir, kubectl } = await setup(t);
  api.upsertEniConfig('us-west-2a', { subnet: 'subnet-0aaaaaaaaaaaaaaa1', securityGroups: ['sg-0a1', 'sg-0a2'] });
  const file = join(dir, 'b.yaml');
  await writeFile(
    file,
    manifest('us-west-2b', '  subnet: subnet-0bbbbbbbbbbbbbbb1\n  securityGroups:\n  - sg-0b1\n  - sg-0b2\n'),
  );
  assert.match(await kubectl('apply', '-f', file), /eniconfig\.crd\.k8s\.amazonaws\.com\/us-west-2b created/);
  const listed = await kubectl('get', 'eniconfigs');
  assert.match(listed, /^NAME\s+AGE$/m);
  assert.match(listed, /^us-west-2a\s+\d+s$/m);
  assert.match(listed, /^us-west-2b\s+\d+s$/m);
  const before = api.getObject('eniconfigs', undefined, 'us-west-2b')!;
  await writeFile(
    file,
    manifest(
      'us-west-2b',
      '  subnets:\n  - subnet-0ccccccccccccccc1\n  - subnet-0ccccccccccccccc2\n  securityGroups:\n  - sg-0b1\n',
    ),
  );
  assert.match(await kubectl('apply', '-f', file), /us-west-2b configured/);
  const after = JSON.parse(await kubectl('get', 'eniconfig', 'us-west-2b', '-o', 'json'));
  assert.equal(after.kind, 'ENIConfig');
  assert.equal(after.apiVersion, 'crd.k8s.amazonaws.com/v1alpha1');
  assert.deepEqual(after.spec, {
    subnets: ['subnet-0ccccccccccccccc1', 'subnet-0ccccccccccccccc2'],
    securityGroups: ['sg-0b1'],
  });
  assert.equal(after.metadata.uid, before.metadata.uid, 'apply updates in place');
  assert.deepEqual([before.metadata.generation, after.metadata.generation], [1, 2], 'a spec change bumps generation');
  assert.ok(Number(after.metadata.resourceVersion) > Number(before.metadata.resourceVersion));
  assert.match(await kubectl('delete', 'eniconfig', 'us-west-2b'), /"us-west-2b" deleted/);
  await assert.rejects(kubectl('get', 'eniconfig', 'us-west-2b'), (e: { stderr?: string }) =>
    /NotFound|not found/.test(e.stderr ?? ''),
  );
  assert.ok(api.getObject('eniconfigs', undefined, 'us-west-2a'), 'the other ENIConfig stays');
});

test('kubectl apply of an ENIConfig that breaks the schema is refused with the field named', { skip }, async (t) => {
  const { api, dir, kubectl } = await setup(t);
  const file = join(dir, 'bad.yaml');
  await writeFile(file, manifest('bad', '  securityGroups: [sg-1]\n'));
  await assert.rejects(kubectl('apply', '-f', file), (e: { stderr?: string }) =>
    /one of spec\.subnet or spec\.subnets is required/.test(e.stderr ?? ''),
  );
  await writeFile(file, manifest('bad', '  subnet: [a, b]\n'));
  await assert.rejects(kubectl('apply', '-f', file), (e: { stderr?: string }) =>
    /spec\.subnet in body must be of type string/.test(e.stderr ?? ''),
  );
  assert.equal(api.listObjects('eniconfigs').length, 0, 'nothing stored');
});

test('kubectl get eniconfigs --watch sees one applied later', { skip }, async (t) => {
  const { api, kubeconfig, env } = await setup(t);
  api.upsertEniConfig('first', { subnet: 'subnet-1' });
  const child = spawn('kubectl', ['--kubeconfig', kubeconfig, 'get', 'eniconfigs', '--watch', '-o', 'name'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await waitFor('initial ENIConfig', () => out.includes('eniconfig.crd.k8s.amazonaws.com/first'), 15_000);
  api.upsertEniConfig('second', { subnet: 'subnet-2' });
  await waitFor('second via the watch', () => out.includes('eniconfig.crd.k8s.amazonaws.com/second'), 10_000);
});

test('kubectl label / annotate a node (how operators pick its ENIConfig) and get nodes -l', { skip }, async (t) => {
  const { api, kubectl } = await setup(t);
  api.upsertNode('node-2');
  assert.match(await kubectl('label', 'node', 'node-1', 'k8s.amazonaws.com/eniConfig=us-west-2a'), /labeled/);
  assert.match(await kubectl('annotate', 'node', 'node-2', 'k8s.amazonaws.com/eniConfig=us-west-2b'), /annotated/);
  const picked = await kubectl('get', 'nodes', '-l', 'k8s.amazonaws.com/eniConfig', '-o', 'name');
  assert.equal(picked.trim(), 'node/node-1');
  const n2 = api.getObject('nodes', undefined, 'node-2')!;
  assert.equal(n2.metadata.annotations!['k8s.amazonaws.com/eniConfig'], 'us-west-2b');
  assert.equal(n2.metadata.labels!['kubernetes.io/hostname'], 'node-2', 'other labels kept');
});

test('@kubernetes/client-node: list, get, label selectors and a watch resumed from the list resourceVersion', async (t) => {
  const { api, kc } = await setup(t);
  api.upsertEniConfig('us-west-2a', { subnet: 'subnet-a', securityGroups: ['sg-1'] }, { pool: 'blue' });
  api.upsertEniConfig('us-west-2b', { subnet: 'subnet-b' }, { pool: 'green' });
  const co = kc.makeApiClient(CustomObjectsApi);
  const list = (await co.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'eniconfigs' })) as {
    kind: string;
    apiVersion: string;
    metadata: { resourceVersion: string };
    items: Array<{ metadata: { name: string }; spec: Record<string, unknown> }>;
  };
  assert.equal(list.kind, 'ENIConfigList');
  assert.equal(list.apiVersion, 'crd.k8s.amazonaws.com/v1alpha1');
  assert.deepEqual(
    list.items.map((i) => i.metadata.name),
    ['us-west-2a', 'us-west-2b'],
  );
  const blue = (await co.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: 'eniconfigs',
    labelSelector: 'pool in (blue,red)',
  })) as { items: Array<{ metadata: { name: string } }> };
  assert.deepEqual(
    blue.items.map((i) => i.metadata.name),
    ['us-west-2a'],
  );
  const notBlue = (await co.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: 'eniconfigs',
    labelSelector: 'pool!=blue',
  })) as { items: Array<{ metadata: { name: string } }> };
  assert.deepEqual(
    notBlue.items.map((i) => i.metadata.name),
    ['us-west-2b'],
  );
  const one = (await co.getClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: 'eniconfigs',
    name: 'us-west-2a',
  })) as { spec: Record<string, unknown> };
  assert.deepEqual(one.spec, { subnet: 'subnet-a', securityGroups: ['sg-1'] });

  const seen: string[] = [];
  const w = new Watch(kc);
  const req = await w.watch(
    `/apis/${GROUP}/${VERSION}/eniconfigs`,
    { resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: false },
    (type: string, obj: { metadata: { name: string }; spec: { subnet?: string } }) =>
      seen.push(`${type} ${obj.metadata.name} ${obj.spec?.subnet ?? ''}`),
    () => undefined,
  );
  t.after(() => req.abort());
  api.upsertEniConfig('us-west-2a', { subnet: 'subnet-a2' }, { pool: 'blue' });
  api.upsertEniConfig('us-west-2c', { subnet: 'subnet-c' });
  assert.equal(api.deleteEniConfig('us-west-2b'), true);
  await waitFor('three changes after the list', () => seen.length >= 3, 10_000);
  assert.deepEqual(seen, ['MODIFIED us-west-2a subnet-a2', 'ADDED us-west-2c subnet-c', 'DELETED us-west-2b subnet-b']);
  assert.throws(() => api.upsertEniConfig('broken', {}), /one of spec\.subnet or spec\.subnets is required/);

  // a watch with a label selector sees objects enter (ADDED) and leave (DELETED) its selection
  const blueSeen: string[] = [];
  const bw = await new Watch(kc).watch(
    `/apis/${GROUP}/${VERSION}/eniconfigs`,
    { labelSelector: 'pool=blue' },
    (type: string, obj: { metadata: { name: string } }) => blueSeen.push(`${type} ${obj.metadata.name}`),
    () => undefined,
  );
  t.after(() => bw.abort());
  await waitFor('the initial blue ENIConfig', () => blueSeen.length >= 1, 10_000);
  api.upsertEniConfig('us-west-2c', { subnet: 'subnet-c' }, { pool: 'blue' });
  api.upsertEniConfig('us-west-2a', { subnet: 'subnet-a2' }, { pool: 'green' });
  api.upsertEniConfig('us-west-2c', { subnet: 'subnet-c2' }, { pool: 'blue' });
  await waitFor('three filtered changes', () => blueSeen.length >= 4, 10_000);
  assert.deepEqual(blueSeen, ['ADDED us-west-2a', 'ADDED us-west-2c', 'DELETED us-west-2a', 'MODIFIED us-west-2c']);
});

test('node label and annotation changes reach a node watcher', async (t) => {
  const { api, kc } = await setup(t);
  const seen: Array<{ type: string; labels: Record<string, string>; annotations: Record<string, string> }> = [];
  const w = new Watch(kc);
  const req = await w.watch(
    '/api/v1/nodes',
    { fieldSelector: 'metadata.name=node-1' },
    (type: string, obj: { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } }) =>
      seen.push({ type, labels: obj.metadata.labels ?? {}, annotations: obj.metadata.annotations ?? {} }),
    () => undefined,
  );
  t.after(() => req.abort());
  await waitFor('the initial ADDED', () => seen.length >= 1, 10_000);
  api.setNodeMetadata('node-1', { labels: { 'k8s.amazonaws.com/eniConfig': 'us-west-2a' } });
  await waitFor('the label change', () => seen.length >= 2, 10_000);
  assert.equal(seen[1]!.type, 'MODIFIED');
  assert.equal(seen[1]!.labels['k8s.amazonaws.com/eniConfig'], 'us-west-2a');
  assert.equal(seen[1]!.labels['kubernetes.io/hostname'], 'node-1', 'other labels kept');
  api.setNodeMetadata('node-1', {
    labels: { 'k8s.amazonaws.com/eniConfig': null },
    annotations: { 'k8s.amazonaws.com/eniConfig': 'us-west-2b' },
  });
  await waitFor('the annotation change', () => seen.length >= 3, 10_000);
  assert.equal(seen[2]!.labels['k8s.amazonaws.com/eniConfig'], undefined, 'label removed');
  assert.equal(seen[2]!.annotations['k8s.amazonaws.com/eniConfig'], 'us-west-2b');
  // a label selector on nodes selects by the new label
  api.setNodeMetadata('node-1', { labels: { 'topology.kubernetes.io/zone': 'us-west-2a' } });
  const r = await fetch(`${api.url}/api/v1/nodes?labelSelector=topology.kubernetes.io%2Fzone%3Dus-west-2a`);
  const nodes = (await r.json()) as { items: Array<{ metadata: { name: string } }> };
  assert.deepEqual(
    nodes.items.map((n) => n.metadata.name),
    ['node-1'],
  );
  const none = await fetch(`${api.url}/api/v1/nodes?labelSelector=topology.kubernetes.io%2Fzone%3Dus-west-2b`);
  assert.deepEqual(((await none.json()) as { items: unknown[] }).items, []);
  const bad = await fetch(`${api.url}/api/v1/nodes?labelSelector=${encodeURIComponent('a b c')}`);
  assert.equal(bad.status, 400);
});

test('the kit builds a custom-networking node: secondary VPC block, tagged subnets, node labels, ENIConfigs', async (t) => {
  const n = await buildNode({
    vpcCidrs: ['100.64.0.0/16'],
    subnetTags: { 'kubernetes.io/role/cni': '0' },
    extraSubnets: [
      { cidr: '100.64.0.0/19', tags: { 'kubernetes.io/role/cni': '1' } },
      { cidr: '100.64.32.0/19', availabilityZone: 'us-west-2b' },
    ],
    kube: {
      labels: { 'topology.kubernetes.io/zone': 'us-west-2a' },
      annotations: { note: 'x' },
      eniConfigs: { 'us-west-2a': { subnet: 'subnet-x', securityGroups: ['sg-1', 'sg-2'] } },
    },
  });
  t.after(() => n.close());
  assert.deepEqual(vpcCidrBlocks(n.sim.state), ['10.0.0.0/16', '100.64.0.0/16']);
  assert.deepEqual(
    n.extraSubnets.map((s) => [s.cidr, s.availabilityZone, s.tags]),
    [
      ['100.64.0.0/19', 'us-west-2a', { 'kubernetes.io/role/cni': '1' }],
      ['100.64.32.0/19', 'us-west-2b', {}],
    ],
  );
  assert.deepEqual(n.sim.state.subnets.get(n.subnetId)!.tags, { 'kubernetes.io/role/cni': '0' });
  assert.deepEqual(n.kube!.getObject('eniconfigs', undefined, 'us-west-2a')!.spec, {
    subnet: 'subnet-x',
    securityGroups: ['sg-1', 'sg-2'],
  });
  // a later runtime-version update (withContainerd does one) keeps the labels and annotations
  n.kube!.upsertNode(n.nodeName!, 'containerd://2.0.0');
  const node = n.kube!.getObject('nodes', undefined, n.nodeName!)!;
  assert.equal(node.metadata.labels!['topology.kubernetes.io/zone'], 'us-west-2a');
  assert.equal(node.metadata.annotations!.note, 'x');
  assert.equal(
    (node.status as { nodeInfo: { containerRuntimeVersion: string } }).nodeInfo.containerRuntimeVersion,
    'containerd://2.0.0',
  );
});
