/**
 * The chart and its neighbours on a cluster (issue 37): its cluster-wide objects carry the
 * release, so a second release does not collide with the first; its default affinity keeps
 * eni-ipam off the nodes it must not run on (aws-node's own exclusions: Fargate, EKS hybrid
 * and Auto Mode nodes) and off nodes labelled for aws-node (`eni-ipam.io/ipam=false`); the
 * DaemonSet names itself to ipamd (ENI_IPAM_DAEMONSET), which its guards then publish.
 * Rendered by the real helm.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseAllDocuments } from 'yaml';
import { CHART, helm, renderChart } from '../../kit/helm.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- rendered objects
type Obj = Record<string, any>;

async function render(release: string, namespace: string): Promise<Obj[]> {
  const r = await helm(['template', release, CHART, '--namespace', namespace]);
  assert.equal(r.code, 0, r.stderr);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as Obj)
    .filter((o) => o !== null);
}

const clusterWide = (objs: Obj[]) =>
  objs
    .filter((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')
    .map((o) => `${o.kind}/${o.metadata.name}`)
    .sort();

test('cluster-wide objects carry the release: the documented one keeps its names, a second release gets its own', async () => {
  const first = await render('eni-ipam', 'kube-system');
  assert.deepEqual(clusterWide(first), ['ClusterRole/eni-ipam', 'ClusterRoleBinding/eni-ipam']);
  const second = await render('second', 'kube-system');
  const other = await render('eni-ipam', 'ipam');
  for (const objs of [second, other]) {
    const names = clusterWide(objs);
    assert.equal(names.length, 2);
    for (const n of names) assert.ok(!clusterWide(first).includes(n), `${n} collides with the first release`);
    const binding = objs.find((o) => o.kind === 'ClusterRoleBinding')!;
    assert.equal(binding.roleRef.name, objs.find((o) => o.kind === 'ClusterRole')!.metadata.name);
  }
  assert.deepEqual(clusterWide(second), [
    'ClusterRole/eni-ipam-kube-system-second',
    'ClusterRoleBinding/eni-ipam-kube-system-second',
  ]);
  // Every other object is namespaced; the ENIConfig CRD (off by default) has upstream's fixed name.
  for (const o of first)
    assert.ok(['ClusterRole', 'ClusterRoleBinding'].includes(o.kind) || o.metadata.namespace, o.kind);
});

test("the owner Leases: one namespace for every release, read and written by each release's own Role", async () => {
  for (const [release, ns] of [
    ['eni-ipam', 'kube-system'],
    ['second', 'ipam'],
  ]) {
    const objs = await render(release!, ns!);
    const role = objs.find((o) => o.kind === 'Role')!;
    assert.equal(role.metadata.namespace, 'kube-system', 'the Leases live in nodeOwnership.leaseNamespace');
    assert.deepEqual(role.rules, [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
    ]);
    const binding = objs.find((o) => o.kind === 'RoleBinding')!;
    assert.equal(binding.roleRef.name, role.metadata.name);
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'eni-ipam', namespace: ns }]);
    const env = new Map(
      (objs.find((o) => o.kind === 'DaemonSet')!.spec.template.spec.containers[0].env as Obj[]).map((e) => [
        e.name,
        e.value,
      ]),
    );
    assert.equal(env.get('ENI_IPAM_DAEMONSET'), `${ns}/eni-ipam`);
    assert.equal(env.get('ENI_IPAM_LEASE_NAMESPACE'), 'kube-system');
  }
  const names = await Promise.all([render('eni-ipam', 'kube-system'), render('second', 'kube-system')]);
  const roleNames = names.map((objs) => objs.find((o) => o.kind === 'Role')!.metadata.name);
  assert.notEqual(roleNames[0], roleNames[1], 'two releases, two Roles in the shared namespace');
});

test('the default affinity keeps aws-node exclusions and nodes labelled for aws-node; the DaemonSet names itself', async () => {
  const ds = (await renderChart()).find((o) => (o as Obj).kind === 'DaemonSet') as Obj;
  const terms =
    ds.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
  assert.equal(terms.length, 1, 'one term: every expression must hold');
  assert.deepEqual(terms[0].matchExpressions, [
    { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
    { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] },
    { key: 'eks.amazonaws.com/compute-type', operator: 'NotIn', values: ['fargate', 'hybrid', 'auto'] },
    { key: 'eni-ipam.io/ipam', operator: 'NotIn', values: ['false'] },
  ]);
  const env = new Map((ds.spec.template.spec.containers[0].env as Obj[]).map((e) => [e.name, e.value]));
  assert.equal(env.get('ENI_IPAM_DAEMONSET'), 'kube-system/eni-ipam');
});

test("the network policy agent finds ipamd's answer where it dials: /var/run/aws-node/ipamd.sock, the host's dir", async () => {
  const ds = (await renderChart()).find((o) => (o as Obj).kind === 'DaemonSet') as Obj;
  const ipamd = ds.spec.template.spec.containers[0];
  const env = new Map((ipamd.env as Obj[]).map((e) => [e.name, e.value]));
  assert.equal(env.get('ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET'), '/var/run/aws-node/ipamd.sock');
  const mount = (ipamd.volumeMounts as Obj[]).find((m) => m.mountPath === '/var/run/aws-node')!;
  const volume = (ds.spec.template.spec.volumes as Obj[]).find((v) => v.name === mount.name)!;
  assert.equal(volume.hostPath.path, '/var/run/aws-node');
  // The chart sets it (the agent's path is fixed): a second entry in env is refused.
  const r = await helm([
    'template',
    'eni-ipam',
    CHART,
    '--set',
    'env.ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET=/tmp/x.sock',
  ]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /env\.ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET is set by the chart/);
});
