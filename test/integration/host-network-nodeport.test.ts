/**
 * NodePort support (ipamd/network/connmark.ts, docs/design.md#nodeport-and-the-connection-mark)
 * proven with real TCP in real namespaces. A VPC client connects to the node's primary
 * address on a NodePort; a DNAT rule standing for kube-proxy sends it to a pod whose
 * address lives on the secondary ENI (wired by the real plugin ADD). The VPC drops a
 * packet that leaves an ENI with an address that ENI does not own (EC2's source/dest
 * check), played here by strict rp_filter on the VPC router's subnet of that ENI. So the
 * TCP connection completes only when the pod's replies leave through the primary ENI.
 *
 *   pod   10.0.1.21 (a secondary IP of ENI 2), echo server on 8080
 *   node  eth0 10.0.0.10/24 = primary ENI; eth1 = ENI 2 (device 1, 10.0.1.20/24, table 2);
 *         nat PREROUTING -d 10.0.0.10 --dport 30080 DNAT → 10.0.1.21:8080 (kube-proxy's part)
 *   vpc   br0 10.0.0.1/24 (the client), br1 10.0.1.1/24, rp_filter strict
 *
 * Off, the same connection times out and ENI 2 carried the replies; on, it completes,
 * ENI 2 sent none of its replies, the mark rule counted the connection; off again removes
 * every rule. Each probe counts only its own connection's replies: the refused connection
 * of the "off" probe keeps retransmitting SYN-ACKs through ENI 2 for seconds after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execPlugin } from '../../kit/cni-exec.js';
import { netnsMaker, type Netns } from '../../kit/netns.js';
import { HostNetwork } from '../../ipamd/network/host-network.js';
import { startCniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { inNs, ip, macOf, probe, sh, startEchoServers } from '../helpers/vpc-netns.js';

const NODE_IP = '10.0.0.10';
const CLIENT = '10.0.0.1';
const ENI2 = { eniId: 'eni-0nodeport000002', deviceNumber: 1, primaryIp: '10.0.1.20', subnetCidr: '10.0.1.0/24' };
const POD_IP = '10.0.1.21';
const NODE_PORT = 30080;
const VPC_CIDRS = ['10.0.0.0/16'];
const DEVS = ['eth0', 'eth1'];

/** The namespaces of the header, with the ENIs as veths; removed after the test, on failure too. */
async function buildBed(t: { after(fn: () => unknown): void }, tag: string) {
  const mk = netnsMaker(t, 'np', tag);
  const vpc = await mk('vpc');
  const node = await mk('node');
  const routers = [
    ['br0', '10.0.0.1/24'],
    ['br1', '10.0.1.1/24'],
  ] as const;
  for (const [br, addr] of routers) {
    await ip(vpc, 'link', 'add', 'name', br, 'type', 'bridge');
    await ip(vpc, 'addr', 'add', addr, 'dev', br);
    await ip(vpc, 'link', 'set', 'dev', br, 'up');
  }
  // EC2's source/dest check: an ENI's packets must carry an address it owns.
  for (const k of ['all', 'br0', 'br1']) await inNs(vpc, 'sysctl', '-qw', `net/ipv4/conf/${k}/rp_filter=1`);
  await inNs(vpc, 'sysctl', '-qw', 'net/ipv4/conf/all/arp_ignore=1');
  const macs: string[] = [];
  for (const n of [0, 1]) {
    const name = `np${n}${tag}`;
    await sh('ip', [
      ...['link', 'add', 'name', name, 'netns', node.name],
      ...['type', 'veth', 'peer', 'name', `ven${n}`, 'netns', vpc.name],
    ]);
    await ip(node, 'link', 'set', 'dev', name, 'name', `eth${n}`);
    await ip(vpc, 'link', 'set', 'dev', `ven${n}`, 'master', routers[n]![0], 'up');
    macs.push(await macOf(node, `eth${n}`));
  }
  await ip(node, 'link', 'set', 'dev', 'eth0', 'up');
  await ip(node, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0');
  await ip(node, 'route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'eth0');
  // node-init's sysctls: forwarding, loose rp_filter on the primary interface.
  for (const kv of ['net/ipv4/ip_forward=1', 'net/ipv4/conf/all/rp_filter=2', 'net/ipv4/conf/eth0/rp_filter=2'])
    await inNs(node, 'sysctl', '-qw', kv);
  await ip(node, 'neigh', 'replace', '10.0.1.1', 'lladdr', await macOf(vpc, 'br1'), 'dev', 'eth1', 'nud', 'permanent');
  for (const a of [ENI2.primaryIp, POD_IP])
    await ip(vpc, 'neigh', 'replace', a, 'lladdr', macs[1]!, 'dev', 'br1', 'nud', 'permanent');
  return { vpc, node, mk, eni2: { ...ENI2, mac: macs[1]! } };
}

/** The pod on ENI 2, wired by the real plugin against the ipamd stand-in, serving on 8080. */
async function addPod(t: { after(fn: () => unknown): void }, node: Netns, mk: (n: string) => Promise<Netns>) {
  const standin = await startCniBackendStandIn();
  t.after(() => standin.close());
  standin.addReply = () => ({
    ipv4_addr: POD_IP,
    device_number: ENI2.deviceNumber,
    route_table_id: ENI2.deviceNumber + 1,
    vpc_v4_cidrs: VPC_CIDRS,
  });
  const pod = await mk('pod');
  const add = await execPlugin({
    command: 'ADD',
    containerId: randomBytes(32).toString('hex'),
    netns: pod.path,
    ifName: 'eth0',
    config: { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: standin.socket, mtu: 9001 },
    prefix: ['nsenter', `--net=${node.path}`],
  });
  assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
  t.after(await startEchoServers(pod, [POD_IP], 8080));
}

const hostNetwork = (node: Netns, nodePortSupport: boolean) =>
  new HostNetwork({
    netns: node.path,
    eniMtu: 9001,
    externalSnat: false,
    excludeSnatCidrs: [],
    iptablesBackend: 'nft',
    linkWaitMs: 0,
    nodePortSupport,
  });

/** Packets the mark rule on the primary interface counted (`-v -x` counters), or -1 when it is absent. */
async function markRulePackets(node: Netns): Promise<number> {
  const out = await inNs(node, 'iptables-nft', '-w', '5', '-t', 'mangle', '-L', 'PREROUTING', '-v', '-x', '-n');
  const line = out.split('\n').find((l) => /CONNMARK/.test(l) && /eth0/.test(l));
  return line ? Number(line.trim().split(/\s+/)[0]) : -1;
}

test('NodePort to a pod on a secondary ENI: answered through the primary ENI only with the connection mark', async (t) => {
  const { vpc, node, mk, eni2 } = await buildBed(t, `a${process.pid}`);
  const off = hostNetwork(node, false);
  await off.setupNode({ primaryIf: 'eth0', nodeIp: NODE_IP, vpcCidrs: VPC_CIDRS });
  await off.setupEni(eni2);
  await addPod(t, node, mk);
  const ipt = await off.ipt();
  await ipt.exec('nat', [
    ...['-A', 'PREROUTING', '-d', NODE_IP, '-p', 'tcp', '--dport', String(NODE_PORT)],
    ...['-j', 'DNAT', '--to-destination', `${POD_IP}:8080`],
  ]);

  // Off: the pod's replies take ENI 2's table and the VPC drops them.
  const before = await probe(node, DEVS, vpc, NODE_IP, NODE_PORT, { flow: true });
  assert.notEqual(before.seenAs, CLIENT, `without the mark the connection must fail: ${JSON.stringify(before)}`);
  assert.ok(before.tx.eth1! > 0, `the replies left through ENI 2: ${JSON.stringify(before.tx)}`);
  assert.equal(await markRulePackets(node), -1);

  // On (applied twice: the second run changes nothing).
  const on = hostNetwork(node, true);
  for (let i = 0; i < 2; i++) await on.setupNode({ primaryIf: 'eth0', nodeIp: NODE_IP, vpcCidrs: VPC_CIDRS });
  const rules = await ip(node, 'rule');
  assert.equal(rules.match(/1023:\s+from all fwmark 0x80\/0x80 lookup main/g)?.length, 1, rules);
  const mangle = await inNs(node, 'iptables-nft-save', '-t', 'mangle');
  assert.equal(mangle.match(/AWS, primary ENI/g)?.length, 2, mangle);
  assert.match(mangle, /-i eth0 .*--dst-type LOCAL --limit-iface-in .*CONNMARK (--set-xmark|--or-mark) 0x80/);
  assert.match(mangle, /-i eni\+ .*CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80/);
  const after = await probe(node, DEVS, vpc, NODE_IP, NODE_PORT, { flow: true });
  assert.equal(after.seenAs, CLIENT, `the pod answered the client, un-NATed: ${JSON.stringify(after)}`);
  assert.equal(after.tx.eth1, 0, `ENI 2 sent nothing: ${JSON.stringify(after.tx)}`);
  assert.ok(after.tx.eth0! > 0, 'the replies left through the primary ENI');
  assert.ok((await markRulePackets(node)) > 0, 'the mark rule counted the connection');

  // Off again: every rule is removed and the connection fails as before.
  await off.setupNode({ primaryIf: 'eth0', nodeIp: NODE_IP, vpcCidrs: VPC_CIDRS });
  assert.doesNotMatch(await ip(node, 'rule'), /fwmark/);
  assert.doesNotMatch(await inNs(node, 'iptables-nft-save', '-t', 'mangle'), /AWS, primary ENI/);
  const again = await probe(node, DEVS, vpc, NODE_IP, NODE_PORT, { flow: true });
  assert.notEqual(again.seenAs, CLIENT);
});

test('NodePort rules follow a changed mark and veth prefix in one pass', async (t) => {
  const { node } = await buildBed(t, `b${process.pid}`);
  const base = { netns: node.path, eniMtu: 9001, externalSnat: false, excludeSnatCidrs: [], linkWaitMs: 0 };
  const spec = { primaryIf: 'eth0', nodeIp: NODE_IP, vpcCidrs: VPC_CIDRS };
  await new HostNetwork({ ...base, iptablesBackend: 'nft' }).setupNode(spec);
  await new HostNetwork({ ...base, iptablesBackend: 'nft', connmark: 0x4, vethPrefix: 'pod' }).setupNode(spec);
  const rules = await ip(node, 'rule');
  assert.match(rules, /1023:\s+from all fwmark 0x4\/0x4 lookup main/);
  assert.doesNotMatch(rules, /0x80/);
  const mangle = await inNs(node, 'iptables-nft-save', '-t', 'mangle');
  assert.equal(mangle.match(/AWS, primary ENI/g)?.length, 2, mangle);
  assert.match(mangle, /-i pod\+ .*--restore-mark --nfmask 0x4 --ctmask 0x4/);
  assert.doesNotMatch(mangle, /0x80|eni\+/);
});
