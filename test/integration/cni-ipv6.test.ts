/**
 * IPv6 and dual-stack pods (issue #31) through the real bundled plugin against the ipamd
 * stand-in serving `ipv6` or `dual`, in real namespaces: a "node" netns (plugin run
 * inside it), pods, and an "outside" netns standing for the IPv4 internet behind the
 * node. Asserts TCP pod↔pod and pod↔node over IPv6, pod→outside over IPv4 through v4if0
 * SNATed to the node's primary IPv4 (netfacts/egress-v4.ts rules), results of every CNI
 * version, CHECK, GC, DEL of both families, and the family refusal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, ipIn, tcpSendFrom, type Netns } from '../../kit/netns.js';
import { startCniBackendStandIn, type CniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { waitFor } from '../../kit/wait.js';
import { EGRESS_V4_JUMPS, egressV4Restore } from '../../netfacts/egress-v4.js';
import { SUPPORTED_VERSIONS } from '../../cni-plugin/versions.js';

const sh = promisify(execFile);
const inNs = (ns: Netns, cmd: string[]) => sh('nsenter', [`--net=${ns.path}`, ...cmd]);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const ipj = async (ns: Netns, args: string[]): Promise<any[]> =>
  JSON.parse((await ipIn(ns.path, ['-j', ...args])) || '[]');
const NODE_V4 = '10.0.0.10';
const NODE_V6 = '2600:1f14:aa:bb00::10';
const OUTSIDE_V4 = '198.51.100.7';
const newId = () => randomBytes(32).toString('hex');

/** A TCP server in `ns` on `host:port` that records `<payload> <peer address>` lines. */
async function tcpServer(t: { after(fn: () => unknown): void }, ns: Netns, host: string, port: number) {
  const server = spawn(
    'nsenter',
    [
      `--net=${ns.path}`,
      process.execPath,
      '-e',
      `require('net').createServer(s=>s.once('data',d=>{console.log(d.toString().trim()+' '+s.remoteAddress);s.end('ok\\n')})).listen(${port},'${host}',()=>console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => {
    server.kill('SIGKILL');
  });
  const seen = { text: '' };
  server.stdout!.on('data', (b: Buffer) => (seen.text += b.toString()));
  await waitFor(`TCP server ${host}:${port}`, () => seen.text.includes('listening'));
  return seen;
}

interface Env {
  node: Netns;
  standin: CniBackendStandIn;
  call(c: Omit<CniCall, 'config' | 'prefix'> & { config?: Record<string, unknown> }): ReturnType<typeof execPlugin>;
  config: Record<string, unknown>;
}

async function setup(t: { after(fn: () => unknown): void }, tag: string, family: 'ipv6' | 'dual'): Promise<Env> {
  const standin = await startCniBackendStandIn();
  standin.ipFamily = family;
  t.after(() => standin.close());
  const node = await createNamedNetns(`eni-v6-${tag}-${process.pid}`);
  t.after(() => node.remove());
  await ipIn(node.path, ['addr', 'add', `${NODE_V4}/32`, 'dev', 'lo']);
  await ipIn(node.path, ['addr', 'add', `${NODE_V6}/128`, 'dev', 'lo']);
  await inNs(node, ['sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1', 'net.ipv4.ip_forward=1']);
  const config = { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: standin.socket, mtu: 9001 };
  return {
    node,
    standin,
    config,
    call: (c) => execPlugin({ ...c, config: c.config ?? config, prefix: ['nsenter', `--net=${node.path}`] }),
  };
}

/** Node links named as host veths are (`eni…` a pod's, `veth…` an egress pair's) in this test's node netns. */
const hostVeths = async (node: Netns) =>
  (await ipj(node, ['link', 'show'])).map((l) => l.ifname as string).filter((n) => /^(eni|veth)/.test(n));

test('IPv6 pods: pod↔pod and pod↔node over IPv6, IPv4 egress SNATed, CHECK, GC, DEL', async (t) => {
  const e = await setup(t, 'v6', 'ipv6');
  // The "outside": an IPv4 host behind the node (the internet), reached through a veth.
  const outside = await createNamedNetns(`eni-v6-out-${process.pid}`);
  t.after(() => outside.remove());
  await ipIn(e.node.path, ['link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', outside.path]);
  await ipIn(e.node.path, ['link', 'set', 'up0', 'up']);
  await ipIn(e.node.path, ['route', 'add', `${OUTSIDE_V4}/32`, 'dev', 'up0', 'src', NODE_V4]);
  await ipIn(outside.path, ['link', 'set', 'eth0', 'up']);
  await ipIn(outside.path, ['addr', 'add', `${OUTSIDE_V4}/32`, 'dev', 'eth0']);
  await ipIn(outside.path, ['route', 'add', `${NODE_V4}/32`, 'dev', 'eth0']);
  await inNs(e.node, [
    'sh',
    '-c',
    `printf '%s' "$1" | iptables-restore --noflush -w 5`,
    'sh',
    egressV4Restore(NODE_V4),
  ]);
  for (const [table, chain, ...rule] of EGRESS_V4_JUMPS)
    await inNs(e.node, ['iptables', '-w', '5', '-t', table!, '-A', chain!, ...rule]);
  const fromOutside = await tcpServer(t, outside, OUTSIDE_V4, 8081);
  const fromNode = await tcpServer(t, e.node, NODE_V6, 8080);

  const pods: { ns: Netns; id: string; ipv6: string; egress: string; result: Record<string, unknown> }[] = [];
  t.after(async () => {
    for (const p of pods) await p.ns.remove();
  });
  for (const i of [0, 1]) {
    const ns = await createNamedNetns(`eni-v6-pod${i}-${process.pid}`);
    const id = newId();
    pods.push({ ns, id, ipv6: '', egress: '', result: {} });
    const add = await e.call({ command: 'ADD', containerId: id, netns: ns.path, ifName: 'eth0' });
    assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
    const a = e.standin.v6.get(`aws-cni/${id}/eth0`)!;
    Object.assign(pods[i]!, { ipv6: a.ipv6, egress: a.egressV4, result: JSON.parse(add.stdout) });
    const r = pods[i]!.result as {
      ips: { address: string; gateway: string; interface: number }[];
      interfaces: { name: string }[];
    };
    assert.deepEqual(
      r.ips.map((ip) => [ip.address, ip.gateway, r.interfaces[ip.interface]!.name]),
      [
        [`${a.ipv6}/128`, 'fe80::1', 'eth0'],
        [`${a.egressV4}/32`, '169.254.1.1', 'v4if0'],
      ],
    );
    // The /128 is usable at once (nodad: not tentative), no IPv4 on eth0.
    const [eth0] = await ipj(ns, ['addr', 'show', 'dev', 'eth0']);
    const inet6 = eth0.addr_info.find((x: { local: string }) => x.local === a.ipv6);
    assert.ok(inet6 && !inet6.tentative, `eth0 has ${a.ipv6}/128, not tentative: ${JSON.stringify(eth0.addr_info)}`);
    assert.ok(!eth0.addr_info.some((x: { family: string }) => x.family === 'inet'), 'no IPv4 on eth0');
  }
  const [p0, p1] = pods as [(typeof pods)[0], (typeof pods)[0]];
  const podServer = await tcpServer(t, p1.ns, p1.ipv6, 8082);
  await tcpSendFrom(p0.ns.path, p1.ipv6, 8082, 'pod-to-pod');
  await waitFor('pod→pod over IPv6', () => podServer.text.includes(`pod-to-pod ${p0.ipv6}`));
  await tcpSendFrom(p0.ns.path, NODE_V6, 8080, 'pod-to-node');
  await waitFor('pod→node over IPv6', () => fromNode.text.includes(`pod-to-node ${p0.ipv6}`));
  await tcpSendFrom(p1.ns.path, OUTSIDE_V4, 8081, 'pod-to-outside');
  await waitFor('pod→outside over IPv4, SNATed', () => fromOutside.text.includes(`pod-to-outside ${NODE_V4}`));
  // New connections to the egress range are refused by the node.
  await assert.rejects(tcpSendFrom(outside.path, p1.egress, 8082, 'in', 2));

  // CHECK passes, then names the missing piece once the /128 is gone.
  const check = (p: typeof p0) =>
    e.call({
      command: 'CHECK',
      containerId: p.id,
      netns: p.ns.path,
      ifName: 'eth0',
      config: { ...e.config, prevResult: p.result },
    });
  assert.equal((await check(p0)).code, 0);
  await ipIn(p0.ns.path, ['addr', 'del', `${p0.ipv6}/128`, 'dev', 'eth0']);
  const drift = await check(p0);
  assert.equal(JSON.parse(drift.stdout).code, 100);
  assert.match(drift.stdout, new RegExp(`address ${p0.ipv6}/128 missing on eth0`));

  // GC keeps pod 1 only: pod 0's addresses are released and both its veths removed.
  const gc = await e.call({
    command: 'GC',
    containerId: '',
    netns: '',
    ifName: '',
    config: { ...e.config, 'cni.dev/valid-attachments': [{ containerID: p1.id, ifname: 'eth0' }] },
  });
  assert.equal(gc.code, 0, gc.stdout);
  assert.equal(e.standin.v6.has(`aws-cni/${p0.id}/eth0`), false);
  assert.equal((await hostVeths(e.node)).length, 2, 'pod 1 keeps its two host veths');
  // DEL of pod 1 removes both families: no host veth, no /128 route, no egress route.
  const del = await e.call({
    command: 'DEL',
    containerId: p1.id,
    netns: p1.ns.path,
    ifName: 'eth0',
    config: { ...e.config, prevResult: p1.result },
  });
  assert.equal(del.code, 0, del.stdout);
  assert.deepEqual(await hostVeths(e.node), []);
  assert.equal(e.standin.v6.size, 0);
  const v6routes = await ipj(e.node, ['route', 'show', 'table', 'all', 'root', '::/0']);
  assert.ok(!v6routes.some((r) => String(r.dev).startsWith('eni')), 'no pod /128 route left');
  assert.deepEqual(await ipj(e.node, ['route', 'show', 'root', '169.254.172.0/22']), []);
});

test('dual-stack pods: both addresses on eth0, results in every version, released together', async (t) => {
  const e = await setup(t, 'dual', 'dual');
  const ns = await createNamedNetns(`eni-v6-dpod-${process.pid}`);
  t.after(() => ns.remove());
  const fromNode = await tcpServer(t, e.node, NODE_V6, 8080);
  for (const v of SUPPORTED_VERSIONS) {
    const id = newId();
    const config = { ...e.config, cniVersion: v };
    const add = await e.call({ command: 'ADD', containerId: id, netns: ns.path, ifName: 'eth0', config });
    assert.equal(add.code, 0, `ADD ${v}: ${add.stdout} ${add.stderr}`);
    const r = JSON.parse(add.stdout) as {
      cniVersion: string;
      ips: Record<string, unknown>[];
      routes: { dst: string }[];
    };
    const a = e.standin.v6.get(`aws-cni/${id}/eth0`)!;
    const legacy = v.startsWith('0.');
    assert.equal(r.cniVersion, v);
    assert.deepEqual(
      r.ips,
      [
        { ...(legacy ? { version: '4' } : {}), address: `${a.ipv4}/32`, gateway: '169.254.1.1', interface: 1 },
        { ...(legacy ? { version: '6' } : {}), address: `${a.ipv6}/128`, gateway: 'fe80::1', interface: 1 },
      ],
      `ips in ${v}`,
    );
    assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0' }, { dst: '::/0' }]);
    await tcpSendFrom(ns.path, NODE_V6, 8080, `dual-${v}`);
    await waitFor(`pod→node over IPv6 (${v})`, () => fromNode.text.includes(`dual-${v} ${a.ipv6}`));
    if (v !== '0.3.0' && v !== '0.3.1') {
      const check = await e.call({
        command: 'CHECK',
        containerId: id,
        netns: ns.path,
        ifName: 'eth0',
        config: { ...config, prevResult: r },
      });
      assert.equal(check.code, 0, `CHECK ${v}: ${check.stdout}`);
    }
    const del = await e.call({ command: 'DEL', containerId: id, netns: ns.path, ifName: 'eth0', config });
    assert.equal(del.code, 0, del.stdout);
    assert.equal(e.standin.v6.size + e.standin.allocations.size, 0, 'both addresses released together');
    assert.deepEqual(await hostVeths(e.node), []);
  }
  // A config asking for another family: the spec's code 7, the message naming the mode.
  const refused = await e.call({
    command: 'ADD',
    containerId: newId(),
    netns: ns.path,
    ifName: 'eth0',
    config: { ...e.config, ipFamily: 'ipv6' },
  });
  assert.equal(JSON.parse(refused.stdout).code, 7, refused.stdout);
  assert.match(
    JSON.parse(refused.stdout).msg,
    /this node serves dual \(ipamd\), the network config asks for ipFamily ipv6/,
  );
  assert.deepEqual(await hostVeths(e.node), []);
  const status = await e.call({
    command: 'STATUS',
    containerId: '',
    netns: '',
    ifName: '',
    config: { ...e.config, ipFamily: 'ipv4' },
  });
  assert.equal(JSON.parse(status.stdout).code, 50, status.stdout);
  assert.match(status.stdout, /serves dual/);
});
