/**
 * ipamd's host networking (ipamd/network) and the plugin's pod rules, proven with real
 * TCP, once with iptables-nft and once with iptables-legacy. Topology (all created here,
 * removed even on failure; nothing touches the real host's namespace):
 *
 *   pod-a 10.0.0.21 (primary ENI, table main)   pod-b 10.0.0.20 (secondary ENI, table 2)
 *        \  veth (real plugin ADD, ipamd stand-in)  /
 *   node   eth0 10.0.0.4/24 = primary ENI, eth1 = secondary ENI (device 1), both veths into
 *   vpc    br0 10.0.0.1/24 (VPC router); lo: 203.0.113.10 (outside), 198.51.100.7 (excluded)
 *
 * The VPC fabric is static: permanent neighbour entries both ways (the VPC knows which
 * ENI holds which IP), IPv6 off, so the node's per-link tx counters count only our TCP.
 * Servers in vpc echo the peer address; the counters tell which ENI carried the flow.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { execPlugin } from '../../kit/cni-exec.js';
import { netnsMaker, type Netns } from '../../kit/netns.js';
import { HostNetwork } from '../../ipamd/network/host-network.js';
import { detectIptablesBackend, type IptablesBackend } from '../../ipamd/network/iptables.js';
import { SNAT_CHAIN } from '../../ipamd/network/snat.js';
import { startCniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { waitFor } from '../../kit/wait.js';

const execFileP = promisify(execFile);
const sh = async (cmd: string, args: string[]): Promise<string> => (await execFileP(cmd, args)).stdout;
const inNs = (ns: Netns, cmd: string, ...args: string[]): Promise<string> =>
  sh('nsenter', [`--net=${ns.path}`, cmd, ...args]);
const ip = (ns: Netns, ...args: string[]): Promise<string> => inNs(ns, 'ip', ...args);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const ipj = async (ns: Netns, ...args: string[]): Promise<any[]> => JSON.parse((await ip(ns, '-j', ...args)) || '[]');
const macOf = async (ns: Netns, dev: string): Promise<string> => (await ipj(ns, 'link', 'show', 'dev', dev))[0].address;

const VPC_CIDR = '10.0.0.0/16';
const SUBNET = '10.0.0.0/24';
const NODE_IP = '10.0.0.4';
const ENI2_IP = '10.0.0.6';
const OUTSIDE = '203.0.113.10';
const EXCLUDED = '198.51.100.7';
const POD_A = '10.0.0.21';
const POD_B = '10.0.0.20';
const PORT = 8080;

/** What must not change on the real host: netfilter (both backends, nft if installed) and ip rules. */
async function hostSnapshot(): Promise<string> {
  const parts: string[] = [];
  for (const [cmd, args] of [
    ['iptables-nft-save', []],
    ['iptables-legacy-save', []],
    ['ip', ['rule']],
    ['nft', ['list', 'ruleset']],
  ] as const) {
    parts.push(await sh(cmd, [...args]).catch((e: Error & { code?: string }) => `(${cmd}: ${e.code ?? 'failed'})`));
  }
  return parts
    .join('\n')
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/g, ''))
    .join('\n');
}

/** Rules, routes and the nat table of the node: identical before/after a re-apply. */
async function nodeState(node: Netns, backend: IptablesBackend): Promise<string> {
  const nat = (await inNs(node, `iptables-${backend}-save`, '-t', 'nat'))
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/g, ''));
  return [
    await ip(node, 'rule'),
    await ip(node, '-4', 'route', 'show', 'table', 'all'),
    await ip(node, '-4', 'addr'),
    ...nat,
  ].join('\n');
}

/** tx packets of eth0 and eth1 in the node netns. */
async function txPackets(node: Netns): Promise<{ eth0: number; eth1: number }> {
  const links = await ipj(node, '-s', 'link', 'show');
  const tx = (dev: string) => Number(links.find((l) => l.ifname === dev).stats64.tx.packets);
  return { eth0: tx('eth0'), eth1: tx('eth1') };
}

