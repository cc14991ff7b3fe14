/**
 * amazon-vpc-cni-k8s's cni-metrics-helper (built from its Go module: cluster/go/
 * cni-metrics-helper) aggregating eni-ipam's metrics on a real cluster, as
 * docs/metrics.md#cni-metrics-helper tells an operator to run it. The helper lists pods in
 * kube-system by the hard-coded label `k8s-app=aws-node` (no flag or variable changes it:
 * cmd/cni-metrics-helper/metrics/pod_watcher.go) and reads each one's :61678/metrics through
 * the API server's pod proxy. Without the label it finds no eni-ipam pod; with the chart's
 * `podLabels` giving it, its aggregated gauges equal ipamd's own. Beside them an `aws-node`
 * DaemonSet (upstream's selector `k8s-app=aws-node`, kept off the eni-ipam node group by
 * the install guide's node affinity) never adopts or deletes the labelled eni-ipam pod, and
 * the install guide's aws-node check, which excludes eni-ipam's pods by name label, lists
 * none of them.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { cniMetricsHelperBinary } from '../../kit/cluster/binaries.js';
import { API_PORT, startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { clusterValues, helmRelease, installEniIpam, NAMESPACE, waitEniIpamReady } from '../../kit/cluster/install.js';
import { ipamdMetrics, metricValue } from '../../kit/cluster/vpc-side.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
/** The install guide's aws-node check (docs/install-eks.md): aws-node's label, eni-ipam's pods excluded. */
const AWS_NODE_PODS = 'k8s-app=aws-node,app.kubernetes.io/name!=eni-ipam';
/** The gauges the helper re-exports in Prometheus mode (utils/prometheusmetrics GetSupportedPrometheusCNIMetricsMapping). */
const GAUGES = ['awscni_total_ip_addresses', 'awscni_assigned_ip_addresses', 'awscni_eni_allocated', 'awscni_ip_max'];

interface PodMeta {
  metadata: {
    name: string;
    uid: string;
    labels?: Record<string, string>;
    ownerReferences?: Array<{ kind: string; name: string; uid: string }>;
  };
}

