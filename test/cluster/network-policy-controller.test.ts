/**
 * amazon-network-policy-controller-k8s (built from its Go module: cluster/go/
 * network-policy-controller, v1.1.10) on a real cluster with eni-ipam installed, as EKS runs
 * it in its control plane: it installs its own CRDs (PolicyEndpoints, ClusterPolicyEndpoints,
 * …, embedded in the binary: pkg/crd), resolves each NetworkPolicy's selectors against the
 * pods the API server reports and writes the PolicyEndpoints the node agent
 * (aws-network-policy-agent) enforces; a NetworkPolicy removed takes its PolicyEndpoint along.
 * The pods' addresses are the ones eni-ipam gave them, so the test also shows eni-ipam's pods
 * resolve like aws-node's (docs/network-policy.md).
 *
 * How it runs beside the cluster (as EKS runs it, outside the nodes): kit/cluster/network-policy-controller.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../../kit/wait.js';
import { networkPolicyControllerBinary } from '../../kit/cluster/binaries.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { installEniIpam } from '../../kit/cluster/install.js';
import {
  ingressOnlyFrom,
  startNetworkPolicyController,
  type RunningController,
} from '../../kit/cluster/network-policy-controller.js';
import { echoDeployment, waitPodsReady } from '../../kit/cluster/workload.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
const POLICY = 'np-server-ingress';

/** A PolicyEndpoint as the controller writes it (api/v1alpha1/policyendpoint_types.go). */
interface PolicyEndpoint {
  metadata: { name: string; ownerReferences?: Array<{ kind: string; name: string }> };
  spec: {
    policyRef: { name: string; namespace: string };
    podIsolation?: string[];
    podSelectorEndpoints?: Array<{ podIP: string; hostIP: string; name: string; namespace: string }>;
    ingress?: Array<{ cidr: string; ports?: Array<{ protocol?: string; port?: number }> }>;
  };
}

describe('the network policy controller on a real Kubernetes cluster', { skip, timeout: 30 * 60_000 }, () => {
  let c: TestCluster;
  let controller: RunningController | undefined;

  before(async () => {
    // Built first: a cold build takes minutes and must not eat the cluster steps' deadlines.
    const bin = await networkPolicyControllerBinary();
    c = await startCluster();
    await installEniIpam(c, { wait: true });
    await c.kubectl.apply([echoDeployment(c, 'np-server', 1), echoDeployment(c, 'np-client', 1)]);
    controller = await startNetworkPolicyController(c, bin);
  });
  after(async () => {
    controller?.stop();
    await c?.close();
  });

  const withLog = (e: Error): never => {
    throw new Error(`${e.message}\ncontroller log:\n${(controller?.log() ?? '').split('\n').slice(-40).join('\n')}`);
  };
  const policyEndpoints = async (): Promise<PolicyEndpoint[]> =>
    (await c.kubectl.json<{ items: PolicyEndpoint[] }>(['-n', 'default', 'get', 'policyendpoints'])).items;

  it('installs its CRDs', async () => {
    await waitFor(
      'the PolicyEndpoint CRD Established',
      async () => {
        const r = await c.kubectl.try(['get', 'crd', 'policyendpoints.networking.k8s.aws', '-o', 'json']);
        if (r.code !== 0) return undefined;
        const crd = JSON.parse(r.stdout) as { status?: { conditions?: Array<{ type: string; status: string }> } };
        return crd.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True') || undefined;
      },
      120_000,
      1000,
    ).catch(withLog);
  });

  it('turns a NetworkPolicy into a PolicyEndpoint with eni-ipam’s pod addresses', async () => {
    const [server] = await waitPodsReady(c, 'np-server', 1);
    const [client] = await waitPodsReady(c, 'np-client', 1);
    assert.deepEqual(await policyEndpoints(), [], 'no PolicyEndpoint before the NetworkPolicy');
    await c.kubectl.apply([ingressOnlyFrom(POLICY, 'np-server', 'np-client', 8080)]);
    const pe = await waitFor(
      'the PolicyEndpoint of the NetworkPolicy, with its pods resolved',
      async () => {
        const mine = (await policyEndpoints()).filter((p) => p.spec.policyRef.name === POLICY);
        return mine.length === 1 && mine[0]!.spec.podSelectorEndpoints?.length && mine[0]!.spec.ingress?.length
          ? mine[0]
          : undefined;
      },
      120_000,
      1000,
    ).catch(withLog);
    assert.deepEqual(
      pe.spec.podSelectorEndpoints?.map((e) => [e.name, e.namespace, e.podIP, e.hostIP]),
      [[server!.name, 'default', server!.ip, c.nodeIp]],
    );
    assert.deepEqual(pe.spec.podIsolation, ['Ingress']);
    assert.deepEqual(
      pe.spec.ingress?.map((r) => [r.cidr, r.ports?.map((p) => [p.protocol, p.port])]),
      [[client!.ip, [['TCP', 8080]]]],
    );
    assert.ok(pe.metadata.ownerReferences?.some((o) => o.kind === 'NetworkPolicy' && o.name === POLICY));
  });

  it('removes the PolicyEndpoint with its NetworkPolicy', async () => {
    await c.kubectl.run(['-n', 'default', 'delete', 'networkpolicy', POLICY, '--wait=true']);
    await waitFor(
      'no PolicyEndpoint left for the deleted NetworkPolicy',
      async () => ((await policyEndpoints()).some((p) => p.spec.policyRef.name === POLICY) ? undefined : true),
      120_000,
      1000,
    ).catch(withLog);
  });
});
