/**
 * eni-ipam on a real three-node Kubernetes whose simulated VPC routes as EC2 says
 * (kit/vpc/dataplane.ts): pods on different nodes are VPC addresses that reach each other
 * through the VPC. One cluster serves every step, in order; each ends with the nothing-lost
 * check on every node and no address held twice anywhere in the VPC:
 *
 * 1. 60 pods over 3 nodes: a sampled pod↔pod matrix across nodes, a ClusterIP and a NodePort
 *    Service whose endpoints sit on all three;
 * 2. `helm upgrade` restarting all three ipamds at once: every pod keeps its IP;
 * 3. node 2 drained: its pods come up elsewhere, its addresses cool down and return to its
 *    pool with no EC2 call;
 * 4. a fourth node joins during a scale-up 60→150, more pods than the first three can hold
 *    (EKS's maxPods: 56 + 27 + 56 besides each node's ipamd), so the rest wait for it;
 * 5. node 3's instance terminated: EC2 deletes the ENIs ipamd attached with
 *    DeleteOnTermination, and one it leaves available (detached as the node went) is swept by
 *    the remaining ipamds within the sweep's period; nothing on the other nodes is touched;
 * 6. an address node 1 unassigned (shrink) and node 2 later assigned reaches the pod on node 2
 *    only, and blackholes in between.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import {
  clusterValues,
  helmRelease,
  installEniIpam,
  ipamdPodUids,
  waitEniIpamReady,
} from '../../kit/cluster/install.js';
import { checkNothingLostEverywhere } from '../../kit/cluster/nothing-lost-nodes.js';
import { nodePortService, strictVpcSide, type VpcSide } from '../../kit/cluster/vpc-side.js';
import { podsOf, tcpAsk, waitPodsReady } from '../../kit/cluster/workload.js';
import { DetachNetworkInterfaceCommand } from '@aws-sdk/client-ec2';
import { askFromPod, byNode, releaseCallsOf, spreadDeployment, statusOn } from '../helpers/multi-node.js';
import { ec2ClientFor } from '../helpers/sim-fixture.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
const NODE_PORT = 30091;
/** Pods after the scale-up of step 4: more than nodes 1–3 hold (maxPods 57 + 28 + 57, each with its ipamd). */
const SCALED = 150;
/** ipamd's settings here: a short cooldown and a fast leaked-ENI sweep (CLUSTER_NAME: it sweeps the cluster's ENIs). */
const ENV = {
  CLUSTER_NAME: 'multi',
  IP_COOLDOWN_PERIOD: '10s',
  ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL: '10s',
  ENI_IPAM_LEAKED_ENI_SWEEP_JITTER: '0s',
  ENI_IPAM_SHRINK_DELAY: '1h',
};

