/**
 * Custom networking on a real Kubernetes: the chart's ENIConfig CRD, an ENIConfig applied
 * with kubectl naming a subnet of a secondary VPC block, the node labelled to select it,
 * eni-ipam installed by helm with `AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true`: new ENIs land
 * in that subnet and the pods the real kubelet starts get addresses there and reach each
 * other.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import ipaddr from 'ipaddr.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import { installEniIpam } from '../../kit/cluster/install.js';
import { echoDeployment, eniOf, podNetns, tcpAsk, waitPodsReady } from '../../kit/cluster/workload.js';
import { checkNothingLost } from '../../kit/cluster/nothing-lost.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;

describe('custom networking on a real Kubernetes cluster', { skip, timeout: 20 * 60_000 }, () => {
  let c: TestCluster;
  before(async () => {
    c = await startCluster();
  });
  after(async () => {
    await c?.close();
  });

  it('an ENIConfig applied with kubectl and a node label put new ENIs and pods in its subnet', async () => {
    c.sim.addVpcCidr('100.64.0.0/16');
    const primary = [...c.sim.state.enis.values()].find((e) => e.attachment?.instanceId === c.node.instanceId)!;
    const custom = c.sim.addSubnet({ cidr: '100.64.0.0/24', availabilityZone: primary.availabilityZone });
    await c.kubectl
      .apply([
        {
          apiVersion: 'crd.k8s.amazonaws.com/v1alpha1',
          kind: 'ENIConfig',
          metadata: { name: 'pods' },
          spec: { subnet: custom.subnetId },
        },
      ])
      .catch((e: Error) => assert.match(e.message, /no matches for kind "ENIConfig"/)); // before the CRD: refused
    await installEniIpam(c, {
      wait: true,
      values: { eniConfig: { createCrd: true }, env: { AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'true' } },
    });
    await c.kubectl.run([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/eniconfigs.crd.k8s.amazonaws.com',
    ]);
    await c.kubectl.apply([
      {
        apiVersion: 'crd.k8s.amazonaws.com/v1alpha1',
        kind: 'ENIConfig',
        metadata: { name: 'pods' },
        spec: { subnet: custom.subnetId },
      },
    ]);
    await c.kubectl.run(['label', 'node', c.nodeName, 'k8s.amazonaws.com/eniConfig=pods']);
    await c.kubectl.apply([echoDeployment(c, 'custom', 12)]);
    const pods = await waitPodsReady(c, 'custom', 12, 300_000);
    const net = ipaddr.parseCIDR(custom.cidr);
    for (const p of pods) {
      assert.ok(ipaddr.parse(p.ip!).match(net), `${p.name} has ${p.ip} from ${custom.cidr}`);
      const eni = c.sim.state.enis.get(eniOf(c, p.ip!)!)!;
      assert.equal(eni.subnetId, custom.subnetId, `${p.ip} is on an ENI in the ENIConfig's subnet`);
      assert.notEqual(eni.networkInterfaceId, primary.networkInterfaceId, 'never the primary ENI');
    }
    const ns = await podNetns(c);
    for (const [a, b] of [
      [pods[0]!, pods[pods.length - 1]!],
      [pods[1]!, pods[2]!],
    ] as const) {
      const reply = await waitFor(
        'a reply',
        () => tcpAsk(ns.get(a.name)!, b.ip!, ECHO_PORT).catch(() => ''),
        20_000,
        500,
      );
      assert.equal(reply, `${b.name} ping`);
    }
    await tcpAsk(ns.get(pods[0]!.name)!, c.nodeIp, 10250, true);
    await checkNothingLost(c, 'custom', new Map());
  });
});
