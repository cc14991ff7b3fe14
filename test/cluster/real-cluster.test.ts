/**
 * eni-ipam on a real Kubernetes (v1.36, built from its Go modules): the chart's objects
 * checked by the real API server, `helm install` with the DaemonSet turning Ready through
 * its own probes and the Node turning Ready, 30 pods started by the real kubelet through
 * containerd 2.x and the installed CNI shim, traffic pod↔pod across ENIs, pod→node and
 * pod→ClusterIP through the real kube-proxy, RBAC enforced on ipamd's ServiceAccount, a
 * DaemonSet rolling update by the real controller while pods churn, ipamd killed during a
 * scale-up, containerd and kubelet restarted, and `helm uninstall`. One cluster serves
 * every step, in order (each step starts from the state the previous one left).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import ipaddr from 'ipaddr.js';
import { renderChart } from '../../kit/helm.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import {
  clusterValues,
  helmRelease,
  installEniIpam,
  ipamdPodUids,
  NAMESPACE,
  nodeCondition,
  RELEASE,
  waitEniIpamReady,
} from '../../kit/cluster/install.js';
import { echoPod, installedChain, nodeIfbQdiscs, nodeNatRules } from '../../kit/cluster/chained-plugins.js';
import { checkNothingLost, killIpamd } from '../../kit/cluster/nothing-lost.js';
import {
  allocations,
  echoDeployment,
  eniOf,
  introspect,
  podNetns,
  podsOf,
  tcpAsk,
  waitPodsReady,
} from '../../kit/cluster/workload.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;

describe('eni-ipam on a real Kubernetes cluster', { skip, timeout: 45 * 60_000 }, () => {
  let c: TestCluster;
  before(async () => {
    // The kubelet's default maxPods (110), not EKS's 57 for an m5.xlarge: the exhausted-node
    // step needs the scheduler to send the node more pods than its 56 addresses. With EKS's
    // value it sends at most 56 echo pods, every ADD gets an address and none fails, unless
    // addresses happen to be cooling at that moment (a timing accident, not exhaustion).
    c = await startCluster({ maxPods: 110 });
  });
  after(async () => {
    await c?.close();
  });

  it('the API server accepts every object the chart renders, with default and non-default values', async () => {
    const nonDefault = {
      fullnameOverride: 'eni-x',
      taintWhenExhausted: true,
      eniConfig: { createCrd: true },
      rbac: { nodeEventsAndStatus: false },
      criSocket: '/var/run/crio/crio.sock',
      podLabels: { team: 'net' },
      podAnnotations: { 'example.com/a': 'b' },
      serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/eni' } },
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      init: { primaryInterface: 'ens5' },
      env: { WARM_IP_TARGET: '5', MINIMUM_IP_TARGET: '10' },
    };
    for (const values of [{}, await clusterValues(c), nonDefault]) {
      const objs = await renderChart(values);
      assert.ok(objs.some((o) => o['kind'] === 'DaemonSet'));
      const r = await c.kubectl.try(
        ['apply', '--dry-run=server', '-f', '-'],
        JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }),
      );
      assert.equal(r.code, 0, `server dry-run refused the chart (values ${JSON.stringify(values)}):\n${r.stderr}`);
    }
  });

  it('a chart value the API server refuses fails helm install with the server naming the field', async () => {
    try {
      const r = await helmRelease(c, 'install', { ...(await clusterValues(c)), podLabels: { 'not a label!': 'x' } });
      assert.notEqual(r.code, 0);
      assert.match(
        r.stderr,
        /DaemonSet\.apps "eni-ipam" is invalid: spec\.template\.labels: Invalid value: "not a label!"/,
      );
      assert.equal((await c.kubectl.try(['-n', NAMESPACE, 'get', 'daemonset', RELEASE])).code, 1, 'no DaemonSet');
    } finally {
      // A failed install leaves a failed release (and the objects made before the refusal).
      await c.kubectl.helm(['uninstall', RELEASE, '-n', NAMESPACE, '--wait']);
    }
  });

  it('installs with helm: the DaemonSet turns Ready through its probes, then the Node', async () => {
    assert.equal(await nodeCondition(c, 'Ready'), 'False', 'NotReady before a CNI conflist exists');
    await installEniIpam(c, { wait: true });
    assert.ok(readdirSync(c.host('/etc/cni/net.d')).some((f) => f.endsWith('.conflist')));
    // ipamd checks the node's kernel settings (the image once lacked the `sysctl` it read them with).
    const st = await introspect<{ nodeSysctls: Array<{ sysctl: string; ok: boolean; problem?: string }> | null }>(
      c,
      '/v1/status',
    );
    assert.ok(st.nodeSysctls?.length, 'ipamd checked the node sysctls');
    for (const s of st.nodeSysctls) assert.ok(s.ok, `${s.sysctl}: ${s.problem}`);
  });

  it('ipamd reaches the API server with the chart ServiceAccount only, and RBAC grants what it calls', async () => {
    // The ENIConfig CRD, as on an EKS node (aws-node's chart installs it; ours with eniConfig.createCrd).
    const crd = (await renderChart({ eniConfig: { createCrd: true } })).filter(
      (o) => o['kind'] === 'CustomResourceDefinition',
    );
    assert.equal(crd.length, 1);
    await c.kubectl.apply(crd);
    await c.kubectl.run([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/eniconfigs.crd.k8s.amazonaws.com',
    ]);
    const sa = `system:serviceaccount:${NAMESPACE}:${RELEASE}`;
    const can = async (...a: string[]): Promise<boolean> =>
      (await c.kubectl.try(['auth', 'can-i', '--as', sa, ...a])).stdout.trim() === 'yes';
    for (const a of [
      ['list', 'pods'],
      ['watch', 'pods'],
      ['get', `nodes/${c.nodeName}`],
      ['watch', 'nodes'],
      ['list', 'eniconfigs.crd.k8s.amazonaws.com'],
      ['watch', 'eniconfigs.crd.k8s.amazonaws.com'],
      ['list', 'endpointslices.discovery.k8s.io'],
      ['watch', 'endpointslices.discovery.k8s.io'],
      ['create', 'events'],
      ['patch', 'events'],
      ['patch', `nodes/${c.nodeName}`, '--subresource=status'],
    ])
      assert.ok(await can(...a), `the ClusterRole lacks: ${a.join(' ')}`);
    assert.equal(await can('delete', 'pods'), false, 'the ClusterRole grants no more than ipamd needs');
    assert.equal(await can('patch', `nodes/${c.nodeName}`), false, 'node patch only with taintWhenExhausted');
    // What ipamd wrote with that identity: its node condition.
    await waitFor(
      'the eni-ipam.io/IPAllocatable condition',
      async () => nodeCondition(c, 'eni-ipam.io/IPAllocatable'),
      60_000,
      1000,
    );
  });

  it('30 pods Running with unique addresses from the subnet; pod↔pod across ENIs, pod→node, pod→ClusterIP', async () => {
    await c.kubectl.apply([echoDeployment(c, 'echo', 30)]);
    const pods = await waitPodsReady(c, 'echo', 30);
    const subnet = ipaddr.parseCIDR(c.sim.state.subnets.get(c.node.subnetId)!.cidr);
    const ips = pods.map((p) => p.ip!);
    assert.equal(new Set(ips).size, 30, 'no address twice');
    for (const ip of ips) assert.ok(ipaddr.parse(ip).match(subnet), `${ip} is in the node's subnet`);
    // The kubelet's CNI_ARGS reached ipamd: each allocation names its pod.
    const alloc = await allocations(c);
    for (const p of pods) {
      const a = alloc.find((x) => x.ipv4 === p.ip);
      assert.equal(a?.pod?.name, p.name, `ipamd's allocation of ${p.ip} names pod ${p.name}`);
      assert.equal(a?.pod?.uid, p.uid);
    }
    const enis = new Set(ips.map((ip) => eniOf(c, ip)));
    assert.ok(enis.size >= 2, `pods span several ENIs (${[...enis].join(', ')})`);
    const ns = await podNetns(c);
    for (const p of pods) {
      const peer = pods.find((q) => eniOf(c, q.ip!) !== eniOf(c, p.ip!))!;
      const reply = await tcpAsk(ns.get(p.name)!, peer.ip!, ECHO_PORT);
      assert.equal(reply, `${peer.name} ping`, `${p.name} (${p.ip}) → ${peer.name} (${peer.ip})`);
      await tcpAsk(ns.get(p.name)!, c.nodeIp, 10250, true); // pod → node (the kubelet's port)
    }
    await c.kubectl.run(['-n', 'default', 'expose', 'deployment', 'echo', '--port=80', `--target-port=${ECHO_PORT}`]);
    const svc = await c.kubectl.json<{ spec: { clusterIP: string } }>(['-n', 'default', 'get', 'service', 'echo']);
    const names = new Set(pods.map((p) => p.name));
    const answered = new Set<string>();
    for (const p of pods.slice(0, 10)) {
      const reply = await waitFor(
        'an answer through the ClusterIP',
        () => tcpAsk(ns.get(p.name)!, svc.spec.clusterIP, 80).catch(() => ''),
        30_000,
        500,
      );
      const who = reply.split(' ')[0]!;
      assert.ok(names.has(who), `${svc.spec.clusterIP}:80 answered by an echo pod (${reply})`);
      answered.add(who);
    }
    assert.ok(answered.size >= 1);
  });

  it('chained plugins: a hostPort pod answers on the node IP; egress-bandwidth gets its tbf; both undone on delete', async () => {
    const up = await helmRelease(c, 'upgrade', await clusterValues(c, { env: { ENABLE_BANDWIDTH_PLUGIN: 'true' } }));
    assert.equal(up.code, 0, up.stderr);
    await waitEniIpamReady(c);
    assert.ok(existsSync(c.host('/opt/cni/bin/portmap')), 'the init container installed portmap');
    await waitFor(
      'the conflist with portmap and bandwidth',
      async () => installedChain(c).join() === 'eni-ipam,portmap,bandwidth',
      60_000,
      500,
    );
    await c.kubectl.apply([
      echoPod(c, 'hostport', { hostPort: 18080 }),
      echoPod(c, 'shaped', { annotations: { 'kubernetes.io/egress-bandwidth': '10M' } }),
    ]);
    await waitPodsReady(c, 'hostport', 1);
    await waitPodsReady(c, 'shaped', 1);
    const ns = await podNetns(c);
    const [client] = await podsOf(c, 'echo');
    // The kubelet's port mapping reached portmap through containerd: another pod, and the node itself, reach it.
    assert.equal(await tcpAsk(ns.get(client!.name)!, c.nodeIp, 18080), 'hostport ping');
    assert.equal(await tcpAsk(c.nodeNetns.path, c.nodeIp, 18080), 'hostport ping');
    assert.match(await nodeIfbQdiscs(c), /qdisc tbf .* rate 10Mbit/, "the shaped pod's egress tbf");
    await c.kubectl.run(['-n', 'default', 'delete', 'pod', 'hostport', 'shaped', '--wait=true']);
    await waitFor(
      'the DNAT and the tbf gone',
      async () => !(await nodeNatRules(c)).includes('--dport 18080') && (await nodeIfbQdiscs(c)) === '',
      60_000,
      500,
    );
  });

  it('helm upgrade rolls the DaemonSet while pods are created and deleted: every pod keeps its IP', async (t) => {
    const before = await podsOf(c, 'echo');
    const ipAtStart = new Map(before.map((p) => [p.name, p.ip!]));
    const [oldUid] = await ipamdPodUids(c);
    const churned = new Set<string>();
    let churning = true;
    const churn = (async () => {
      for (let i = 0; churning && i < 200; i++) {
        const victim = before[i % before.length]!.name;
        churned.add(victim);
        await c.kubectl.try(['-n', 'default', 'delete', 'pod', victim, '--wait=false']);
        await new Promise((r) => setTimeout(r, 1500));
      }
    })();
    const r = await helmRelease(c, 'upgrade', { ...(await clusterValues(c, { env: { WARM_IP_TARGET: '3' } })) });
    assert.equal(r.code, 0, r.stderr);
    await waitFor(
      'a new eni-ipam pod',
      async () => {
        const uids = await ipamdPodUids(c);
        return uids.length === 1 && uids[0] !== oldUid;
      },
      180_000,
      1000,
    );
    await waitEniIpamReady(c);
    churning = false;
    await churn;
    await waitPodsReady(c, 'echo', 30);
    const kept = [...ipAtStart].filter(([n]) => !churned.has(n));
    await checkNothingLost(c, 'echo', new Map(kept));
    t.diagnostic(
      `rolled with ${churned.size} pods deleted (and re-created) during the roll; ${kept.length} kept their IP`,
    );
  });

  it('ipamd killed (kill -9) during a 0→50 scale-up: every pod ends Running with a unique IP', async (t) => {
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'echo', '--replicas=0']);
    await waitFor('no echo pod left', async () => (await podsOf(c, 'echo')).length === 0, 120_000, 1000);
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'echo', '--replicas=50']);
    await waitFor(
      'some echo pods Running',
      async () => (await podsOf(c, 'echo')).some((p) => p.phase === 'Running'),
      120_000,
      200,
    );
    const runningAtKill = (await podsOf(c, 'echo')).filter((p) => p.phase === 'Running').length;
    await killIpamd(c);
    t.diagnostic(`ipamd killed with ${runningAtKill} of 50 pods Running`);
    await waitPodsReady(c, 'echo', 50, 420_000);
    await checkNothingLost(c, 'echo', new Map());
  });

  it('containerd and then the kubelet restarted during a scale-down and up: nothing lost', async () => {
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'echo', '--replicas=20']);
    await c.nodeProcs.restart('containerd');
    await waitPodsReady(c, 'echo', 20, 300_000);
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'echo', '--replicas=40']);
    await c.nodeProcs.restart('kubelet');
    await waitPodsReady(c, 'echo', 40, 300_000);
    await checkNothingLost(c, 'echo', new Map());
  });

  it("an exhausted node: the failed ADD's Event, the node condition and the taint, written under RBAC", async () => {
    // 56 pod addresses on an m5.xlarge (4 ENIs x 14): 60 pods cannot all get one (the
    // kubelet admits up to 110, see before()).
    const up = await helmRelease(c, 'upgrade', await clusterValues(c, { taintWhenExhausted: true }));
    assert.equal(up.code, 0, up.stderr);
    await waitEniIpamReady(c);
    // Only an Event written after this scale-up counts: an earlier step's ADD that waited
    // out a cooldown and failed left its own (on a pod that runs by now, or is gone).
    type Ev = { metadata: { uid: string }; message: string; involvedObject: { kind: string; name: string } };
    const failedAllocationEvents = async (): Promise<Ev[]> =>
      (
        await c.kubectl.json<{ items: Ev[] }>([
          '-n',
          'default',
          'get',
          'events',
          '--field-selector',
          'reason=FailedIPAllocation',
        ])
      ).items;
    const earlier = new Set((await failedAllocationEvents()).map((e) => e.metadata.uid));
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'echo', '--replicas=60']);
    const ev = await waitFor(
      "ipamd's FailedIPAllocation Event on a pod of this scale-up",
      async () =>
        (await failedAllocationEvents()).find(
          (e) =>
            !earlier.has(e.metadata.uid) &&
            e.involvedObject.kind === 'Pod' &&
            e.involvedObject.name.startsWith('echo-'),
        ),
      180_000,
      1000,
    );
    assert.match(ev.message, /\(eni_limit\): .*ENI limit/, 'the Event names the binding limit');
    await waitFor(
      'IPAllocatable=False',
      async () => (await nodeCondition(c, 'eni-ipam.io/IPAllocatable')) === 'False',
      120_000,
      1000,
    );
    const taints = async (): Promise<string[]> =>
      (
        (
          await c.kubectl.json<{ spec: { taints?: Array<{ key: string; effect: string }> } }>([
            'get',
            'node',
            c.nodeName,
          ])
        ).spec.taints ?? []
      ).map((t) => `${t.key}:${t.effect}`);
    await waitFor(
      'the exhausted taint',
      async () => (await taints()).includes('eni-ipam.io/no-ip-available:NoSchedule'),
      120_000,
      1000,
    );
    await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'echo', '--replicas=40']);
    await waitPodsReady(c, 'echo', 40, 300_000);
    await waitFor(
      'the taint gone',
      async () => !(await taints()).includes('eni-ipam.io/no-ip-available:NoSchedule'),
      180_000,
      1000,
    );
    await checkNothingLost(c, 'echo', new Map());
  });

  it('helm uninstall removes the chart objects and keeps the checkpoint, the conflist and the ENIs', async () => {
    const attached = () =>
      [...c.sim.state.enis.values()].filter((e) => e.attachment?.instanceId === c.node.instanceId).length;
    const ipsOnEnis = () =>
      [...c.sim.state.enis.values()]
        .filter((e) => e.attachment?.instanceId === c.node.instanceId)
        .reduce((n, e) => n + e.secondaryIps.length, 0);
    const enisBefore = attached();
    const ipsBefore = ipsOnEnis();
    const r = await c.kubectl.helm(['uninstall', RELEASE, '-n', NAMESPACE, '--wait']);
    assert.equal(r.code, 0, r.stderr);
    for (const kind of ['daemonset', 'serviceaccount'])
      assert.equal((await c.kubectl.try(['-n', NAMESPACE, 'get', kind, RELEASE])).code, 1, `${kind} removed`);
    assert.equal((await c.kubectl.try(['get', 'clusterrole', RELEASE])).code, 1, 'ClusterRole removed');
    await waitFor('the ipamd pod gone', async () => (await ipamdPodUids(c)).length === 0, 120_000, 1000);
    assert.ok(
      readdirSync(c.host('/etc/cni/net.d')).some((f) => f.endsWith('.conflist')),
      'the conflist stays',
    );
    assert.ok(existsSync(c.host('/run/eni-ipam/ipam.json')), 'the checkpoint stays');
    assert.equal(attached(), enisBefore, 'the ENIs stay attached');
    assert.equal(ipsOnEnis(), ipsBefore, 'with their secondary IPs');
  });
});