/** Our environment without NODE_EXTRA_CA_CERTS (it adds ~130 ms to every Node start here). */
function nodeEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

const CLIENT = `const s=require('net').connect({host:process.argv[1],port:${PORT},timeout:3000});let d='';
s.on('data',b=>d+=b);s.on('end',()=>{console.log(d.trim());process.exit(0)});
s.on('timeout',()=>{console.log('timeout');process.exit(1)});s.on('error',e=>{console.log(e.code);process.exit(1)});`;

/** Connects from `pod` to `host`; returns the peer address the server saw and which node ENI links sent packets. */
async function probe(node: Netns, pod: Netns, host: string): Promise<{ seenAs: string; eth0: number; eth1: number }> {
  const before = await txPackets(node);
  const seenAs = (
    await execFileP('nsenter', [`--net=${pod.path}`, process.execPath, '-e', CLIENT, host], { env: nodeEnv() }).then(
      (r) => r.stdout,
      (e: { stdout?: string }) => e.stdout ?? 'failed',
    )
  ).trim();
  const after = await txPackets(node);
  return { seenAs, eth0: after.eth0 - before.eth0, eth1: after.eth1 - before.eth1 };
}

async function runScenario(t: { after(fn: () => unknown): void }, backend: IptablesBackend): Promise<void> {
  const tag = `${backend.slice(0, 3)}${process.pid}`;
  const mk = netnsMaker(t, 'hn', tag);
  const vpc = await mk('vpc');
  const node = await mk('node');
  for (const ns of [vpc, node]) {
    for (const k of ['all', 'default']) await inNs(ns, 'sysctl', '-qw', `net/ipv6/conf/${k}/disable_ipv6=1`);
  }

  // The VPC: a bridge with the subnet's router address, and addresses standing for the Internet.
  await ip(vpc, 'link', 'add', 'name', 'br0', 'type', 'bridge');
  await ip(vpc, 'addr', 'add', '10.0.0.1/24', 'dev', 'br0');
  await ip(vpc, 'link', 'set', 'dev', 'br0', 'up');
  await ip(vpc, 'addr', 'add', `${OUTSIDE}/32`, 'dev', 'lo');
  await ip(vpc, 'addr', 'add', `${EXCLUDED}/32`, 'dev', 'lo');
  // Two ENIs: veth pairs node:ethN <-> vpc:venN (in br0), created by path from the test's netns.
  for (const n of [0, 1]) {
    await sh('ip', [
      'link',
      'add',
      'name',
      `hn${n}${tag}`,
      'address',
      `02:00:0a:00:00:0${n + 1}`,
      'netns',
      node.name,
      'type',
      'veth',
      'peer',
      'name',
      `ven${n}`,
      'netns',
      vpc.name,
    ]);
    await ip(node, 'link', 'set', 'dev', `hn${n}${tag}`, 'name', `eth${n}`);
    await ip(vpc, 'link', 'set', 'dev', `ven${n}`, 'mtu', '9001', 'master', 'br0', 'up');
  }
  // The instance's own config of the primary ENI (ipamd leaves device 0 alone).
  await ip(node, 'link', 'set', 'dev', 'eth0', 'mtu', '9001', 'up');
  await ip(node, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0');
  await ip(node, 'route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'eth0');
  const [eth0Mac, eth1Mac, brMac] = [await macOf(node, 'eth0'), await macOf(node, 'eth1'), await macOf(vpc, 'br0')];
  for (const dev of ['eth0', 'eth1'])
    await ip(node, 'neigh', 'replace', '10.0.0.1', 'lladdr', brMac, 'dev', dev, 'nud', 'permanent');
  for (const [addr, mac] of [
    [NODE_IP, eth0Mac],
    [POD_A, eth0Mac],
    [ENI2_IP, eth1Mac],
    [POD_B, eth1Mac],
  ] as const) {
    await ip(vpc, 'neigh', 'replace', addr, 'lladdr', mac, 'dev', 'br0', 'nud', 'permanent');
  }

  // ipamd's host networking, applied twice: the second run changes nothing.
  const eni2 = {
    eniId: 'eni-00000000000000002',
    mac: eth1Mac,
    deviceNumber: 1,
    primaryIp: ENI2_IP,
    subnetCidr: SUBNET,
    isPrimary: false,
  };
  const primary = {
    eniId: 'eni-00000000000000001',
    mac: eth0Mac,
    deviceNumber: 0,
    primaryIp: NODE_IP,
    subnetCidr: SUBNET,
    isPrimary: true,
  };
  const hn = new HostNetwork({
    netns: node.path,
    eniMtu: 9001,
    externalSnat: false,
    excludeSnatCidrs: ['198.51.100.0/24'],
    iptablesBackend: backend,
    linkWaitMs: 0,
  });
  const apply = async () => {
    const r = await hn.setupNode({ primaryMac: eth0Mac, nodeIp: NODE_IP, vpcCidrs: [VPC_CIDR] });
    for (const eni of [primary, eni2]) await hn.setupEni(eni);
    return r;
  };
  // ipamd checks the sysctls but does not set them: a fresh namespace (ip_forward=0) is reported wrong…
  await inNs(node, 'sysctl', '-qw', 'net/ipv4/conf/eth0/rp_filter=1');
  const unset = await hn.setupNode({ primaryMac: eth0Mac, nodeIp: NODE_IP, vpcCidrs: [VPC_CIDR] });
  assert.deepEqual(
    unset.sysctls.map((c) => [c.sysctl, c.value, c.ok]),
    [
      ['net.ipv4.ip_forward', '0', false],
      ['net.ipv4.conf.eth0.rp_filter', '1', false],
    ],
  );
  assert.equal(await inNs(node, 'sysctl', '-n', 'net.ipv4.ip_forward'), '0\n', 'ipamd did not set it');
  // …and right once the privileged init container (node-init) has set them.
  for (const kv of ['net/ipv4/ip_forward=1', 'net/ipv4/conf/all/rp_filter=2', 'net/ipv4/conf/eth0/rp_filter=2'])
    await inNs(node, 'sysctl', '-qw', kv);
  const applied = await apply();
  assert.deepEqual(
    applied.sysctls.map((c) => [c.sysctl, c.value, c.ok]),
    [
      ['net.ipv4.ip_forward', '1', true],
      ['net.ipv4.conf.eth0.rp_filter', '2', true],
    ],
  );
  const first = await nodeState(node, backend);
  await apply();
  assert.equal(await nodeState(node, backend), first, 'a second apply changes nothing');
  assert.equal(await detectIptablesBackend(hn.runner), backend, 'detection picks the backend holding the rules');

  const [eth1] = await ipj(node, 'addr', 'show', 'dev', 'eth1');
  assert.equal(eth1.mtu, 9001);
  assert.ok(eth1.flags.includes('UP'));
  assert.ok(
    eth1.addr_info.some((a: { local: string; prefixlen: number }) => a.local === ENI2_IP && a.prefixlen === 24),
    JSON.stringify(eth1),
  );
  const table2 = (await ip(node, 'route', 'show', 'table', '2'))
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .sort();
  assert.deepEqual(table2, ['10.0.0.1 dev eth1 scope link', 'default via 10.0.0.1 dev eth1']);
  assert.deepEqual(
    await ipj(node, 'route', 'show', 'table', 'main', 'dev', 'eth1'),
    [],
    'no main-table route through a secondary ENI',
  );
  const rules = await ip(node, 'rule');
  assert.match(rules, /1535:\s+from 10\.0\.0\.6 lookup 2/);
  assert.match(rules, /1024:\s+from all to 10\.0\.0\.0\/16 goto 1026/);
  assert.match(rules, /1024:\s+from all to 198\.51\.100\.0\/24 goto 1026/);
  assert.match(rules, /1025:\s+from all lookup main/);
  assert.equal(await inNs(node, 'sysctl', '-n', 'net.ipv4.ip_forward'), '1\n');
  assert.equal(await inNs(node, 'sysctl', '-n', 'net.ipv4.conf.eth0.rp_filter'), '2\n');
  const nat = await inNs(node, `iptables-${backend}-save`, '-t', 'nat');
  assert.equal(nat.split('\n').filter((l) => l.startsWith('-A POSTROUTING') && l.includes(SNAT_CHAIN)).length, 1, nat);
  assert.match(nat, new RegExp(`-A ${SNAT_CHAIN} -d 10\\.0\\.0\\.0/16 .*-j RETURN`));
  assert.match(nat, new RegExp(`-A ${SNAT_CHAIN} -d 198\\.51\\.100\\.0/24 .*-j RETURN`));
  assert.match(nat, /-j SNAT --to-source 10\.0\.0\.4 --random-fully/);

  // Two pods wired by the real plugin; the ipamd stand-in says which ENI (table) holds each IP.
  const standin = await startCniBackendStandIn();
  t.after(() => standin.close());
  const podIp = new Map<string, { ipv4_addr: string; device_number: number; route_table_id: number }>();
  standin.addReply = (req) => ({ ...podIp.get(req.container_id), vpc_v4_cidrs: [VPC_CIDR] });
  const config = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: standin.socket, mtu: 9001 };
  const cni = (command: 'ADD' | 'DEL', id: string, pod: Netns) =>
    execPlugin({
      command,
      containerId: id,
      netns: pod.path,
      ifName: 'eth0',
      config,
      prefix: ['nsenter', `--net=${node.path}`],
    });
  const podA = await mk('poda');
  const podB = await mk('podb');
  const ids = { a: randomBytes(32).toString('hex'), b: randomBytes(32).toString('hex') };
  podIp.set(ids.a, { ipv4_addr: POD_A, device_number: 0, route_table_id: 254 });
  podIp.set(ids.b, { ipv4_addr: POD_B, device_number: 1, route_table_id: 2 });
  for (const [id, pod] of [
    [ids.a, podA],
    [ids.b, podB],
  ] as const) {
    const add = await cni('ADD', id, pod);
    assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
  }
  const podRules = await ip(node, 'rule');
  assert.match(podRules, /512:\s+from all to 10\.0\.0\.21 lookup main/);
  assert.match(podRules, /512:\s+from all to 10\.0\.0\.20 lookup main/);
  assert.match(podRules, /1536:\s+from 10\.0\.0\.20 lookup 2/);
  assert.doesNotMatch(podRules, /from 10\.0\.0\.21 /, 'no from-rule for a pod on the primary ENI');
  const again = await cni('ADD', ids.b, podB);
  assert.equal(again.code, 0, `repeated ADD: ${again.stdout}`);
  assert.equal(await ip(node, 'rule'), podRules, 'a repeated ADD leaves the same rules');

  // Servers in the VPC echo the address they see.
  const server = spawn(
    'nsenter',
    [
      `--net=${vpc.path}`,
      process.execPath,
      '-e',
      `const net=require('net');let n=0;for(const h of ${JSON.stringify(['10.0.0.1', OUTSIDE, EXCLUDED])})` +
        `net.createServer(s=>s.end(s.remoteAddress+'\\n')).listen(${PORT},h,()=>{if(++n===3)console.log('listening')})`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: nodeEnv() },
  );
  t.after(() => {
    server.kill('SIGKILL');
  });
  let out = '';
  server.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  await waitFor('the VPC servers', () => out.includes('listening'), 10_000);

  const b2vpc = await probe(node, podB, '10.0.0.1');
  assert.equal(b2vpc.seenAs, POD_B, 'pod on ENI 2 → VPC: not NATed');
  assert.ok(b2vpc.eth1 >= 3 && b2vpc.eth0 === 0, `pod on ENI 2 → VPC leaves through ENI 2: ${JSON.stringify(b2vpc)}`);
  const b2out = await probe(node, podB, OUTSIDE);
  assert.equal(b2out.seenAs, NODE_IP, 'pod → outside: SNATed to the node IP');
  assert.ok(
    b2out.eth0 >= 3 && b2out.eth1 === 0,
    `pod → outside leaves through the primary ENI: ${JSON.stringify(b2out)}`,
  );
  const b2excl = await probe(node, podB, EXCLUDED);
  assert.equal(b2excl.seenAs, POD_B, 'pod → SNAT-excluded CIDR: not NATed');
  assert.ok(b2excl.eth1 >= 3 && b2excl.eth0 === 0, `excluded CIDR routed like the VPC: ${JSON.stringify(b2excl)}`);
  const a2vpc = await probe(node, podA, '10.0.0.1');
  assert.equal(a2vpc.seenAs, POD_A, 'primary-ENI pod → VPC: not NATed');
  assert.ok(
    a2vpc.eth0 >= 3 && a2vpc.eth1 === 0,
    `primary-ENI pod → VPC leaves through ENI 1: ${JSON.stringify(a2vpc)}`,
  );
  const a2out = await probe(node, podA, OUTSIDE);
  assert.equal(a2out.seenAs, NODE_IP, 'primary-ENI pod → outside: SNATed');
  const counted = (await inNs(node, `iptables-${backend}-save`, '-c', '-t', 'nat'))
    .split('\n')
    .find((l) => l.includes('-j SNAT'));
  assert.ok(counted && !counted.startsWith('[0:'), `SNAT rule counted packets: ${counted}`);

  // DEL removes the pod rules (by IP, from ipamd's reply).
  for (const [id, pod] of [
    [ids.a, podA],
    [ids.b, podB],
  ] as const) {
    const del = await cni('DEL', id, pod);
    assert.equal(del.code, 0, `DEL: ${del.stdout} ${del.stderr}`);
  }
  assert.doesNotMatch(await ip(node, 'rule'), /10\.0\.0\.2[01]/, 'no pod rules after DEL');

  // Freeing the ENI removes its table, rule and address; a second teardown is a no-op.
  await hn.teardownEni(eni2);
  await hn.teardownEni(eni2);
  assert.equal((await ip(node, 'route', 'show', 'table', '2')).trim(), '');
  assert.doesNotMatch(await ip(node, 'rule'), /lookup 2\b/);
  assert.doesNotMatch(await ip(node, '-4', 'addr', 'show', 'dev', 'eth1'), /10\.0\.0\.6/);

  // AWS_VPC_K8S_CNI_EXTERNALSNAT=true: the chain, the jump and the node rules go away.
  const ext = new HostNetwork({
    netns: node.path,
    eniMtu: 9001,
    externalSnat: true,
    excludeSnatCidrs: [],
    iptablesBackend: backend,
  });
  await ext.setupNode({ primaryIf: 'eth0', nodeIp: NODE_IP, vpcCidrs: [VPC_CIDR] });
  assert.doesNotMatch(await inNs(node, `iptables-${backend}-save`, '-t', 'nat'), new RegExp(SNAT_CHAIN));
  assert.doesNotMatch(await ip(node, 'rule'), /^10(24|25|26):/m);
}

test('host networking: per-ENI routing and SNAT with real TCP, both iptables backends; the host is untouched', async (t) => {
  const before = await hostSnapshot();
  for (const backend of ['nft', 'legacy'] as const) {
    await t.test(`iptables-${backend}`, async (st) => runScenario(st, backend));
  }
  assert.equal(await hostSnapshot(), before, 'iptables (nft and legacy), nft and ip rules of the real host unchanged');
});
