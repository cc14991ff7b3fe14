/**
 * CoreDNS as the test cluster's DNS, installed as kubeadm v1.36 installs it
 * (k8s.io/kubernetes cmd/kubeadm/app/phases/addons/dns/manifests.go): the ServiceAccount
 * `coredns`, the ClusterRole and binding `system:coredns`, the ConfigMap `coredns` with the
 * Corefile, the Deployment `coredns` and the Service `kube-dns` at the cluster DNS IP (the
 * tenth address of the primary Service range: 10.96.0.10, or fd00:10:96::a in an IPv6
 * cluster), which the kubelet's `clusterDNS` names (configs.ts).
 *
 * One difference from kubeadm's Corefile: no `forward . /etc/resolv.conf` (and so no `loop`).
 * The cluster answers for its own names only; a name outside them fails at once instead of
 * being sent to the machine's resolver, so no test traffic leaves the cluster's namespaces.
 */
import { waitFor } from '../wait.js';
import type { Kubectl } from './kubectl.js';
import type { FamilyPlan } from './ip-family.js';

/** The cluster domain (kubelet `clusterDomain`, the `kubernetes` plugin's zone). */
export const CLUSTER_DOMAIN = 'cluster.local';
/** The image name kubeadm v1.36 uses; kit/cluster/e2e-images.ts builds it from the Go module. */
export const COREDNS_IMAGE = 'registry.k8s.io/coredns/coredns:v1.14.2';

const NS = 'kube-system';
const LABELS = { 'k8s-app': 'kube-dns' };

/** kubeadm's Corefile without the upstream resolver (see the file's header). */
export function corefile(domain = CLUSTER_DOMAIN): string {
  return `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes ${domain} in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    cache 30 {
       disable success ${domain}
       disable denial ${domain}
    }
    reload
    loadbalance
}
`;
}

/** kubeadm's CoreDNS container: probes, ports, a read-only root, only NET_BIND_SERVICE. */
function container(image: string): object {
  const port = (name: string, containerPort: number, protocol = 'TCP'): object => ({ name, containerPort, protocol });
  return {
    name: 'coredns',
    image,
    imagePullPolicy: 'IfNotPresent',
    resources: { limits: { memory: '170Mi' }, requests: { cpu: '100m', memory: '70Mi' } },
    args: ['-conf', '/etc/coredns/Corefile'],
    volumeMounts: [{ name: 'config-volume', mountPath: '/etc/coredns', readOnly: true }],
    ports: [
      port('dns', 53, 'UDP'),
      port('dns-tcp', 53),
      port('metrics', 9153),
      port('liveness-probe', 8080),
      port('readiness-probe', 8181),
    ],
    livenessProbe: {
      httpGet: { path: '/health', port: 'liveness-probe', scheme: 'HTTP' },
      initialDelaySeconds: 60,
      timeoutSeconds: 5,
      successThreshold: 1,
      failureThreshold: 5,
    },
    readinessProbe: { httpGet: { path: '/ready', port: 'readiness-probe', scheme: 'HTTP' } },
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL'] },
      readOnlyRootFilesystem: true,
    },
  };
}

/** kubeadm's CoreDNS Deployment: `replicas` spread by a preferred anti-affinity. */
function deployment(image: string, replicas: number): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'coredns', namespace: NS, labels: LABELS },
    spec: {
      replicas,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      selector: { matchLabels: LABELS },
      template: {
        metadata: { labels: LABELS },
        spec: {
          priorityClassName: 'system-cluster-critical',
          serviceAccountName: 'coredns',
          affinity: {
            podAntiAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                {
                  weight: 100,
                  podAffinityTerm: {
                    labelSelector: { matchExpressions: [{ key: 'k8s-app', operator: 'In', values: ['kube-dns'] }] },
                    topologyKey: 'kubernetes.io/hostname',
                  },
                },
              ],
            },
          },
          tolerations: [
            { key: 'CriticalAddonsOnly', operator: 'Exists' },
            { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
          ],
          nodeSelector: { 'kubernetes.io/os': 'linux' },
          containers: [container(image)],
          dnsPolicy: 'Default',
          volumes: [
            { name: 'config-volume', configMap: { name: 'coredns', items: [{ key: 'Corefile', path: 'Corefile' }] } },
          ],
        },
      },
    },
  };
}

/**
 * The objects kubeadm creates for CoreDNS, for `family`'s DNS IP.
 * @param o.replicas Deployment replicas (kubeadm: 2).
 */
export function coreDnsObjects(o: { family: FamilyPlan; image?: string; replicas?: number }): object[] {
  const meta = (name: string, labels?: Record<string, string>): object => ({
    name,
    namespace: NS,
    ...(labels ? { labels } : {}),
  });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta('coredns') },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'system:coredns' },
      rules: [
        { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'system:coredns' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:coredns' },
      subjects: [{ kind: 'ServiceAccount', name: 'coredns', namespace: NS }],
    },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: meta('coredns'), data: { Corefile: corefile() } },
    deployment(o.image ?? COREDNS_IMAGE, o.replicas ?? 2),
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        ...meta('kube-dns', { ...LABELS, 'kubernetes.io/cluster-service': 'true', 'kubernetes.io/name': 'CoreDNS' }),
        annotations: { 'prometheus.io/port': '9153', 'prometheus.io/scrape': 'true' },
      },
      spec: {
        clusterIP: o.family.dnsIp,
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
          { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
          { name: 'metrics', port: 9153, protocol: 'TCP', targetPort: 9153 },
        ],
        selector: LABELS,
      },
    },
  ];
}

/**
 * Applies {@link coreDnsObjects} and waits (≤ `timeoutMs`, default 3 min) until every
 * replica is available (the readiness probe: CoreDNS has synced with the API) and
 * `kube-dns` has that many ready endpoints. The image must already be on the nodes.
 * @throws Error naming what did not become ready, with the pods' state.
 */
export async function installCoreDns(
  c: { kubectl: Kubectl; family: FamilyPlan },
  o: { image?: string; replicas?: number; timeoutMs?: number } = {},
): Promise<void> {
  const replicas = o.replicas ?? 2;
  await c.kubectl.apply(coreDnsObjects({ family: c.family, replicas, ...(o.image ? { image: o.image } : {}) }));
  await waitFor(
    `CoreDNS: ${replicas} replicas available behind kube-dns`,
    async () => {
      const d = await c.kubectl.json<{ status?: { availableReplicas?: number } }>([
        '-n',
        NS,
        'get',
        'deployment',
        'coredns',
      ]);
      if ((d.status?.availableReplicas ?? 0) < replicas) return false;
      const s = await c.kubectl.json<{ items: Array<{ endpoints?: Array<{ conditions?: { ready?: boolean } }> }> }>([
        '-n',
        NS,
        'get',
        'endpointslices',
        '-l',
        'kubernetes.io/service-name=kube-dns',
      ]);
      const ready = s.items.flatMap((x) => x.endpoints ?? []).filter((e) => e.conditions?.ready).length;
      return ready >= replicas;
    },
    o.timeoutMs ?? 180_000,
    1000,
  ).catch(async (e: Error) => {
    const pods = await c.kubectl.try(['-n', NS, 'get', 'pods', '-l', 'k8s-app=kube-dns', '-o', 'wide']);
    const desc = await c.kubectl.try(['-n', NS, 'describe', 'pods', '-l', 'k8s-app=kube-dns']);
    throw new Error(`${e.message}\n${pods.stdout}\n${desc.stdout.split('\n').slice(-25).join('\n')}`);
  });
}
