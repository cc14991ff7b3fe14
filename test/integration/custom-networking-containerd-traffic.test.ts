/**
 * Custom networking through real containerd, with real TCP (docs/design.md#7-host-networking):
 * ipamd's host networking on (applied in the node namespace through
 * ENI_IPAM_CNI_EXEC_NETNS), the ENIs it creates in the ENIConfig's 100.64.0.0/19 subnet
 * appear in the node namespace as links with their MACs (eni-link-plug.ts, veths into a
 * "vpc" namespace), and the vpc namespace plays the two subnets' routers and three hosts
 * (as in host-network-foreign-subnet.test.ts):
 *
 *   node  eth0 <node ip>/24 (primary ENI, 10.0.0.0/24), eth<d> = the pod's ENI in 100.64.0.0/19
 *   vpc   br0 10.0.0.1/24, br1 100.64.0.1/19; lo: 10.0.5.10, 100.64.40.10 (VPC hosts), 203.0.113.10 (outside)
 *
 * A pod run with RunPodSandbox reaches both VPC blocks with its own address over its ENI's
 * link, and the outside SNATed to the node IP over the primary ENI. Ends with the
 * nothing-lost check. Needs root and `scripts/ensure-deps.sh --containerd`; run under the
 * containerd lock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNamedNetns, type Netns } from '../../kit/netns.js';
import { plugEniLinks } from '../../kit/eni-link-plug.js';
import { inNs, ip, macOf, probe, sh, startEchoServers } from '../helpers/vpc-netns.js';
import {
  POD_GROUPS,
  customNetNode,
  describeEnis,
  inCidr,
  instanceEnis,
  waitForFirstEni,
  waitForSelection,
} from '../helpers/custom-net-containerd.js';

const PORT = 8080;
const VPC_HOST = '10.0.5.10';
const VPC2_HOST = '100.64.40.10';
const OUTSIDE = '203.0.113.10';

test('custom networking through containerd: a 100.64.x pod reaches both VPC blocks as itself over its ENI, the outside as the node', async (t) => {
  const hostRulesBefore = await sh('ip', ['rule']);
  const { n, zone } = await customNetNode({
    ipamdEnv: { ENI_IPAM_HOST_NETWORK: 'true', AWS_VPC_ENI_MTU: '9001' },
  });
  const vpc = await createNamedNetns(`cn-vpc-${process.pid}`).catch(async (e) => {
    await n.close();
    throw e;
  });
  let stopPlug = async (): Promise<void> => undefined;
  let stopServers = (): void => undefined;
  t.after(async () => {
    stopServers();
    await stopPlug();
    await n.close();
    await vpc.remove();
  });
  const node = n.nodeNetns;
  const podSubnet = n.extraSubnets[0]!;
  const nodeIp = n.sim.state.instances.get(n.instanceId)!.privateIpAddress;

  // The VPC: two routers, three hosts; each router answers ARP on its own subnet only.
  // No IPv6 chatter (router solicitations, ND) on links whose tx counters tell which ENI carried a flow.
  for (const ns of [vpc, node])
    for (const k of ['all', 'default']) await inNs(ns, 'sysctl', '-qw', `net/ipv6/conf/${k}/disable_ipv6=1`);
  for (const [br, addr] of [
    ['br0', '10.0.0.1/24'],
    ['br1', '100.64.0.1/19'],
  ] as const) {
    await ip(vpc, 'link', 'add', 'name', br, 'type', 'bridge');
    await ip(vpc, 'addr', 'add', addr, 'dev', br);
    await ip(vpc, 'link', 'set', 'dev', br, 'up');
  }
  for (const h of [VPC_HOST, VPC2_HOST, OUTSIDE]) await ip(vpc, 'addr', 'add', `${h}/32`, 'dev', 'lo');
  await inNs(vpc, 'sysctl', '-qw', 'net/ipv4/conf/all/arp_ignore=1');

  // The hypervisor: every attached ENI is a link in the node namespace; the primary one is configured as the instance does.
  const plug = await plugEniLinks({ sim: n.sim, instanceId: n.instanceId, node, vpc });
  stopPlug = () => plug.stop();
  await ip(node, 'link', 'set', 'dev', 'eth0', 'mtu', '9001', 'up');
  await ip(node, 'addr', 'add', `${nodeIp}/24`, 'dev', 'eth0');
  await ip(node, 'route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'eth0');
  for (const kv of ['net/ipv4/ip_forward=1', 'net/ipv4/conf/all/rp_filter=2', 'net/ipv4/conf/eth0/rp_filter=2'])
    await inNs(node, 'sysctl', '-qw', kv);
  await ip(vpc, 'link', 'set', 'dev', 'vpc0', 'mtu', '9001', 'master', 'br0');

  n.kube.upsertEniConfig(zone, { subnet: podSubnet.subnetId, securityGroups: POD_GROUPS });
  await n.startIpamd();
  await waitForSelection(n, 'ok', podSubnet.subnetId);
  await waitForFirstEni(n);
  const pod = await n.runPod('traffic');
  assert.ok(inCidr(pod.ip, podSubnet.cidr), `${pod.ip} in ${podSubnet.cidr}`);

  // The pod's ENI: its link joins the 100.64.0.0/19 router; the fabric knows where each address lives.
  const primary = instanceEnis(n.sim, n.instanceId)[0]!;
  const eni = instanceEnis(n.sim, n.instanceId).find((e) => e.secondaryIps.includes(pod.ip))!;
  assert.ok(eni && eni.attachment!.deviceIndex > 0, `${pod.ip} is on a secondary ENI`);
  const dev = `eth${eni.attachment!.deviceIndex}`;
  await ip(vpc, 'link', 'set', 'dev', `vpc${eni.attachment!.deviceIndex}`, 'mtu', '9001', 'master', 'br1');
  const table = eni.attachment!.deviceIndex + 1;
  assert.match(await ip(node, 'rule'), new RegExp(`from ${pod.ip.replace(/\./g, '\\.')} lookup ${table}`));
  assert.match(await ip(node, 'rule'), /from all to 100\.64\.0\.0\/16 goto/, 'the secondary block is VPC');
  const [br0Mac, br1Mac] = [await macOf(vpc, 'br0'), await macOf(vpc, 'br1')];
  await ip(node, 'neigh', 'replace', '10.0.0.1', 'lladdr', br0Mac, 'dev', 'eth0', 'nud', 'permanent');
  await ip(node, 'neigh', 'replace', '100.64.0.1', 'lladdr', br1Mac, 'dev', dev, 'nud', 'permanent');
  await ip(vpc, 'neigh', 'replace', nodeIp, 'lladdr', primary.macAddress, 'dev', 'br0', 'nud', 'permanent');
  await ip(vpc, 'neigh', 'replace', pod.ip, 'lladdr', eni.macAddress, 'dev', 'br1', 'nud', 'permanent');
  t.diagnostic(`pod ${pod.ip} on ${eni.networkInterfaceId} (${dev}); ${describeEnis(n.sim, n.instanceId).join(' | ')}`);

  stopServers = await startEchoServers(vpc, [VPC_HOST, VPC2_HOST, OUTSIDE], PORT);
  const podNs = { path: (await n.cri.netnsPath(pod.id))!, name: 'pod' } as Netns;
  const devs = ['eth0', dev];
  const viaEni = (p: { tx: Record<string, number> }) => p.tx[dev]! >= 3 && p.tx.eth0 === 0;
  const viaPrimary = (p: { tx: Record<string, number> }) => p.tx.eth0! >= 3 && p.tx[dev] === 0;
  const toVpc = await probe(node, devs, podNs, VPC_HOST, PORT, { flow: true });
  assert.equal(toVpc.seenAs, pod.ip, `pod → 10.0.x host: not NATed ${JSON.stringify(toVpc)}`);
  assert.ok(viaEni(toVpc), `pod → 10.0.x host leaves through its ENI: ${JSON.stringify(toVpc)}`);
  const toVpc2 = await probe(node, devs, podNs, VPC2_HOST, PORT, { flow: true });
  assert.equal(toVpc2.seenAs, pod.ip, `pod → 100.64.x host: not NATed ${JSON.stringify(toVpc2)}`);
  assert.ok(viaEni(toVpc2), `pod → 100.64.x host leaves through its ENI: ${JSON.stringify(toVpc2)}`);
  const out = await probe(node, devs, podNs, OUTSIDE, PORT, { flow: true });
  assert.equal(out.seenAs, nodeIp, `pod → outside the VPC: SNATed to the node IP ${JSON.stringify(out)}`);
  assert.ok(viaPrimary(out), `pod → outside leaves through the primary ENI: ${JSON.stringify(out)}`);
  t.diagnostic(`probes: ${JSON.stringify({ toVpc, toVpc2, out })}`);
  await n.assertNothingLost();
  assert.equal(await sh('ip', ['rule']), hostRulesBefore, "the test namespace's own ip rules are unchanged");
});
