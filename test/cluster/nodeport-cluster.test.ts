/**
 * NodePort support (AWS_VPC_CNI_NODE_PORT_SUPPORT, ipamd/network/connmark.ts) on the real
 * cluster: eni-ipam installed by helm, the real kube-proxy programming a NodePort Service,
 * echo pods started by the real kubelet. A client on the VPC side (kit/cluster/vpc-side.ts:
 * strict rp_filter, as EC2's source/dest check drops a packet an ENI does not own the
 * source of) connects to the node's primary IP at the NodePort, so the connection arrives
 * on the primary ENI. For a pod whose address lives on a secondary ENI the reply must
 * leave through the primary ENI: with support on (the default) it does and the connection
 * completes; with it off (helm upgrade) the reply takes the pod's ENI table, the VPC side
 * drops it and the connection fails; on again, it completes again. A pod on the primary
 * ENI, behind its own NodePort, answers throughout (the bed itself works).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ipIn } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import { clusterValues, helmRelease, installEniIpam, waitEniIpamReady } from '../../kit/cluster/install.js';
import { echoDeployment, podsOf, tcpAsk, waitPodsReady, type KubePod } from '../../kit/cluster/workload.js';
import {
  ipamdMetrics,
  markRulePackets,
  metricValue,
  nodePortService,
  nodeTxPackets,
  strictVpcSide,
  type VpcSide,
} from '../../kit/cluster/vpc-side.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
const NEAR_PORT = 30081; // the pod on the primary ENI
const FAR_PORT = 30082; // the pod on a secondary ENI

describe('NodePort to pods on secondary ENIs on a real Kubernetes cluster', { skip, timeout: 30 * 60_000 }, () => {
  let c: TestCluster;
  let vpc: VpcSide | undefined;
  let near: KubePod;
  let far: KubePod;
  let farDev: string;

  /** The ENI link (`eth<device index>`) of the ENI holding `ip`. */
  const devOf = (ip: string): string => {
    for (const e of c.sim.state.enis.values())
      if (e.attachment?.instanceId === c.node.instanceId && (e.primaryIp === ip || e.secondaryIps.includes(ip)))
        return `eth${e.attachment.deviceIndex}`;
    throw new Error(`no attached ENI holds ${ip}`);
  };

  /** One connection from the VPC client to nodeIp:`port`: the reply ('' when it failed) and tx packets per link. */
  const viaNodePort = async (port: number) => {
    const devs = ['eth0', farDev];
    const before = await nodeTxPackets(c, devs);
    const reply = await tcpAsk(c.vpcNetns.path, c.nodeIp, port).catch(() => '');
    const after = await nodeTxPackets(c, devs);
    return { reply, tx: Object.fromEntries(devs.map((d) => [d, after[d]! - before[d]!])) };
  };

  /** Waits until ipamd's fwmark rule (prio 1023) and its mark rule on eth0 are both present (`on`) or both absent. */
  const waitFwmarkRule = (on: boolean) =>
    waitFor(
      `ipamd's connection-mark rules ${on ? 'installed' : 'removed'}`,
      async () => {
        const rules = await ipIn(c.nodeNetns.path, ['rule']);
        const fwmark = /1023:\s+from all fwmark 0x80\/0x80 lookup main/.test(rules);
        const mark = (await markRulePackets(c)) >= 0;
        return fwmark === on && mark === on;
      },
      120_000,
      1000,
    );

  before(async () => {
    c = await startCluster();
    await installEniIpam(c, { wait: true });
    await c.kubectl.apply([echoDeployment(c, 'np', 18)]);
    const pods = await waitPodsReady(c, 'np', 18);
    near = pods.find((p) => devOf(p.ip!) === 'eth0')!;
    far = pods.find((p) => devOf(p.ip!) !== 'eth0')!;
    assert.ok(near && far, `pods on the primary and on a secondary ENI: ${pods.map((p) => `${p.ip}@${devOf(p.ip!)}`)}`);
    farDev = devOf(far.ip!);
    for (const [p, svc] of [
      [near, 'np-near'],
      [far, 'np-far'],
    ] as const)
      await c.kubectl.run(['-n', 'default', 'label', 'pod', p.name, `nodeport=${svc}`]);
    await c.kubectl.apply([
      nodePortService('np-near', NEAR_PORT, ECHO_PORT),
      nodePortService('np-far', FAR_PORT, ECHO_PORT),
    ]);
    vpc = await strictVpcSide(c);
    // kube-proxy programs the Services in its own time: the pod on the primary ENI answers once it has.
    await waitFor('the NodePort to the primary-ENI pod', async () => (await viaNodePort(NEAR_PORT)).reply, 60_000, 500);
  });
  after(async () => {
    await vpc?.undo();
    await c?.close();
  });

  it('support on (default): the secondary-ENI pod answers through the primary ENI; the mark rule and metrics count it', async (t) => {
    await waitFwmarkRule(true);
    const marked = await markRulePackets(c);
    // kube-proxy programmed both Services together; allow it the same grace, then measure one connection.
    await waitFor(
      'the NodePort to the secondary-ENI pod',
      async () => (await viaNodePort(FAR_PORT)).reply,
      60_000,
      500,
    );
    const r = await viaNodePort(FAR_PORT);
    assert.equal(r.reply, `${far.name} ping`, `${far.name} (${far.ip} on ${farDev}) answered the VPC client`);
    assert.ok(r.tx['eth0']! > 0, `the reply left through the primary ENI: ${JSON.stringify(r.tx)}`);
    // The VPC side drops a reply from the node's IP on any other link (strict rp_filter), so
    // the answer above proves the route; a stray packet on the far link (an ND, an ARP) is not a reply.
    assert.ok((await markRulePackets(c)) > marked, 'the mark rule on eth0 counted the connection');
    const m = await ipamdMetrics(c);
    assert.equal(metricValue(m, 'awscni_connmark_backend{backend="iptables"}'), 1, m);
    assert.ok((metricValue(m, 'awscni_connmark_reconcile_total{result="success"}') ?? 0) >= 1, m);
    assert.equal(metricValue(m, 'awscni_connmark_reconcile_total{result="error"}') ?? 0, 0, m);
    t.diagnostic(`${far.name} ${far.ip} on ${farDev}: tx ${JSON.stringify(r.tx)}; VPC client ${vpc!.client}`);
  });

  it('support off (helm upgrade): the same connection fails, its replies left through the secondary ENI', async (t) => {
    const up = await helmRelease(
      c,
      'upgrade',
      await clusterValues(c, { env: { AWS_VPC_CNI_NODE_PORT_SUPPORT: 'false' } }),
    );
    assert.equal(up.code, 0, up.stderr);
    await waitEniIpamReady(c);
    await waitFwmarkRule(false);
    assert.equal((await viaNodePort(NEAR_PORT)).reply, `${near.name} ping`, 'the primary-ENI pod still answers');
    const r = await viaNodePort(FAR_PORT);
    assert.equal(r.reply, '', `without the connection mark the VPC must drop the reply: ${JSON.stringify(r)}`);
    assert.ok(r.tx[farDev]! > 0, `the replies left through ${farDev}: ${JSON.stringify(r.tx)}`);
    const m = await ipamdMetrics(c);
    assert.ok((metricValue(m, 'awscni_connmark_reconcile_total{result="success"}') ?? 0) >= 1, 'the removal counted');
    assert.equal(metricValue(m, 'awscni_connmark_reconcile_total{result="error"}') ?? 0, 0, m);
    t.diagnostic(`off: tx ${JSON.stringify(r.tx)}`);
  });

  it('support on again (helm upgrade): the rules come back and the connection completes', async (t) => {
    const up = await helmRelease(
      c,
      'upgrade',
      await clusterValues(c, { env: { AWS_VPC_CNI_NODE_PORT_SUPPORT: 'true' } }),
    );
    assert.equal(up.code, 0, up.stderr);
    await waitEniIpamReady(c);
    await waitFwmarkRule(true);
    const r = await waitFor(
      'the secondary-ENI pod answering again',
      async () => {
        const x = await viaNodePort(FAR_PORT);
        return x.reply ? x : undefined;
      },
      60_000,
      500,
    );
    assert.equal(r.reply, `${far.name} ping`); // through eth0: the VPC side drops it on any other link
    t.diagnostic(`on again: tx ${JSON.stringify(r.tx)}`);
    assert.equal((await podsOf(c, 'np')).find((p) => p.name === far.name)?.ip, far.ip, 'the pod kept its address');
  });
});
