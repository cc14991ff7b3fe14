/**
 * IPv6 and dual-stack on a real Kubernetes (issue #31): a cluster whose node reports its
 * primary ENI's IPv6 address and whose Services come from an IPv6 range (single-stack, as
 * EKS IPv6 clusters run) or from both ranges (dual-stack), eni-ipam installed by helm with
 * `ipFamily`, a Deployment whose pods the real kubelet starts: every pod Running with a /128
 * from the node's /80 (dual: and an IPv4 from the warm pool), no address twice, pod↔pod and
 * pod → ClusterIP Service (the real kube-proxy, ip6tables) over TCP, and no EC2 call per
 * pod churned.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import ipaddr from 'ipaddr.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import type { ClusterIpFamily } from '../../kit/cluster/ip-family.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import { installEniIpam } from '../../kit/cluster/install.js';
import { echoDeployment, eniOf, podNetns, tcpAsk, waitPodsReady, type KubePod } from '../../kit/cluster/workload.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;

/** The /80 the simulated EC2 holds on the node's primary ENI. */
function nodePrefix(c: TestCluster): string {
  const eni = [...c.sim.state.enis.values()].find(
    (e) => e.attachment?.instanceId === c.node.instanceId && e.attachment.deviceIndex === 0,
  )!;
  assert.equal(eni.ipv6Prefixes.length, 1, `one IPv6 prefix on the primary ENI: ${eni.ipv6Prefixes.join(', ')}`);
  return eni.ipv6Prefixes[0]!;
}

/** The ENI holding IPv4 `ip`: as a secondary IP or inside one of its /28 prefixes (dual turns prefix delegation on). */
function ipv4Holder(c: TestCluster, ip: string): string | undefined {
  const addr = ipaddr.parse(ip);
  for (const e of c.sim.state.enis.values())
    if (e.attachment?.instanceId === c.node.instanceId && e.ipv4Prefixes.some((p) => addr.match(ipaddr.parseCIDR(p))))
      return e.networkInterfaceId;
  return eniOf(c, ip);
}

/** One echo reply from `from` to `[host]:port`, retried while kube-proxy or the routes settle. */
function ask(from: string, host: string, port = ECHO_PORT): Promise<string> {
  return waitFor(`a reply from ${host}:${port}`, () => tcpAsk(from, host, port).catch(() => ''), 30_000, 500);
}

for (const family of ['ipv6', 'dual'] as const satisfies readonly ClusterIpFamily[]) {
  describe(`eni-ipam on a real ${family} Kubernetes cluster`, { skip, timeout: 20 * 60_000 }, () => {
    let c: TestCluster;
    before(async () => {
      c = await startCluster({ ipFamily: family });
    });
    after(async () => {
      await c?.close();
    });

    it('the node and the kubernetes Service are of the cluster family', async () => {
      const node = await c.kubectl.json<{ status: { addresses: Array<{ type: string; address: string }> } }>([
        'get',
        'node',
        c.nodeName,
      ]);
      const internal = node.status.addresses.filter((a) => a.type === 'InternalIP').map((a) => a.address);
      assert.deepEqual(internal, c.family.nodeIps);
      const svc = await c.kubectl.json<{ spec: { clusterIPs: string[] } }>([
        '-n',
        'default',
        'get',
        'svc',
        'kubernetes',
      ]);
      assert.deepEqual(svc.spec.clusterIPs, [c.family.serviceIps[0]]);
    });

    it(`helm install with ipFamily=${family}: pods get /128s from the node's /80 and reach a Service`, async () => {
      await installEniIpam(c, { wait: true, values: { ipFamily: family, env: { ENABLE_PREFIX_DELEGATION: 'true' } } });
      const prefix = ipaddr.parseCIDR(nodePrefix(c));
      assert.equal(prefix[1], 80);
      const ec2Before = c.sim.countCalls();
      await c.kubectl.apply([echoDeployment(c, 'v6', 10)]);
      const pods = await waitPodsReady(c, 'v6', 10, 300_000);
      const v6 = (p: KubePod): string => p.ips.find((a) => a.includes(':'))!;
      const v4 = (p: KubePod): string | undefined => p.ips.find((a) => !a.includes(':'));
      for (const p of pods) {
        assert.ok(v6(p) && ipaddr.parse(v6(p)).match(prefix), `${p.name}: ${p.ips.join(', ')} has one from the /80`);
        if (family === 'dual') {
          assert.equal(p.ips.length, 2, `${p.name}: both families`);
          assert.ok(ipv4Holder(c, v4(p)!), `${p.name}: ${v4(p)} is an ENI's secondary IP or in its /28`);
        } else assert.deepEqual(p.ips, [v6(p)], `${p.name}: IPv6 only`);
      }
      const all = pods.flatMap((p) => p.ips);
      assert.equal(new Set(all).size, all.length, 'no address twice');

      const ns = await podNetns(c);
      const [a, b] = [pods[0]!, pods[pods.length - 1]!];
      assert.match(await ask(ns.get(a.name)!, v6(b)), new RegExp(`^${b.name} ping$`), 'pod → pod over IPv6');
      if (family === 'dual') assert.match(await ask(ns.get(a.name)!, v4(b)!), new RegExp(`^${b.name} ping$`));

      await c.kubectl.apply([
        {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'v6', namespace: 'default' },
          spec: {
            selector: { app: 'v6' },
            ports: [{ port: 80, targetPort: ECHO_PORT }],
            ...(family === 'dual' ? { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] } : {}),
          },
        },
      ]);
      const svc = await c.kubectl.json<{ spec: { clusterIPs: string[] } }>(['-n', 'default', 'get', 'svc', 'v6']);
      assert.equal(svc.spec.clusterIPs.length, family === 'dual' ? 2 : 1);
      const names = new Set(pods.map((p) => p.name));
      for (const ip of svc.spec.clusterIPs) {
        const reply = await ask(ns.get(a.name)!, ip, 80);
        assert.ok(names.has(reply.split(' ')[0]!), `${ip}: answered by a backend (${reply})`);
      }

      // Churn: half the pods replaced; the /80 serves them with no EC2 call (dual: the warm pool may refill).
      await c.kubectl.run(['-n', 'default', 'delete', 'pod', '--wait=false', ...pods.slice(0, 5).map((p) => p.name)]);
      const again = await waitFor(
        'five replacement pods Running and Ready',
        async () => {
          const now = await waitPodsReady(c, 'v6', 10, 300_000);
          return now.filter((p) => !names.has(p.name)).length === 5 ? now : undefined;
        },
        300_000,
        1000,
      );
      for (const p of again) assert.ok(ipaddr.parse(v6(p)).match(prefix), `${p.name}: ${v6(p)} from the /80`);
      if (family === 'ipv6')
        assert.equal(c.sim.countCalls() - ec2Before, 0, 'no EC2 call while 15 pods came and 5 went');
    });
  });
}
