/**
 * Custom networking end to end (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true): the real ipamd
 * binary on the simulated cloud (real SDK over HTTP, a VPC with a 100.64.0.0/16 secondary
 * block) reading the node and its ENIConfig from the test run's real kube-apiserver (the
 * chart's CRD; ipamd as the chart's ServiceAccount) through @kubernetes/client-node.
 *
 * 1. The node's label names an ENIConfig that does not exist: an ADD fails with an error
 *    naming the ENIConfig and the label that selected it, the pod gets a
 *    FailedIPAllocation Event saying so, the node condition eni-ipam.io/IPAllocatable is
 *    False with reason ENIConfigMissing, and EC2 saw no mutation at all (no
 *    CreateNetworkInterface, no assign to the primary ENI: it serves no new pod).
 * 2. The ENIConfig is created: the watch sees it, an ENI is created in its 100.64.x subnet
 *    with its two security groups, and the ADD gets a 100.64.x address; /v1/eni-configs answers its name.
 * 2b. The ENIConfig is edited to another subnet while pods run: the first ENI keeps its
 *    pods where it is, the next ENI goes to the new subnet.
 * 3. The ENIConfig is deleted again: the condition says ENIConfigMissing, and nothing
 *    allocated is touched (no unassign, detach or delete; the pod keeps its address).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { buildNode } from '../../kit/node.js';
import { startIpamd } from '../../kit/ipamd-process.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';
import { uniqueName } from '../../kit/cluster/apiserver-objects.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const LABEL = 'k8s.amazonaws.com/eniConfig';
const MUTATIONS = [
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
];

test('custom networking: a missing ENIConfig creates nothing and says so; created, ENIs land in its subnet', async (t) => {
  const k = await buildNode({
    vpcCidrs: ['100.64.0.0/16'],
    extraSubnets: [{ cidr: '100.64.0.0/19' }, { cidr: '100.64.32.0/19' }],
    cri: {},
    dirPrefix: 'eni-ipam-custom-net-',
  });
  // ipamd is stopped before the node's dir goes (t.after hooks run in the order they were added):
  // a running ipamd writes its checkpoint and inventory into it while it is removed.
  let ipamd: Awaited<ReturnType<typeof startIpamd>> | undefined;
  t.after(async () => {
    await ipamd?.stop(5000);
    await k.close();
  });
  // ENIConfigs are cluster-scoped on the run's shared server: a name of this test's own.
  const CFG = uniqueName('pods-a');
  const k8s = await realKubeEnv(t, { prefix: 'custom-net', labels: { [LABEL]: CFG } });
  const api = k8s.kube;
  const NODE = k8s.nodeName;
  const podSubnet = k.extraSubnets[0]!;
  const nextSubnet = k.extraSubnets[1]!;
  ipamd = await startIpamd({
    env: {
      AWS_EC2_ENDPOINT: k.sim.ec2Endpoint,
      AWS_EC2_METADATA_SERVICE_ENDPOINT: k.sim.imdsEndpoint,
      ENI_IPAM_SOCKET: path.join(k.dir, 'ipamd.sock'),
      ENI_IPAM_CHECKPOINT_PATH: path.join(k.dir, 'ipam.json'),
      CRI_RUNTIME_ENDPOINT: k.cri!.endpoint,
      ENI_IPAM_POOL_INTERVAL: '200ms',
      ENI_IPAM_ADD_WAIT_TIMEOUT: '3s',
      // Warm-ip mode: an ENI is created only when the ones there are full (step 2b counts on it).
      WARM_IP_TARGET: '1',
      AWS_VPC_K8S_CNI_LOGLEVEL: 'debug',
      MY_NODE_NAME: NODE,
      KUBECONFIG: k8s.kubeconfig(),
      AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'true',
    },
    logFile: path.join(k.dir, 'ipamd.log'),
  });
  const c = ipamdClient(path.join(k.dir, 'ipamd.sock'));
  t.after(() => c.close());
  const condition = async () =>
    (((await api.get(`/api/v1/nodes/${NODE}`)) as Obj).status.conditions ?? []).find(
      (x: Obj) => x.type === 'eni-ipam.io/IPAllocatable',
    ) as Obj | undefined;
  const introspect = async (p: string) =>
    fetch(`http://127.0.0.1:${ipamd.introspectionPort}${p}`).then(async (r) => ({
      status: r.status,
      body: await r.text(),
    }));

  // 1. Missing (once the source has read the node and the ENIConfigs): the ADD fails naming the ENIConfig and what selected it.
  await waitFor('the selection read', async () => (await ipamd.status()).eniConfig.state === 'missing');
  await api.upsertPod({ namespace: 'default', name: 'pod-p1', nodeName: NODE, phase: 'Pending' });
  await assert.rejects(c.add('p1'), (e: Error) => {
    assert.match(
      e.message,
      new RegExp(`ENIConfig "${CFG}" \\(label k8s\\.amazonaws\\.com/eniConfig=${CFG}\\) is missing`),
    );
    assert.match(e.message, /no ENI is created/);
    return true;
  });
  const down = await waitFor('condition False, ENIConfigMissing', async () => {
    const c0 = await condition();
    return c0?.status === 'False' && c0.reason === 'ENIConfigMissing' ? c0 : undefined;
  });
  assert.ok(down.message.includes(`ENIConfig "${CFG}"`), down.message);
  const ev = await waitFor('the pod Event', async () =>
    (((await api.get('/api/v1/namespaces/default/events')) as Obj).items as Obj[]).find(
      (e) => e.source?.host === NODE && e.involvedObject.kind === 'Pod' && e.involvedObject.name === 'pod-p1',
    ),
  );
  assert.equal(ev.reason, 'FailedIPAllocation');
  assert.ok(
    /\(eniconfig\)/.test(ev.message) && ev.message.includes(`ENIConfig "${CFG}" (label ${LABEL}=${CFG}) is missing`),
    ev.message,
  );
  assert.equal(k.sim.countCalls(MUTATIONS), 0, 'no EC2 mutation while the ENIConfig is missing');
  const st = await ipamd.status();
  assert.equal(st.eniConfig.state, 'missing');
  assert.equal((await introspect('/v1/eni-configs')).body, JSON.stringify(CFG));
  assert.equal(JSON.parse((await introspect('/v1/ipamd-env-settings')).body).AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG, true);

  // 2. Created: the next ENI goes to its subnet, and pods get addresses from it.
  const groups = ['sg-0aaaaaaaaaaaaaaa1', 'sg-0bbbbbbbbbbbbbbb2'];
  assert.equal((await api.upsertEniConfig(CFG, { subnet: podSubnet.subnetId, securityGroups: groups })).status, 201);
  const rep = await waitFor(
    'an ADD served from the ENIConfig subnet',
    async () => {
      try {
        return await c.add('p2');
      } catch {
        return undefined;
      }
    },
    20_000,
    250,
  );
  assert.match(rep.ipv4_addr ?? JSON.stringify(rep), /^100\.64\./, 'a 100.64.x address');
  const ours = [...k.sim.state.enis.values()].filter(
    (e) => e.attachment?.instanceId === k.instanceId && e.attachment.deviceIndex > 0,
  );
  assert.ok(ours.length >= 1);
  for (const e of ours)
    assert.equal(e.subnetId, podSubnet.subnetId, `${e.networkInterfaceId} is in the ENIConfig subnet`);
  for (const e of ours)
    assert.deepEqual(e.securityGroupIds, groups, `${e.networkInterfaceId} has the ENIConfig's groups`);
  const primary = [...k.sim.state.enis.values()].find(
    (e) => e.attachment?.instanceId === k.instanceId && e.attachment.deviceIndex === 0,
  )!;
  assert.equal(primary.secondaryIps.length, 0, 'the primary ENI got no secondary IP for pods');
  await waitFor('condition True', async () => (await condition())?.status === 'True');

  // 2b. The ENIConfig is edited to another subnet while pods run: the ENI there keeps its pods,
  // the next ENI (created once it is full) goes to the new subnet.
  assert.equal((await api.upsertEniConfig(CFG, { subnet: nextSubnet.subnetId, securityGroups: groups })).status, 200);
  await waitFor('the edit seen', async () => (await ipamd.status()).eniConfig.subnetIds?.[0] === nextSubnet.subnetId);
  const firstEnis = new Set(ours.map((e) => e.networkInterfaceId));
  const ips: string[] = [];
  for (let i = 3; i <= 12; i++)
    ips.push(
      (
        await waitFor(
          `ADD p${i}`,
          async () => {
            try {
              return await c.add(`p${i}`);
            } catch {
              return undefined;
            }
          },
          20_000,
          250,
        )
      ).ipv4_addr,
    );
  const after = [...k.sim.state.enis.values()].filter(
    (e) => e.attachment?.instanceId === k.instanceId && e.attachment.deviceIndex > 0,
  );
  const newer = after.filter((e) => !firstEnis.has(e.networkInterfaceId));
  assert.ok(newer.length >= 1, 'a new ENI was needed');
  for (const e of newer) assert.equal(e.subnetId, nextSubnet.subnetId, `${e.networkInterfaceId} is in the new subnet`);
  for (const e of after.filter((x) => firstEnis.has(x.networkInterfaceId)))
    assert.equal(e.subnetId, podSubnet.subnetId, 'the first ENI stays where it was');
  assert.ok(
    ips.some((ip) => /^100\.64\.(3[2-9]|[4-5][0-9]|6[0-3])\./.test(ip)),
    `a pod got an address of the new subnet (${ips.join(', ')})`,
  );
  assert.equal((await c.add('p2')).ipv4_addr, rep.ipv4_addr, 'the first pod keeps its address');

  // 3. Deleted again: said so, and nothing allocated is touched.
  const before = k.sim.countCalls(['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface']);
  await api.deleteEniConfig(CFG);
  await waitFor(
    'condition reason ENIConfigMissing again',
    async () => (await condition())?.reason === 'ENIConfigMissing',
    20_000,
  ).catch(async (e: Error) => {
    throw new Error(
      `${e.message}; condition ${JSON.stringify(await condition())}; status.eniConfig ${JSON.stringify((await ipamd.status()).eniConfig)}`,
    );
  });
  const again = await c.add('p2');
  assert.equal(again.ipv4_addr, rep.ipv4_addr, 'the pod keeps its address');
  assert.equal(
    k.sim.countCalls(['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface']),
    before,
    'no release of any kind',
  );
});
