/**
 * Custom networking through real containerd, continued (the node and ipamd as in
 * custom-networking-containerd.test.ts: 10.0.0.0/24 node, pod subnets in the VPC's
 * 100.64.0.0/16 block, ENIConfig selected by the zone label).
 *
 * 3. The node is annotated (k8s.amazonaws.com/eniConfig, which wins over the zone label)
 *    with an ENIConfig that does not exist while pods run: the warm IPs already on the
 *    ENIs keep serving without any EC2 call; once they are used up RunPodSandbox fails,
 *    and the CNI error containerd returns names the ENIConfig and the annotation that
 *    selected it; EC2 saw no mutation since the switch, and nothing allocated was touched.
 * 4. Prefix delegation in custom-networking mode: the /28 prefixes are on ENIs in the
 *    ENIConfig's 100.64.x subnet, the pods' addresses come out of them, the primary ENI
 *    holds none.
 *
 * Each ends with the nothing-lost check. Needs root and `scripts/ensure-deps.sh
 * --containerd`; run under the containerd lock.
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
  mutationsSince,
  runPods,
  waitForFirstEni,
  waitForSelection,
  waitForStableEnis,
} from '../helpers/custom-net-containerd.js';
import { NODE_NAME } from '../../kit/containerd-node.js';

const ANNOTATION = 'k8s.amazonaws.com/eniConfig';

test('custom networking: a missing ENIConfig fails RunPodSandbox naming it and its annotation; no EC2 mutation, nothing touched', async (t) => {
  // One ENI of 14, kept full (MINIMUM_IP_TARGET=14) and grown only when none is free (WARM_IP_TARGET=1):
  // the ENI limit (4 on m5.xlarge) is far, so only the ENIConfig can stop the growth.
  const { n, zone } = await customNetNode({ ipamdEnv: { WARM_IP_TARGET: '1', MINIMUM_IP_TARGET: '14' } });
  t.after(() => n.close());
  const podSubnet = n.extraSubnets[0]!;
  n.kube.upsertEniConfig(zone, { subnet: podSubnet.subnetId, securityGroups: POD_GROUPS });
  await n.startIpamd();
  await waitForSelection(n, 'ok', podSubnet.subnetId);
  await waitForFirstEni(n);
  const first = await runPods(n, 'first', 2);
  const enis = await waitForStableEnis(n);
  assert.equal(enis, 2, 'the primary ENI and one pod ENI at the switch');
  const ipsBefore = new Map(instanceEnis(n.sim, n.instanceId).map((e) => [e.networkInterfaceId, [...e.secondaryIps]]));

  // The node now names an ENIConfig nobody created.
  n.kube.setNodeMetadata(NODE_NAME, { annotations: { [ANNOTATION]: 'pods-missing' } });
  const sel = await waitForSelection(n, 'missing');
  assert.equal(sel.selectedBy, `annotation ${ANNOTATION}=pods-missing`);
  const atSwitch = n.sim.calls.length;
  t.diagnostic(`at the switch (${enis} ENIs): ${describeEnis(n.sim, n.instanceId).join(' | ')}`);

  // The IPs already on the ENIs still serve (no EC2 call needed)...
  const warm = (enis - 1) * 14 - first.length;
  const served = await runPods(n, 'warm', warm);
  for (const p of served) assert.ok(inCidr(p.ip, podSubnet.cidr), `${p.name} ${p.ip} from the warm pool`);
  // ...then the next pod fails, with the reason through the CNI error containerd returns.
  const err = await n.runPod('one-too-many').then(
    (p) => assert.fail(`RunPodSandbox should fail once the warm IPs are used up, got ${p.ip}`),
    (e: Error) => e,
  );
  t.diagnostic(`RunPodSandbox error: ${err.message}`);
  t.diagnostic(`mutations since the switch: ${mutationsSince(n.sim, atSwitch).join(' | ') || 'none'}`);
  assert.match(
    err.message,
    /ENIConfig "pods-missing" \(annotation k8s\.amazonaws\.com\/eniConfig=pods-missing\) is missing/,
  );
  assert.match(err.message, /no ENI is created/);

  assert.deepEqual(mutationsSince(n.sim, atSwitch), [], 'no EC2 mutation since the ENIConfig went missing');
  const after = new Map(instanceEnis(n.sim, n.instanceId).map((e) => [e.networkInterfaceId, [...e.secondaryIps]]));
  assert.deepEqual(after, ipsBefore, 'the ENIs and their secondary IPs are as before the switch');
  const byIp = new Map((await n.allocations()).map((a) => [a.ipv4, a.containerID]));
  for (const p of [...first, ...served]) assert.equal(byIp.get(p.ip), p.id, `${p.name} still holds ${p.ip}`);
  for (const line of describeEnis(n.sim, n.instanceId)) t.diagnostic(line);
  t.diagnostic(`EC2 calls before the switch: ${JSON.stringify(callCounts(n.sim, 0, atSwitch))}`);
  t.diagnostic(`EC2 calls after the switch: ${JSON.stringify(callCounts(n.sim, atSwitch))}`);
  await n.assertNothingLost();
});

test('custom networking with prefix delegation: /28 prefixes on ENIs in the ENIConfig subnet serve the pods', async (t) => {
  const { n, zone } = await customNetNode({ ipamdEnv: { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1' } });
  t.after(() => n.close());
  const podSubnet = n.extraSubnets[0]!;
  n.kube.upsertEniConfig(zone, { subnet: podSubnet.subnetId, securityGroups: POD_GROUPS });
  await n.startIpamd();
  await waitForSelection(n, 'ok', podSubnet.subnetId);
  const pods = await runPods(n, 'pd', 20);

  const [primary, ...secondary] = instanceEnis(n.sim, n.instanceId);
  assert.deepEqual(primary!.ipv4Prefixes, [], 'the primary ENI holds no prefix');
  assert.deepEqual(primary!.secondaryIps, [], 'nor a secondary IP');
  assert.ok(secondary.length >= 1);
  for (const e of secondary) {
    assert.equal(e.subnetId, podSubnet.subnetId, `${e.networkInterfaceId} is in the ENIConfig subnet`);
    assert.deepEqual(e.securityGroupIds, POD_GROUPS);
    for (const p of e.ipv4Prefixes)
      assert.ok(inCidr(p.split('/')[0]!, podSubnet.cidr), `prefix ${p} in ${podSubnet.cidr}`);
  }
  const prefixes = secondary.flatMap((e) => e.ipv4Prefixes);
  assert.ok(prefixes.length >= 2, `20 pods need two /28s: ${prefixes.join(' ')}`);
  for (const p of pods)
    assert.ok(
      prefixes.some((x) => inCidr(p.ip, x)),
      `${p.name} ${p.ip} comes out of one of the ENIs' prefixes ${prefixes.join(' ')}`,
    );
  for (const line of describeEnis(n.sim, n.instanceId)) t.diagnostic(line);
  t.diagnostic(`EC2 calls: ${JSON.stringify(callCounts(n.sim))}`);
  await n.assertNothingLost();
});
