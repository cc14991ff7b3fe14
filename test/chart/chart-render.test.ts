/**
 * What the chart renders, checked object by object: every object is valid against the
 * Kubernetes OpenAPI with unknown fields refused (test/helpers/k8s-validate.ts), and
 * non-default values land where they must.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CHART, helm, renderChart } from '../../kit/helm.js';
import { validateObject } from '../helpers/k8s-validate.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const find = (objs: Obj[], kind: string): Obj => {
  const o = objs.find((x) => x.kind === kind);
  assert.ok(o, `no ${kind} rendered (got ${objs.map((x) => x.kind).join(', ')})`);
  return o;
};
const ipamd = (ds: Obj): Obj => ds.spec.template.spec.containers.find((c: Obj) => c.name === 'ipamd');
const envOf = (c: Obj): Map<string, Obj> => new Map(c.env.map((e: Obj) => [e.name, e]));

async function assertValid(objs: Obj[]): Promise<void> {
  for (const o of objs) assert.deepEqual(await validateObject(o), [], `${o.kind}/${o.metadata?.name}`);
}

test('defaults: every object validates; the DaemonSet has what a node needs', async () => {
  const objs = await renderChart();
  assert.deepEqual(objs.map((o) => o.kind).sort(), [
    'ClusterRole',
    'ClusterRoleBinding',
    'DaemonSet',
    'Role',
    'RoleBinding',
    'ServiceAccount',
  ]);
  await assertValid(objs);
  const pod = find(objs, 'DaemonSet').spec.template.spec;
  assert.equal(pod.hostNetwork, true);
  // Least privilege (values.yaml securityContext, hostPID; test/cluster/least-privilege.test.ts).
  assert.equal(pod.hostPID, false);
  assert.equal(pod.priorityClassName, 'system-node-critical');
  assert.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
  const terms =
    pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions;
  assert.deepEqual(
    terms.find((t: Obj) => t.key === 'eks.amazonaws.com/compute-type'),
    { key: 'eks.amazonaws.com/compute-type', operator: 'NotIn', values: ['fargate', 'hybrid', 'auto'] },
  );
  const c = ipamd(find(objs, 'DaemonSet'));
  assert.deepEqual(c.securityContext, {
    capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW', 'SYS_ADMIN'] },
  });
  assert.equal(pod.initContainers[0].securityContext.privileged, true);
  const probe = [
    '/app/dist/cni-plugin/eni-ipam-probe',
    '--socket',
    '/var/run/eni-ipam/ipamd.sock',
    '--timeout',
    '5000',
  ];
  assert.deepEqual(c.readinessProbe.exec.command, probe);
  // Liveness asks for the liveness service: SERVING while ipamd answers at all, also standing by beside aws-node.
  assert.deepEqual(c.livenessProbe.exec.command, [
    ...probe.slice(0, 3),
    '--service',
    'eniipam.v1.Liveness',
    ...probe.slice(3),
  ]);
  // The API server refuses two mounts on one path in a container ("mountPath: must be
  // unique"); the real-cluster test applies the rendered objects to one as well.
  for (const ctr of [...pod.initContainers, ...pod.containers]) {
    const paths = ctr.volumeMounts.map((m: Obj) => m.mountPath);
    assert.deepEqual(paths, [...new Set(paths)], `${ctr.name}: every mountPath once`);
  }
  const volNames = pod.volumes.map((v: Obj) => v.name);
  assert.deepEqual(volNames, [...new Set(volNames)], 'every volume name once');
  const mounts = new Map(c.volumeMounts.map((m: Obj) => [m.mountPath, m]));
  assert.equal((mounts.get('/var/run/netns') as Obj).mountPropagation, 'HostToContainer');
  for (const p of [
    '/run/xtables.lock',
    '/var/run/eni-ipam',
    '/run/containerd',
    '/host/var/log/aws-routed-eni',
    '/host/opt/cni/bin',
    '/host/etc/cni/net.d',
    '/var/run/aws-node',
  ])
    assert.ok(mounts.has(p), p);
  const vols = new Map(pod.volumes.map((v: Obj) => [v.name, v.hostPath]));
  assert.deepEqual(vols.get('xtables-lock'), { path: '/run/xtables.lock', type: 'FileOrCreate' });
  assert.equal(envOf(c).get('CRI_RUNTIME_ENDPOINT')!.value, 'unix:///run/containerd/containerd.sock');
  assert.deepEqual(c.resources, { requests: { cpu: '25m', memory: '112Mi' }, limits: { memory: '192Mi' } });
  const role = find(objs, 'ClusterRole');
  assert.deepEqual(
    role.rules,
    [
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['crd.k8s.amazonaws.com'], resources: ['eniconfigs'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      { apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'] },
      { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
      { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
    ],
    'Events and the node condition on by default; ENIConfigs and EndpointSlices (the cooldown evidence) readable; no node patch (the taint is opt-in)',
  );
  assert.equal(envOf(c).get('ENI_IPAM_TAINT_WHEN_EXHAUSTED')!.value, 'false');
});

test('non-default values: CRI-O socket, extraEnv, IRSA, monitoring, pull secrets, nodeSelector, digest', async () => {
  const roleArn = 'arn:aws:iam::111122223333:role/eni-ipam';
  const digest = `sha256:${'ab'.repeat(32)}`;
  const objs = await renderChart({
    criSocket: '/var/run/crio/crio.sock',
    extraEnv: [{ name: 'CLUSTER_NAME', valueFrom: { configMapKeyRef: { name: 'cluster', key: 'name' } } }],
    serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': roleArn } },
    podMonitor: { create: true, interval: '15s' },
    serviceMonitor: { create: true },
    imagePullSecrets: [{ name: 'regcred' }],
    nodeSelector: { 'node.kubernetes.io/instance-type': 'm5.large' },
    image: { repository: '111122223333.dkr.ecr.us-west-2.amazonaws.com/eni-ipam', digest },
    rbac: { nodeEventsAndStatus: false },
    taintWhenExhausted: true,
    env: { WARM_IP_TARGET: 5 },
  });
  await assertValid(objs);
  assert.deepEqual(objs.map((o) => o.kind).sort(), [
    'ClusterRole',
    'ClusterRoleBinding',
    'DaemonSet',
    'PodMonitor',
    'Role',
    'RoleBinding',
    'Service',
    'ServiceAccount',
    'ServiceMonitor',
  ]);
  assert.equal(find(objs, 'ServiceAccount').metadata.annotations['eks.amazonaws.com/role-arn'], roleArn);
  const ds = find(objs, 'DaemonSet');
  const pod = ds.spec.template.spec;
  assert.deepEqual(pod.imagePullSecrets, [{ name: 'regcred' }]);
  assert.deepEqual(pod.nodeSelector, { 'node.kubernetes.io/instance-type': 'm5.large' });
  const c = ipamd(ds);
  assert.equal(c.image, `111122223333.dkr.ecr.us-west-2.amazonaws.com/eni-ipam@${digest}`);
  assert.equal(pod.initContainers[0].image, c.image);
  const env = envOf(c);
  assert.equal(env.get('CRI_RUNTIME_ENDPOINT')!.value, 'unix:///var/run/crio/crio.sock');
  assert.deepEqual(env.get('CLUSTER_NAME')!.valueFrom, { configMapKeyRef: { name: 'cluster', key: 'name' } });
  assert.equal(env.get('WARM_IP_TARGET')!.value, '5');
  // ipamd's start-up log tells chart-set settings from the rest by this list.
  const chartSet = env.get('ENI_IPAM_CHART_ENV')!.value.split(',');
  for (const n of ['WARM_IP_TARGET', 'MY_NODE_NAME', 'CRI_RUNTIME_ENDPOINT']) assert.ok(chartSet.includes(n), n);
  assert.ok(!chartSet.includes('CLUSTER_NAME'), 'extraEnv is not the chart');
  const criMount = c.volumeMounts.find((m: Obj) => m.name === 'cri-socket-dir');
  assert.equal(criMount.mountPath, '/var/run/crio');
  assert.deepEqual(pod.volumes.find((v: Obj) => v.name === 'cri-socket-dir').hostPath, {
    path: '/var/run/crio',
    type: 'Directory',
  });
  assert.ok(!c.volumeMounts.some((m: Obj) => m.mountPath === '/run/containerd'));
  const pm = find(objs, 'PodMonitor');
  assert.equal(pm.spec.podMetricsEndpoints[0].port, 'metrics');
  assert.equal(pm.spec.podMetricsEndpoints[0].interval, '15s');
  assert.deepEqual(pm.spec.selector.matchLabels, ds.spec.selector.matchLabels);
  assert.deepEqual(find(objs, 'Service').spec.selector, ds.spec.selector.matchLabels);
  const rules = find(objs, 'ClusterRole').rules as Obj[];
  assert.ok(
    !rules.some((r) => r.resources.includes('nodes/status') || r.resources.includes('events')),
    'rbac.nodeEventsAndStatus=false drops the writes',
  );
  assert.ok(
    rules.some((r) => r.resources.includes('nodes') && r.verbs.includes('patch')),
    'taintWhenExhausted grants node patch',
  );
  assert.equal(env.get('ENI_IPAM_TAINT_WHEN_EXHAUSTED')!.value, 'true');
});

test('a misspelled field in a rendered object fails validation, naming its path', async () => {
  const ds = find(await renderChart(), 'DaemonSet');
  const pod = ds.spec.template.spec;
  pod.hostNetwrk = pod.hostNetwork;
  delete pod.hostNetwork;
  ipamd(ds).volumeMounts[0].mountPropagaton = 'HostToContainer';
  ipamd(ds).resources.limits.memory = 256; // a number: not a Quantity string
  const errors = await validateObject(ds);
  assert.ok(
    errors.some((e) => /spec\.template\.spec\.hostNetwrk: unknown field/.test(e)),
    errors.join('\n'),
  );
  assert.ok(
    errors.some((e) => /volumeMounts\[0\]\.mountPropagaton: unknown field/.test(e)),
    errors.join('\n'),
  );
  assert.ok(
    errors.some((e) => /limits\.memory: expected string/.test(e)),
    errors.join('\n'),
  );
  // and a missing required field (the OpenAPI schema pass)
  const sa = find(await renderChart(), 'ClusterRoleBinding');
  delete sa.roleRef;
  assert.ok((await validateObject(sa)).some((e) => /roleRef/.test(e)));
});

test('dashboard and alert rules: off by default; on, they carry the shipped files (one copy) and validate', async () => {
  const { readFile } = await import('node:fs/promises');
  const { parse } = await import('yaml');
  const root = new URL('../../../', import.meta.url);
  const dashboard = await readFile(new URL('config/grafana/eni-ipam-dashboard.json', root), 'utf8');
  const rules = parse(await readFile(new URL('config/prometheus/eni-ipam-rules.yaml', root), 'utf8')) as Obj;
  assert.ok(
    !(await renderChart()).some(
      (o: Obj) => o.kind === 'PrometheusRule' || (o.kind === 'ConfigMap' && /dashboard/.test(o.metadata.name)),
    ),
    'off by default',
  );

  const objs = await renderChart({
    grafanaDashboard: { create: true },
    prometheusRule: { create: true, labels: { release: 'kube-prometheus-stack' } },
  });
  await assertValid(objs);
  const cm = find(objs, 'ConfigMap');
  assert.equal(cm.metadata.labels.grafana_dashboard, '1', "the Grafana sidecar's default label");
  assert.equal(cm.metadata.namespace, 'kube-system');
  assert.equal(
    cm.data['eni-ipam.json'],
    dashboard.trimEnd(),
    'the ConfigMap holds config/grafana/eni-ipam-dashboard.json as shipped',
  );
  assert.equal(JSON.parse(cm.data['eni-ipam.json']).uid, 'eni-ipam');
  const rule = find(objs, 'PrometheusRule');
  assert.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
  assert.equal(rule.metadata.labels.release, 'kube-prometheus-stack');
  assert.deepEqual(
    rule.spec.groups,
    rules.groups,
    'the PrometheusRule holds config/prometheus/eni-ipam-rules.yaml as shipped',
  );
  assert.ok(rule.spec.groups[0].rules.some((r: Obj) => r.alert === 'EniIpamReleasesFrozen' && r.for === '10m'));

  // The sidecar's label and namespace are values (grafana chart: sidecar.dashboards.label / labelValue).
  const other = find(
    await renderChart({
      grafanaDashboard: {
        create: true,
        namespace: 'monitoring',
        labels: { grafana_dashboard: null, my_dashboards: 'yes' },
        annotations: { grafana_folder: 'Networking' },
      },
    }),
    'ConfigMap',
  );
  assert.equal(other.metadata.namespace, 'monitoring');
  assert.equal(other.metadata.labels.my_dashboards, 'yes');
  assert.equal(other.metadata.labels.grafana_dashboard, undefined, 'null removes the default label');
  assert.equal(other.metadata.annotations.grafana_folder, 'Networking');
});

test('the packaged chart carries the dashboard and rules (the files/ links resolved by helm package)', async () => {
  const { mkdtemp, readFile, readdir, rm } = await import('node:fs/promises');
  const dir = await mkdtemp('/tmp/eni-ipam-package-');
  try {
    const r = await helm(['package', CHART, '--destination', dir]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const tgz = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
    assert.ok(tgz, `no .tgz in ${dir}`);
    const t = await helm([
      'template',
      'eni',
      `${dir}/${tgz}`,
      '--namespace',
      'kube-system',
      '--set',
      'grafanaDashboard.create=true,prometheusRule.create=true',
    ]);
    assert.equal(t.code, 0, t.stderr);
    const { parseAllDocuments } = await import('yaml');
    const objs = parseAllDocuments(t.stdout)
      .map((d) => d.toJS() as Obj)
      .filter((o) => o !== null);
    const dashboard = await readFile(
      new URL('../../../config/grafana/eni-ipam-dashboard.json', import.meta.url),
      'utf8',
    );
    assert.equal(find(objs, 'ConfigMap').data['eni-ipam.json'], dashboard.trimEnd());
    assert.equal(find(objs, 'PrometheusRule').spec.groups[0].rules.length, 4);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the ENIConfig CRD: off by default; on, compatible with upstream and with the subnets extension', async () => {
  assert.ok(
    !(await renderChart()).some((o: Obj) => o.kind === 'CustomResourceDefinition'),
    'off by default (aws-node clusters have it)',
  );
  const objs = await renderChart({ eniConfig: { createCrd: true } });
  await assertValid(objs);
  const crd = find(objs, 'CustomResourceDefinition');
  assert.equal(crd.metadata.name, 'eniconfigs.crd.k8s.amazonaws.com');
  assert.equal(crd.metadata.annotations['helm.sh/resource-policy'], 'keep', 'uninstall keeps the ENIConfigs');
  assert.equal(crd.spec.group, 'crd.k8s.amazonaws.com');
  assert.equal(crd.spec.scope, 'Cluster');
  assert.deepEqual(
    [crd.spec.names.kind, crd.spec.names.plural, crd.spec.names.singular],
    ['ENIConfig', 'eniconfigs', 'eniconfig'],
  );
  assert.deepEqual(
    crd.spec.versions.map((v: Obj) => [v.name, v.served, v.storage]),
    [['v1alpha1', true, true]],
  );
  const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec;
  assert.deepEqual(spec.properties.subnet, { type: 'string', description: spec.properties.subnet.description });
  assert.deepEqual(spec.properties.securityGroups.items, { type: 'string' });
  assert.deepEqual(spec.properties.subnets.items, { type: 'string' });
  assert.deepEqual(spec.anyOf, [{ required: ['subnet'] }, { required: ['subnets'] }]);
  // the stand-in's schema check (sim/kube/eniconfig.ts) agrees with the CRD on these bodies
  const { validateEniConfig } = await import('../../sim/kube/index.js');
  const meta = { name: 'x', uid: '', resourceVersion: '', creationTimestamp: '' };
  const cases: Array<[Obj, boolean]> = [
    [{ subnet: 'subnet-1', securityGroups: ['sg-1'] }, true],
    [{ subnets: ['subnet-1', 'subnet-2'] }, true],
    [{ securityGroups: ['sg-1'] }, false],
    [{ subnet: ['subnet-1'] }, false],
  ];
  for (const [body, ok] of cases) {
    const specOk =
      spec.anyOf.some((alt: Obj) => alt.required.every((k: string) => k in body)) &&
      Object.entries(body).every(([k, v]) =>
        spec.properties[k].type === 'array'
          ? Array.isArray(v) && v.every((x) => typeof x === 'string')
          : typeof v === spec.properties[k].type,
      );
    assert.equal(specOk, ok, `CRD on ${JSON.stringify(body)}`);
    assert.equal(
      validateEniConfig({ metadata: meta, spec: body }) === undefined,
      ok,
      `stand-in on ${JSON.stringify(body)}`,
    );
  }
});
