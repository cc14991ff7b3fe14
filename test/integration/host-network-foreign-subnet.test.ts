/**
 * A pod on an ENI in another subnet than the node's (custom networking: the VPC's
 * secondary block 100.64.0.0/16), proven with real TCP (docs/design.md#7-host-networking).
 * The ENIs are the simulated cloud's: ipamd's start-up discovery (real IMDS and EC2 reads
 * over HTTP) puts them in the datastore, as after a restart, and ipamd's host networking
 * sets the node up from that; the veths carry the ENIs' MACs. Topology (created here,
 * removed even on failure; nothing touches the real host's namespace):
 *
 *   pod   <pod ip> (a 100.64.0.x secondary IP of ENI 2, wired by the real plugin ADD)
 *   node  eth0 <node ip>/24 = primary ENI in 10.0.0.0/24; eth1 = ENI 2 (device 1) in 100.64.0.0/19
 *   vpc   br0 10.0.0.1/24 and br1 100.64.0.1/19 (the two subnets' VPC routers);
 *         lo: 10.0.5.10 (VPC host), 100.64.40.10 (VPC host, secondary block), 203.0.113.10 (outside)
 *
 * Servers in vpc answer with the peer address they see; the node's tx counters tell
 * which ENI carried the flow. The second test runs the real ipamd (host networking applied
 * in the node namespace through ENI_IPAM_CNI_EXEC_NETNS) and restarts it after the ENI's
 * routes were lost, and while the VPC gains CIDR blocks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { execPlugin } from '../../kit/cni-exec.js';
import { netnsMaker, type Netns } from '../../kit/netns.js';
import { startIpamd, type IpamdProcess } from '../../kit/ipamd-process.js';
import { SimCloud } from '../../sim/index.js';
import { Ec2Api } from '../../ipamd/cloud/ec2.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { discoverNode, loadInventory } from '../../ipamd/startup/discover.js';
import { HostNetwork } from '../../ipamd/network/host-network.js';
import { startCniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';
import { waitFor } from '../../kit/wait.js';
import { inNs, ip, ipj, macOf, probe, sh, startEchoServers } from '../helpers/vpc-netns.js';

const log = pino({ level: 'silent' });
const PORT = 8080;
const VPC_HOST = '10.0.5.10';
const VPC2_HOST = '100.64.40.10';
const OUTSIDE = '203.0.113.10';
const DEVS = ['eth0', 'eth1'];

/** What must not change on the real host: its ip rules and nat table. */
const hostSnapshot = async () =>
  (await sh('ip', ['rule'])) +
  (await sh('iptables-nft-save', ['-t', 'nat']).catch(() => '(none)'))
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/g, ''))
    .join('\n');