describe('eni-ipam on a three-node cluster in one simulated VPC', { skip, timeout: 45 * 60_000 }, () => {
  let c: TestCluster;
  let vpc: VpcSide | undefined;
  const sample = <T>(xs: T[], k: number): T[] =>
    xs.filter((_, i) => i % Math.max(1, Math.floor(xs.length / k)) === 0).slice(0, k);

  before(async () => {
    c = await startCluster({ nodes: 3, instanceTypes: ['m5.xlarge', 'm5.large', 'm5.xlarge'] });
    await installEniIpam(c, { wait: true, values: { env: ENV } });
  });
  after(async () => {
    await vpc?.undo();
    await c?.close();
  });

  it('60 pods over 3 nodes reach each other across nodes, and Services whose endpoints sit on all three', async (t) => {
    await c.kubectl.apply([spreadDeployment(c, 'spread', 60)]);
    const pods = await waitPodsReady(c, 'spread', 60);
    const groups = byNode(pods);
    assert.equal(groups.size, 3, `pods on every node: ${[...groups].map(([n, p]) => `${n}:${p.length}`).join(' ')}`);
    let pairs = 0;
    for (const [fromNode, fromPods] of groups)
      for (const [toNode, toPods] of groups) {
        if (fromNode === toNode) continue;
        for (const [a, b] of sample(fromPods, 3).map((p, i) => [p, sample(toPods, 3)[i]!] as const)) {
          assert.equal(
            await askFromPod(c, a, b.ip!),
            `${b.name} ping`,
            `${a.name}@${fromNode} → ${b.name}@${toNode} (${b.ip})`,
          );
          pairs++;
        }
      }
    await c.kubectl.apply([
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'spread', namespace: 'default' },
        spec: { selector: { app: 'spread' }, ports: [{ port: 80, targetPort: ECHO_PORT }] },
      },
      {
        ...(nodePortService('spread-np', NODE_PORT, ECHO_PORT) as Record<string, unknown>),
        spec: {
          type: 'NodePort',
          selector: { app: 'spread' },
          ports: [{ port: 80, targetPort: ECHO_PORT, nodePort: NODE_PORT }],
        },
      },
    ]);
    const svc = (await c.kubectl.json<{ spec: { clusterIP: string } }>(['-n', 'default', 'get', 'svc', 'spread'])).spec
      .clusterIP;
    const nodeOf = new Map(pods.map((p) => [p.name, p.node!]));
    const seen = async (ask: () => Promise<string>, want: number): Promise<Set<string>> => {
      const nodes = new Set<string>();
      await waitFor(
        `answers from pods on ${want} nodes`,
        async () => {
          const who = (await ask()).split(' ')[0] ?? '';
          if (nodeOf.has(who)) nodes.add(nodeOf.get(who)!);
          return nodes.size >= want;
        },
        120_000,
        50,
      );
      return nodes;
    };
    for (const client of [...groups.values()].map((g) => g[0]!)) await seen(() => askFromPod(c, client, svc, 80), 3);
    vpc = await strictVpcSide(c);
    for (const n of c.nodes) await seen(() => tcpAsk(c.vpcNetns.path, n.ip, NODE_PORT).catch(() => ''), 3);
    t.diagnostic(
      `${pairs} pod pairs across nodes answered; ClusterIP ${svc} and NodePort ${NODE_PORT} on every node reached pods on all 3 nodes`,
    );
    await checkNothingLostEverywhere(c);
  });

  it('helm upgrade restarting all three ipamds at once: every pod keeps its IP', async () => {
    const ipsBefore = new Map((await podsOf(c, 'spread')).map((p) => [p.name, p.ip]));
    const old = new Set(await ipamdPodUids(c));
    const r = await helmRelease(
      c,
      'upgrade',
      await clusterValues(c, {
        env: { ...ENV, AWS_VPC_K8S_CNI_LOGLEVEL: 'debug' },
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '100%' } },
      }),
    );
    assert.equal(r.code, 0, r.stderr);
    await waitFor(
      'three new ipamd pods',
      async () => {
        const now = await ipamdPodUids(c);
        return now.length === 3 && now.every((u) => !old.has(u));
      },
      180_000,
      500,
    );
    await waitEniIpamReady(c);
    const after = await waitPodsReady(c, 'spread', 60);
    for (const p of after) assert.equal(p.ip, ipsBefore.get(p.name), `${p.name} kept its IP`);
    await checkNothingLostEverywhere(c);
  });

  it('node 2 drained: its pods run elsewhere, its addresses cool down back into its pool with no EC2 call', async (t) => {
    const n2 = c.nodes[1]!;
    const total = (await statusOn(c, n2)).counts.total;
    const from = c.sim.calls.length;
    const drained = byNode(await podsOf(c, 'spread')).get(n2.name)?.length ?? 0;
    const r = await c.kubectl.try([
      'drain',
      n2.name,
      '--ignore-daemonsets',
      '--force',
      '--grace-period=1',
      '--timeout=180s',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const pods = await waitPodsReady(c, 'spread', 60);
    assert.equal(byNode(pods).get(n2.name)?.length ?? 0, 0, 'no pod left on the drained node');
    const s = await waitFor(
      'node 2: nothing assigned or cooling, every address available again',
      async () => {
        const x = await statusOn(c, n2);
        return x.counts.assigned === 0 && x.counts.cooling === 0 && x.counts.available === x.counts.total
          ? x
          : undefined;
      },
      120_000,
      1000,
    );
    assert.equal(s.counts.total, total, 'the pool kept every address');
    assert.deepEqual(releaseCallsOf(c, n2.instanceId, from), [], 'no EC2 release call for node 2');
    await c.kubectl.run(['uncordon', n2.name]);
    t.diagnostic(`${drained} pods moved off ${n2.name}; its ${total} addresses back in its pool, 0 EC2 release calls`);
    await checkNothingLostEverywhere(c);
  });

  it('a fourth node joins during a scale-up to 150: the pods the first three cannot hold land on it, nothing lost anywhere', async (t) => {
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'spread', `--replicas=${SCALED}`]);
    const n4 = await c.addNode({ instanceType: 'm5.large' });
    await waitEniIpamReady(c);
    const pods = await waitPodsReady(c, 'spread', SCALED, 600_000);
    const groups = byNode(pods);
    assert.ok(
      (groups.get(n4.name)?.length ?? 0) > 0,
      `pods on the new node: ${[...groups].map(([n, p]) => `${n}:${p.length}`).join(' ')}`,
    );
    const [a] = groups.get(n4.name)!;
    const [b] = groups.get(c.nodes[0]!.name)!;
    assert.equal(await askFromPod(c, a!, b!.ip!), `${b!.name} ping`, 'the new node reaches node 1 through the VPC');
    t.diagnostic(`${SCALED} pods: ${[...groups].map(([n, p]) => `${n}:${p.length}`).join(' ')}`);
    await checkNothingLostEverywhere(c);
  });

  it("node 3's instance terminated: EC2 deletes its ENIs, the one it leaves available is swept, nothing else is touched", async (t) => {
    const n3 = c.nodes[2]!;
    const live = c.nodes.filter((n) => n !== n3);
    const from = c.sim.calls.length;
    const mine = [...c.sim.state.enis.values()].filter((e) => e.attachment?.instanceId === n3.instanceId);
    const secondary = mine.filter((e) => e.attachment!.deviceIndex > 0);
    assert.ok(secondary.length > 0, `${n3.name} has a secondary ENI`);
    assert.ok(
      mine.every((e) => e.attachment!.deleteOnTermination),
      'ipamd set DeleteOnTermination on every ENI it attached',
    );
    await n3.close();
    // The instance goes while one ENI is detached (an operator's or a failed node's detach): EC2
    // leaves that one available. It is as old as a node that ran a while (the sweep leaves ENIs
    // younger than 5 min alone).
    const stray = secondary[0]!;
    const old = new Date(Date.now() - 10 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z'); // RFC 3339, as ipamd tags
    c.sim.createTags([stray.networkInterfaceId], { 'node.k8s.amazonaws.com/createdAt': old });
    await ec2ClientFor(c.sim).send(
      new DetachNetworkInterfaceCommand({ AttachmentId: stray.attachment!.attachmentId, Force: true }),
    );
    const { deleted, available } = c.sim.terminateInstance(n3.instanceId);
    assert.deepEqual(available, [], 'EC2 deleted every ENI still attached (DeleteOnTermination)');
    assert.equal(deleted.length, mine.length - 1);
    assert.equal(
      c.sim.state.enis.get(stray.networkInterfaceId)?.status,
      'available',
      'the detached ENI is left available',
    );
    await c.kubectl.run(['delete', 'node', n3.name, '--wait=false']);
    const sweptFrom = Date.now();
    await waitFor(
      'the ENI the terminated node left available deleted by a sweep',
      () => !c.sim.state.enis.has(stray.networkInterfaceId),
      120_000,
      500,
    );
    const secs = ((Date.now() - sweptFrom) / 1000).toFixed(1);
    const sweeper = c.sim.calls.find(
      (x) => x.action === 'DeleteNetworkInterface' && x.params['NetworkInterfaceId'] === stray.networkInterfaceId,
    );
    for (const n of live) assert.deepEqual(releaseCallsOf(c, n.instanceId, from), [], `no release call for ${n.name}`);
    t.diagnostic(
      `terminated ${n3.instanceId}: ${deleted.length} ENIs deleted by EC2 (DeleteOnTermination), the detached one left available and swept ${secs} s after (sweep period 10 s; call ok=${sweeper?.ok})`,
    );
    await checkNothingLostEverywhere(c, live);
  });

  it("an address node 1 unassigned and node 2 assigned later reaches node 2's pod only, and blackholes in between", async (t) => {
    const [n1, n2] = [c.nodes[0]!, c.nodes[1]!];
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'spread', '--replicas=0']);
    let left: string[] = [];
    await waitFor(
      'no spread pod left',
      async () => {
        left = (await podsOf(c, 'spread')).map((p) => `${p.name}@${p.node}:${p.phase}${p.deleting ? '/deleting' : ''}`);
        return left.length === 0;
      },
      180_000,
      1000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${left.join(' ')}`);
    });
    // Node 1 shrinks to a small warm pool: it unassigns most of its addresses.
    const from = c.sim.calls.length;
    const r = await helmRelease(
      c,
      'upgrade',
      await clusterValues(c, { env: { ...ENV, WARM_IP_TARGET: '1', ENI_IPAM_SHRINK_DELAY: '2s' } }),
    );
    assert.equal(r.code, 0, r.stderr);
    await waitEniIpamReady(c);
    const unassignedBy = (instanceId: string): string[] =>
      c.sim.calls
        .slice(from)
        .filter((x) => x.ok && x.action === 'UnassignPrivateIpAddresses' && x.instanceId === instanceId)
        .flatMap((x) =>
          Object.entries(x.params)
            .filter(([k]) => k.startsWith('PrivateIpAddress'))
            .map(([, v]) => v),
        );
    const unassigned = await waitFor(
      'node 1 unassigned addresses',
      () => {
        const ips = unassignedBy(n1.instanceId);
        return ips.length ? ips : undefined;
      },
      180_000,
      1000,
    );
    // Node 2 shrinks too (the same upgrade), so its movers below need addresses from EC2: with
    // the cooldown ending on evidence it would otherwise serve them from its own freed ones.
    await waitFor('node 2 unassigned addresses', () => unassignedBy(n2.instanceId).length > 0, 180_000, 1000);
    const probe = unassigned[0]!;
    assert.equal(
      await tcpAsk(c.vpcNetns.path, probe, ECHO_PORT).catch(() => ''),
      '',
      `${probe} unassigned: the VPC drops it`,
    );
    // Other users take the rest of the subnet, so EC2 can give node 2 only what node 1 gave back.
    const subnet = c.node.subnetId;
    const taken = c.sim.occupy(subnet, 0);
    c.sim.releaseOccupied(subnet, unassigned);
    const movers = Math.min(8, unassigned.length);
    try {
      await c.kubectl.apply([spreadDeployment(c, 'mover', movers, n2.name)]);
      const pods = await waitPodsReady(c, 'mover', movers);
      const moved = pods.filter((p) => unassigned.includes(p.ip!));
      assert.ok(moved.length > 0, `node 2's pods got none of node 1's addresses: ${pods.map((p) => p.ip).join(' ')}`);
      for (const m of moved)
        assert.equal(await tcpAsk(c.vpcNetns.path, m.ip!, ECHO_PORT), `${m.name} ping`, `${m.ip} reaches node 2's pod`);
      t.diagnostic(
        `node 1 unassigned ${unassigned.length} addresses; ${moved.length} of them now serve pods on ${n2.name}`,
      );
    } finally {
      c.sim.releaseOccupied(
        subnet,
        taken.filter((ip) => !unassigned.includes(ip)),
      );
    }
    await checkNothingLostEverywhere(c);
  });
});