describe('cni-metrics-helper with eni-ipam on a real Kubernetes cluster', { skip, timeout: 30 * 60_000 }, () => {
  let c: TestCluster;
  let helper: ChildProcess | undefined;
  let helperLog = '';

  before(async () => {
    // Built first: a cold build takes minutes and must not eat the cluster steps' deadlines.
    const bin = await cniMetricsHelperBinary();
    c = await startCluster();
    await c.kubectl.run(['label', 'node', c.nodeName, 'eni-ipam.io/ipam=true']);
    await installEniIpam(c, { wait: true });
    // The helper in the node's network namespace, reaching the API server as a pod would.
    const kubeconfig = path.join(c.dir, 'metrics-helper.kubeconfig');
    const admin = await readFile(c.kubeconfig, 'utf8');
    const inNode = admin.replace(/server: "https:\/\/127\.0\.0\.1:\d+"/, `server: "https://${c.nodeIp}:${API_PORT}"`);
    assert.notEqual(inNode, admin, `no loopback server in ${c.kubeconfig}`);
    await writeFile(kubeconfig, inNode);
    helper = spawn('nsenter', [`--net=${c.nodeNetns.path}`, bin], {
      env: {
        ...process.env,
        KUBECONFIG: kubeconfig,
        // Its logger writes /host/var/log/aws-routed-eni/ipamd.log unless told: a machine path.
        AWS_VPC_K8S_CNI_LOG_FILE: 'stdout',
        USE_CLOUDWATCH: 'false',
        USE_PROMETHEUS: 'true',
        METRIC_UPDATE_INTERVAL: '2',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const s of [helper.stdout!, helper.stderr!])
      s.on('data', (b: Buffer) => (helperLog = (helperLog + b.toString()).slice(-200_000)));
  });
  after(async () => {
    helper?.kill('SIGKILL');
    await c?.close();
  });

  /** The helper's own Prometheus text (:61681 inside the node). */
  const helperMetrics = () =>
    run('nsenter', [`--net=${c.nodeNetns.path}`, 'curl', '-sf', '--max-time', '5', 'http://127.0.0.1:61681/metrics']);
  const podCounts = () => [...helperLog.matchAll(/Total aws-node pod count: (\d+)/g)].map((m) => Number(m[1]));
  const ipamdPod = async () =>
    (
      await c.kubectl.json<{ items: PodMeta[] }>([
        '-n',
        NAMESPACE,
        'get',
        'pods',
        '-l',
        'app.kubernetes.io/name=eni-ipam',
      ])
    ).items;

  it('without the label the helper finds no eni-ipam pod', async () => {
    await waitFor('the helper polled', () => (podCounts().length >= 2 ? true : undefined), 120_000, 500).catch(
      (e: Error) => {
        throw new Error(`${e.message}\n${helperLog.slice(0, 4000)}`);
      },
    );
    assert.deepEqual([...new Set(podCounts())], [0], helperLog.slice(-2000));
  });

  it('with podLabels k8s-app=aws-node its aggregated gauges equal ipamd’s own', async () => {
    const r = await helmRelease(c, 'upgrade', { ...(await clusterValues(c)), podLabels: { 'k8s-app': 'aws-node' } });
    assert.equal(r.code, 0, r.stderr);
    await waitEniIpamReady(c);
    const [pod] = await ipamdPod();
    assert.equal(pod?.metadata.labels?.['k8s-app'], 'aws-node');
    await waitFor(
      'the helper’s gauges equal ipamd’s',
      async () => {
        const [mine, its] = await Promise.all([ipamdMetrics(c), helperMetrics().catch(() => '')]);
        const pairs = GAUGES.map((g) => [metricValue(mine, g), metricValue(its, g)]);
        // Every gauge equal; the pool's total non-zero (no pods run here, so assigned is 0 on both).
        return pairs.every(([a, b]) => a !== undefined && a === b) && pairs[0]![0]! > 0 ? pairs : undefined;
      },
      120_000,
      1000,
    ).catch((e: Error) => {
      const lines = helperLog.split('\n').filter((l) => !l.includes('cni-metrics text output'));
      throw new Error(`${e.message}\n${lines.slice(-40).join('\n')}`);
    });
    assert.ok(podCounts().includes(1), 'the helper counted the one eni-ipam pod');
    // eni-ipam's text parses with the helper's Prometheus parser (a grab failing while the new pod starts is fine).
    assert.doesNotMatch(helperLog, /text format parsing error|Skipping 1st poll after reset, error: [^<]/i);
  });

  it('an aws-node DaemonSet beside it never adopts the labelled pod; the guide’s check lists none', async () => {
    const [before] = await ipamdPod();
    const owner = before!.metadata.ownerReferences?.find((o) => o.kind === 'DaemonSet');
    assert.equal(owner?.name, 'eni-ipam');
    await c.kubectl.apply([
      {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'aws-node', namespace: NAMESPACE, labels: { 'k8s-app': 'aws-node' } },
        spec: {
          selector: { matchLabels: { 'k8s-app': 'aws-node' } },
          template: {
            metadata: { labels: { 'k8s-app': 'aws-node', 'app.kubernetes.io/name': 'aws-node' } },
            spec: {
              // The install guide keeps aws-node off the eni-ipam node group.
              affinity: {
                nodeAffinity: {
                  requiredDuringSchedulingIgnoredDuringExecution: {
                    nodeSelectorTerms: [
                      { matchExpressions: [{ key: 'eni-ipam.io/ipam', operator: 'NotIn', values: ['true'] }] },
                    ],
                  },
                },
              },
              containers: [{ name: 'aws-node', image: 'registry.k8s.io/pause:3.10' }],
            },
          },
        },
      },
    ]);
    const ds = await waitFor(
      'the aws-node DaemonSet synced by its controller',
      async () => {
        const d = await c.kubectl.json<{ metadata: { generation: number }; status: Record<string, number> }>([
          '-n',
          NAMESPACE,
          'get',
          'daemonset',
          'aws-node',
        ]);
        return d.status.observedGeneration === d.metadata.generation ? d.status : undefined;
      },
      60_000,
      500,
    );
    assert.equal(ds.currentNumberScheduled, 0);
    assert.equal(ds.numberMisscheduled, 0, 'the eni-ipam pod is not counted as a misscheduled aws-node pod');
    assert.equal(ds.desiredNumberScheduled, 0);
    // The controller resyncs on pod events: touch the pod, then check it is still eni-ipam's, alive and unchanged.
    await c.kubectl.run(['-n', NAMESPACE, 'annotate', 'pod', before!.metadata.name, 'eni-ipam.io/poke=1']);
    const [now] = await ipamdPod();
    assert.equal(now?.metadata.uid, before!.metadata.uid, 'not deleted');
    assert.deepEqual(now?.metadata.ownerReferences, before!.metadata.ownerReferences, 'not adopted');
    const all = await c.kubectl.json<{ items: PodMeta[] }>(['-n', NAMESPACE, 'get', 'pods', '-l', 'k8s-app=aws-node']);
    assert.deepEqual(
      all.items.map((p) => p.metadata.name),
      [before!.metadata.name],
      'k8s-app=aws-node alone lists the eni-ipam pod: the collision the guide avoids',
    );
    const guide = await c.kubectl.json<{ items: PodMeta[] }>(['-n', NAMESPACE, 'get', 'pods', '-l', AWS_NODE_PODS]);
    assert.deepEqual(guide.items, [], 'the guide’s aws-node check lists no eni-ipam pod');
  });
});