/** The test bed: the simulated cloud with the node's ENIs, and the vpc and node namespaces wired as in the header. */
async function buildBed(t: { after(fn: () => unknown): void }, tag: string) {
  // The cloud: node in 10.0.0.0/24, an ENI of ours in 100.64.0.0/19 attached at device 1.
  ensureDummyAwsCredentials();
  const sim = new SimCloud({ secondaryVpcCidrs: ['100.64.0.0/16'] });
  await sim.start();
  t.after(() => sim.stop());
  const nodeSubnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
  const podSubnet = sim.addSubnet({ cidr: '100.64.0.0/19' });
  const inst = sim.launchInstance({ instanceType: 'm5.large', subnetId: nodeSubnet.subnetId });
  const ec2 = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint, backoff: { baseMs: 10, capMs: 20 } });
  t.after(() => ec2.close());
  const created = await ec2.createEni({
    subnetId: podSubnet.subnetId,
    description: `aws-K8S-${inst.instanceId}`,
    secondaryCount: 2,
    tags: { 'node.k8s.amazonaws.com/instance_id': inst.instanceId },
  });
  await ec2.attachEni(created.eniId, inst.instanceId, 1);
  const attached = await ec2.describeEnisByFilters({ 'attachment.instance-id': [inst.instanceId] });
  const primaryEni = attached.find((e) => e.attachment?.deviceIndex === 0)!;
  const eni2 = attached.find((e) => e.eniId === created.eniId)!;
  const nodeIp = primaryEni.primaryIp;

  // The namespaces: vpc and node, then the two ENIs as veths with the ENIs' MACs.
  const mk = netnsMaker(t, 'fs', tag);
  const vpc = await mk('vpc');
  const node = await mk('node');
  for (const ns of [vpc, node])
    for (const k of ['all', 'default']) await inNs(ns, 'sysctl', '-qw', `net/ipv6/conf/${k}/disable_ipv6=1`);
  const routers = [
    ['br0', '10.0.0.1/24'],
    ['br1', '100.64.0.1/19'],
  ] as const;
  for (const [br, addr] of routers) {
    await ip(vpc, 'link', 'add', 'name', br, 'type', 'bridge');
    await ip(vpc, 'addr', 'add', addr, 'dev', br);
    await ip(vpc, 'link', 'set', 'dev', br, 'up');
  }
  for (const h of [VPC_HOST, VPC2_HOST, OUTSIDE]) await ip(vpc, 'addr', 'add', `${h}/32`, 'dev', 'lo');
  // Each router answers ARP on its own subnet only (Linux would answer for any of its addresses on any link),
  // so a table pointing at the wrong subnet's router fails as it does in a VPC.
  await inNs(vpc, 'sysctl', '-qw', 'net/ipv4/conf/all/arp_ignore=1');
  for (const [n, eni] of [primaryEni, eni2].entries()) {
    const name = `fs${n}${tag}`;
    await sh('ip', [
      ...['link', 'add', 'name', name, 'address', eni.mac, 'netns', node.name],
      ...['type', 'veth', 'peer', 'name', `ven${n}`, 'netns', vpc.name],
    ]);
    await ip(node, 'link', 'set', 'dev', name, 'name', `eth${n}`);
    await ip(vpc, 'link', 'set', 'dev', `ven${n}`, 'mtu', '9001', 'master', routers[n]![0], 'up');
  }
  // The instance's own config of the primary ENI (ipamd leaves device 0 alone), and node-init's sysctls.
  await ip(node, 'link', 'set', 'dev', 'eth0', 'mtu', '9001', 'up');
  await ip(node, 'addr', 'add', `${nodeIp}/24`, 'dev', 'eth0');
  await ip(node, 'route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'eth0');
  for (const kv of ['net/ipv4/ip_forward=1', 'net/ipv4/conf/all/rp_filter=2', 'net/ipv4/conf/eth0/rp_filter=2'])
    await inNs(node, 'sysctl', '-qw', kv);
  // The VPC fabric is static: it knows which ENI holds which IP.
  const [br0Mac, br1Mac] = [await macOf(vpc, 'br0'), await macOf(vpc, 'br1')];
  await ip(node, 'neigh', 'replace', '10.0.0.1', 'lladdr', br0Mac, 'dev', 'eth0', 'nud', 'permanent');
  await ip(node, 'neigh', 'replace', '100.64.0.1', 'lladdr', br1Mac, 'dev', 'eth1', 'nud', 'permanent');
  await ip(vpc, 'neigh', 'replace', nodeIp, 'lladdr', primaryEni.mac, 'dev', 'br0', 'nud', 'permanent');
  for (const a of [eni2.primaryIp, ...eni2.secondaryIps])
    await ip(vpc, 'neigh', 'replace', a, 'lladdr', eni2.mac, 'dev', 'br1', 'nud', 'permanent');
  return { sim, inst, primaryEni, eni2, nodeIp, vpc, node, mk };
}

/** ENI 2's address has its subnet's prefix length; table 2 routes through its subnet's router. */
async function assertEni2Table(node: Netns, eni2Ip: string): Promise<void> {
  const [eth1] = await ipj(node, 'addr', 'show', 'dev', 'eth1');
  assert.ok(
    eth1.addr_info.some((a: { local: string; prefixlen: number }) => a.local === eni2Ip && a.prefixlen === 19),
    `ENI 2's address with its subnet's prefix length: ${JSON.stringify(eth1.addr_info)}`,
  );
  const table2 = (await ip(node, 'route', 'show', 'table', '2'))
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .sort();
  assert.deepEqual(
    table2,
    ['100.64.0.1 dev eth1 scope link', 'default via 100.64.0.1 dev eth1'],
    "its subnet's router",
  );
}

