/**
 * The cluster DNS of the real test cluster (kit/cluster/coredns.ts, kit/cluster/ip-family.ts,
 * the kubelet's clusterDNS in kit/cluster/configs.ts): kubeadm's objects, valid against the
 * Kubernetes OpenAPI, the `kube-dns` Service at the tenth address of the primary Service
 * range in every IP family, and a Corefile that never sends a query out of the cluster.
 * CoreDNS answering in a real cluster is proven by `npm run conformance` (the DNS specs).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load } from 'js-yaml';
import { coreDnsObjects, corefile, COREDNS_IMAGE } from '../../kit/cluster/coredns.js';
import { kubeletConfig } from '../../kit/cluster/configs.js';
import { familyPlan } from '../../kit/cluster/ip-family.js';
import { validateObject } from '../helpers/k8s-validate.js';

type Obj = { kind: string; metadata: { name: string }; spec?: Record<string, unknown> };

const plans = {
  ipv4: familyPlan('ipv4', '10.0.1.5'),
  ipv6: familyPlan('ipv6', '10.0.1.5', '2600:1f14::5'),
  dual: familyPlan('dual', '10.0.1.5', '2600:1f14::5'),
};

test('the DNS IP is the tenth address of the primary Service range, as kubeadm picks it', () => {
  assert.equal(plans.ipv4.dnsIp, '10.96.0.10');
  assert.equal(plans.ipv6.dnsIp, 'fd00:10:96::a');
  assert.equal(plans.dual.dnsIp, '10.96.0.10');
});

test("kubeadm's six objects, each valid against the Kubernetes OpenAPI, kube-dns at the DNS IP", async () => {
  for (const [family, plan] of Object.entries(plans)) {
    const objs = coreDnsObjects({ family: plan }) as Obj[];
    assert.deepEqual(
      objs.map((o) => `${o.kind}/${o.metadata.name}`),
      [
        'ServiceAccount/coredns',
        'ClusterRole/system:coredns',
        'ClusterRoleBinding/system:coredns',
        'ConfigMap/coredns',
        'Deployment/coredns',
        'Service/kube-dns',
      ],
    );
    for (const o of objs) assert.deepEqual(await validateObject(o as unknown as Record<string, unknown>), [], family);
    const svc = objs.find((o) => o.kind === 'Service')!;
    assert.equal(svc.spec!['clusterIP'], plan.dnsIp, family);
    const dep = objs.find((o) => o.kind === 'Deployment')! as unknown as {
      spec: { replicas: number; template: { spec: { containers: Array<{ image: string }>; dnsPolicy: string } } };
    };
    assert.equal(dep.spec.replicas, 2);
    assert.equal(dep.spec.template.spec.containers[0]!.image, COREDNS_IMAGE);
    assert.equal(dep.spec.template.spec.dnsPolicy, 'Default');
  }
});

test('the Corefile serves the cluster zone and the reverse zones, and forwards nothing', () => {
  const c = corefile();
  assert.match(c, /kubernetes cluster\.local in-addr\.arpa ip6\.arpa \{/);
  assert.match(c, /\bready\b/);
  assert.doesNotMatch(c, /\bforward\b/, 'no query may leave the cluster');
  assert.doesNotMatch(c, /\bloop\b/);
});

test("the kubelet's clusterDNS and clusterDomain", () => {
  const y = load(kubeletConfig({ address: '::', cgroupRoot: '/x', maxPods: 110, clusterDns: [plans.ipv6.dnsIp] })) as {
    clusterDNS: string[];
    clusterDomain: string;
  };
  assert.deepEqual(y.clusterDNS, ['fd00:10:96::a']);
  assert.equal(y.clusterDomain, 'cluster.local');
});
