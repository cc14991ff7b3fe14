/**
 * Custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true) through real containerd:
 * pods run with RunPodSandbox over the CRI, containerd execs the plugin, the real ipamd
 * assigns from ENIs it created on the simulated cloud (real SDK over HTTP) in the subnet
 * of the ENIConfig it selected by the node's zone label (ENI_CONFIG_LABEL_DEF=
 * topology.kubernetes.io/zone, one ENIConfig per zone, as upstream documents it), read
 * from the Kubernetes API stand-in. The node is in 10.0.0.0/24 of VPC 10.0.0.0/16, whose
 * secondary block 100.64.0.0/16 holds the pod subnets. Each scenario ends with the
 * nothing-lost check (kit/nothing-lost.ts).
 *
 * 1. ENIConfig <zone> → 100.64.0.0/19 with two security groups: 30 pods all get 100.64.x
 *    addresses on secondary ENIs created in that subnet with those groups; the primary ENI
 *    gets none.
 * 2. The ENIConfig is edited to 100.64.32.0/19 while pods run: the old ENIs keep their pods
 *    (same IPs, netns still wired), ENIs created after the edit land in the new subnet.
 *
 * The missing-ENIConfig and prefix-delegation scenarios are in
 * custom-networking-containerd-missing.test.ts. Needs root and
 * `scripts/ensure-deps.sh --containerd`; run under the containerd lock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  POD_GROUPS,
  callCounts,
  customNetNode,
  describeEnis,
  inCidr,
  instanceEnis,
  runPods,
  waitForFirstEni,
  waitForSelection,
  waitForStableEnis,
} from '../helpers/custom-net-containerd.js';

test('custom networking: 30 pods through containerd get 100.64.x addresses on ENIs in the ENIConfig subnet with its groups', async (t) => {
  const { n, zone } = await customNetNode();
  t.after(() => n.close());
  const podSubnet = n.extraSubnets[0]!;
  n.kube.upsertEniConfig(zone, { subnet: podSubnet.subnetId, securityGroups: POD_GROUPS });
  await n.startIpamd();
  const sel = await waitForSelection(n, 'ok', podSubnet.subnetId);
  assert.equal(sel.name, zone, 'the ENIConfig named after the zone');
  assert.equal(sel.selectedBy, `label topology.kubernetes.io/zone=${zone}`);
  await waitForFirstEni(n);

  const t0 = Date.now();
  const pods = await runPods(n, 'cn', 30);
  t.diagnostic(`30 pods through containerd in ${Date.now() - t0} ms`);
  for (const p of pods) assert.ok(inCidr(p.ip, podSubnet.cidr), `${p.name} got ${p.ip}, in ${podSubnet.cidr}`);

  const enis = instanceEnis(n.sim, n.instanceId);
  const [primary, ...secondary] = enis;
  assert.equal(primary!.attachment!.deviceIndex, 0);
  assert.equal(
    primary!.subnetId,
    n.sim.state.instances.get(n.instanceId)!.subnetId,
    'the primary ENI is the node subnet',
  );
  assert.deepEqual(primary!.secondaryIps, [], 'the primary ENI got no secondary IP for pods');
  assert.ok(secondary.length >= 3, `30 pods need 3 ENIs of 14 (m5.xlarge): ${secondary.length}`);
  for (const e of secondary) {
    assert.equal(e.subnetId, podSubnet.subnetId, `${e.networkInterfaceId} is in the ENIConfig subnet`);
    assert.deepEqual(e.securityGroupIds, POD_GROUPS, `${e.networkInterfaceId} has the ENIConfig's two groups`);
  }
  // Each pod's address is a secondary IP of a secondary ENI, and ipamd says the same ENI.
  const byIp = new Map((await n.allocations()).map((a) => [a.ipv4, a.eniId]));
  for (const p of pods) {
    const owner = secondary.find((e) => e.secondaryIps.includes(p.ip));
    assert.ok(owner, `${p.ip} is a secondary IP of one of our secondary ENIs`);
    assert.equal(byIp.get(p.ip), owner.networkInterfaceId, `ipamd puts ${p.name} on ${owner.networkInterfaceId}`);
  }
  for (const line of describeEnis(n.sim, n.instanceId)) t.diagnostic(line);
  t.diagnostic(`EC2 calls: ${JSON.stringify(callCounts(n.sim))}`);
  await n.assertNothingLost();
});

test('custom networking: an ENIConfig edited while pods run keeps the old ENIs and their pods; new ENIs use the new subnet', async (t) => {
  const { n, zone } = await customNetNode({ podSubnets: ['100.64.0.0/19', '100.64.32.0/19'] });
  t.after(() => n.close());
  const [a, b] = n.extraSubnets as [(typeof n.extraSubnets)[0], (typeof n.extraSubnets)[0]];
  n.kube.upsertEniConfig(zone, { subnet: a.subnetId, securityGroups: POD_GROUPS });
  await n.startIpamd();
  await waitForSelection(n, 'ok', a.subnetId);
  await waitForFirstEni(n);

  const before = await runPods(n, 'old', 6);
  for (const p of before) assert.ok(inCidr(p.ip, a.cidr), `${p.name} ${p.ip} in ${a.cidr}`);
  // The pool settles (ENIs it wants for its warm target exist) before the edit.
  const settled = await waitForStableEnis(n);
  const oldEnis = new Map(instanceEnis(n.sim, n.instanceId).map((e) => [e.networkInterfaceId, e.subnetId]));
  t.diagnostic(`before the edit: ${describeEnis(n.sim, n.instanceId).join(' | ')}`);
  const callsAtEdit = n.sim.calls.length;

  n.kube.upsertEniConfig(zone, { subnet: b.subnetId, securityGroups: POD_GROUPS });
  await waitForSelection(n, 'ok', b.subnetId);
  // Enough pods that the ENIs of before the edit cannot hold them all: 14 IPs each on m5.xlarge.
  const oldCapacity = (settled - 1) * 14;
  const after = await runPods(n, 'new', oldCapacity - before.length + 4);

  const enis = instanceEnis(n.sim, n.instanceId);
  const fresh = enis.filter((e) => !oldEnis.has(e.networkInterfaceId));
  assert.ok(fresh.length >= 1, 'an ENI was created after the edit');
  for (const e of fresh)
    assert.equal(e.subnetId, b.subnetId, `${e.networkInterfaceId} (created after the edit) is in ${b.cidr}`);
  for (const e of enis)
    if (oldEnis.has(e.networkInterfaceId))
      assert.equal(e.subnetId, oldEnis.get(e.networkInterfaceId), `${e.networkInterfaceId} kept its subnet`);
  // The pods of before the edit keep their addresses, on the old ENIs.
  const byIp = new Map((await n.allocations()).map((a) => [a.ipv4, a]));
  for (const p of before) {
    const al = byIp.get(p.ip);
    assert.equal(al?.containerID, p.id, `${p.name} still holds ${p.ip}`);
    assert.ok(oldEnis.has(al.eniId), `${p.name} is still on an ENI of before the edit`);
    const st = await n.cri.podSandboxStatus(p.id);
    assert.equal(st.status?.network?.ip, p.ip, `${p.name}'s sandbox still reports ${p.ip}`);
  }
  assert.ok(
    after.some((p) => inCidr(p.ip, b.cidr)),
    `some pod of after the edit is served from ${b.cidr}: ${after.map((p) => p.ip).join(' ')}`,
  );
  for (const p of after)
    assert.ok(inCidr(p.ip, a.cidr) || inCidr(p.ip, b.cidr), `${p.name} ${p.ip} is in one of the two pod subnets`);
  for (const line of describeEnis(n.sim, n.instanceId)) t.diagnostic(line);
  t.diagnostic(`EC2 calls before the edit: ${JSON.stringify(callCounts(n.sim, 0, callsAtEdit))}`);
  t.diagnostic(`EC2 calls after the edit: ${JSON.stringify(callCounts(n.sim, callsAtEdit))}`);
  await n.assertNothingLost();
});