test('pod on a 100.64.x ENI: VPC traffic (both blocks) leaves un-NATed through its ENI, the rest SNATed or, with external SNAT, through its ENI', async (t) => {
  const hostBefore = await hostSnapshot();
  const { sim, inst, eni2: created, nodeIp, vpc, node, mk } = await buildBed(t, `a${process.pid}`);
  // ipamd's start-up discovery and datastore load, as after a restart.
  const inv = await discoverNode({
    imdsEndpoint: sim.imdsEndpointFor(inst.instanceId),
    ec2Endpoint: sim.ec2Endpoint,
    log,
  });
  t.after(() => inv.ec2.close());
  const ds = new Datastore(30_000);
  loadInventory(ds, inv, Date.now());
  const eni2 = ds.getEni(created.eniId)!;
  const podIp = ds.eniIps(created.eniId)[0]!;
  assert.deepEqual(inv.vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16']);
  assert.match(podIp, /^100\.64\.0\.\d+$/);

  // ipamd's host networking from what discovery found.
  const hn = new HostNetwork({
    netns: node.path,
    eniMtu: 9001,
    externalSnat: false,
    excludeSnatCidrs: [],
    iptablesBackend: 'nft',
    linkWaitMs: 0,
  });
  await hn.setupNode({ primaryMac: inv.instance.primaryMac, nodeIp, vpcCidrs: inv.vpcCidrs });
  for (const eni of ds.listEnis()) await hn.setupEni(eni);
  await assertEni2Table(node, eni2.primaryIp);
  const rules = await ip(node, 'rule');
  assert.match(rules, /1024:\s+from all to 100\.64\.0\.0\/16 goto 1026/, 'the secondary block is VPC');
  assert.match(rules, /1024:\s+from all to 10\.0\.0\.0\/16 goto 1026/);
  assert.match(await inNs(node, 'iptables-nft-save', '-t', 'nat'), /-d 100\.64\.0\.0\/16 .*-j RETURN/);

  // The pod, wired by the real plugin; the ipamd stand-in answers with ENI 2's table.
  const standin = await startCniBackendStandIn();
  t.after(() => standin.close());
  standin.addReply = () => ({
    ipv4_addr: podIp,
    device_number: eni2.deviceNumber,
    route_table_id: eni2.deviceNumber + 1,
    vpc_v4_cidrs: inv.vpcCidrs,
  });
  const pod = await mk('pod');
  const config = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: standin.socket, mtu: 9001 };
  const id = randomBytes(32).toString('hex');
  const cni = (command: 'ADD' | 'DEL') =>
    execPlugin({
      command,
      containerId: id,
      netns: pod.path,
      ifName: 'eth0',
      config,
      prefix: ['nsenter', `--net=${node.path}`],
    });
  const add = await cni('ADD');
  assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
  assert.match(await ip(node, 'rule'), new RegExp(`1536:\\s+from ${podIp.replace(/\./g, '\\.')} lookup 2`));

  const stopServers = await startEchoServers(vpc, [VPC_HOST, VPC2_HOST, OUTSIDE], PORT);
  t.after(stopServers);
  const viaEni2 = (p: { tx: Record<string, number> }) => p.tx.eth1! >= 3 && p.tx.eth0 === 0;
  const viaPrimary = (p: { tx: Record<string, number> }) => p.tx.eth0! >= 3 && p.tx.eth1 === 0;

  const toVpc = await probe(node, DEVS, pod, VPC_HOST, PORT);
  assert.equal(toVpc.seenAs, podIp, 'pod → 10.0.x host: not NATed');
  assert.ok(viaEni2(toVpc), `pod → 10.0.x host leaves through its ENI: ${JSON.stringify(toVpc)}`);
  const toVpc2 = await probe(node, DEVS, pod, VPC2_HOST, PORT);
  assert.equal(toVpc2.seenAs, podIp, 'pod → 100.64.x host (secondary block): not NATed');
  assert.ok(viaEni2(toVpc2), `pod → 100.64.x host leaves through its ENI: ${JSON.stringify(toVpc2)}`);
  const out = await probe(node, DEVS, pod, OUTSIDE, PORT);
  assert.equal(out.seenAs, nodeIp, 'pod → outside the VPC: SNATed to the node IP');
  assert.ok(viaPrimary(out), `pod → outside leaves through the primary ENI: ${JSON.stringify(out)}`);

  // AWS_VPC_K8S_CNI_EXTERNALSNAT=true: everything leaves through the pod's ENI, never NATed.
  const ext = new HostNetwork({
    netns: node.path,
    eniMtu: 9001,
    externalSnat: true,
    excludeSnatCidrs: [],
    iptablesBackend: 'nft',
  });
  await ext.setupNode({ primaryMac: inv.instance.primaryMac, nodeIp, vpcCidrs: inv.vpcCidrs });
  const extOut = await probe(node, DEVS, pod, OUTSIDE, PORT);
  assert.equal(extOut.seenAs, podIp, 'external SNAT: the outside sees the pod IP');
  assert.ok(viaEni2(extOut), `external SNAT: pod → outside leaves through its ENI: ${JSON.stringify(extOut)}`);
  const extVpc = await probe(node, DEVS, pod, VPC_HOST, PORT);
  assert.equal(extVpc.seenAs, podIp);
  assert.ok(viaEni2(extVpc), `external SNAT: pod → VPC through its ENI: ${JSON.stringify(extVpc)}`);

  const del = await cni('DEL');
  assert.equal(del.code, 0, `DEL: ${del.stdout} ${del.stderr}`);
  await hn.teardownEni(eni2);
  assert.equal((await ip(node, 'route', 'show', 'table', '2')).trim(), '');
  assert.equal(await hostSnapshot(), hostBefore, "the real host's rules and nat table are unchanged");
});

test('the real ipamd sets the foreign-subnet ENI up with its subnet router at start; a restart repairs it; new VPC blocks are picked up', async (t) => {
  const { sim, eni2, node } = await buildBed(t, `b${process.pid}`);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-fs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // ipamd runs in the test's namespace (the simulated cloud is on its loopback); its host networking goes to the node's.
  const env: NodeJS.ProcessEnv = {
    AWS_EC2_ENDPOINT: sim.ec2Endpoint,
    AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
    ENI_IPAM_SOCKET: path.join(dir, 'ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json'),
    AWS_VPC_K8S_CNI_LOGLEVEL: 'info',
    ENI_IPAM_HOST_NETWORK: 'true',
    ENI_IPAM_CNI_EXEC_NETNS: node.path,
    DISABLE_NETWORK_RESOURCE_PROVISIONING: 'true',
    AWS_VPC_ENI_MTU: '9001',
    ENI_IPAM_RECONCILE_INTERVAL: '500ms', // also the period of the VPC CIDR block re-read
  };
  let d: IpamdProcess | undefined;
  t.after(() => d?.stop(5000));
  const start = async () => {
    d = await startIpamd({ env, logFile: path.join(dir, 'ipamd.log') });
  };
  const nat = async () =>
    (await inNs(node, 'iptables-nft-save', '-t', 'nat').catch(() => '')) +
    (await inNs(node, 'iptables-legacy-save', '-t', 'nat').catch(() => ''));

  await start();
  await assertEni2Table(node, eni2.primaryIp);
  assert.match(await ip(node, 'rule'), /1024:\s+from all to 100\.64\.0\.0\/16 goto 1026/);
  assert.match(await nat(), /-d 100\.64\.0\.0\/16 .*-j RETURN/);
  await d!.stop(5000);
  d = undefined;

  // While ipamd is down: its ENI's routes and address are lost, and the VPC gets a third block.
  await ip(node, 'route', 'flush', 'table', '2');
  await ip(node, 'addr', 'flush', 'dev', 'eth1');
  sim.addVpcCidr('100.65.0.0/16');
  await start();
  await assertEni2Table(node, eni2.primaryIp);
  const rules = await ip(node, 'rule');
  for (const c of ['10\\.0\\.0\\.0/16', '100\\.64\\.0\\.0/16', '100\\.65\\.0\\.0/16'])
    assert.match(rules, new RegExp(`1024:\\s+from all to ${c} goto 1026`), rules);
  assert.match(rules, new RegExp(`1535:\\s+from ${eni2.primaryIp.replace(/\./g, '\\.')} lookup 2`));
  assert.match(await nat(), /-d 100\.65\.0\.0\/16 .*-j RETURN/);

  // A block associated while ipamd runs is picked up without a restart.
  sim.addVpcCidr('100.66.0.0/16');
  await waitFor(
    'the new block in the node rules',
    async () => /to 100\.66\.0\.0\/16 goto 1026/.test(await ip(node, 'rule')),
    10_000,
    100,
  );
  assert.match(await nat(), /-d 100\.66\.0\.0\/16 .*-j RETURN/);
  assert.deepEqual((await d!.status()).vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16', '100.65.0.0/16', '100.66.0.0/16']);
});
