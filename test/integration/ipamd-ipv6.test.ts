/**
 * ipamd's IPv6 mode end to end (issue #31): the real ipamd on the simulated cloud over
 * HTTP (a VPC /56, a dual-stack subnet), the real bundled CNI plugin, real namespaces (a
 * "node" netns the plugin runs in, pods, an IPv4 "outside"). ipamd assigns the primary
 * ENI a /80 once; pods get /128s from it; TCP pod↔pod over IPv6 and pod→outside over IPv4
 * SNATed to the node's IPv4 (ipamd's own egress rules, applied to the node netns); churn
 * makes no EC2 call; a restarted ipamd still holds the pods' addresses; a config asking
 * for another family gets the CNI code 7 naming the mode.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, ipIn, tcpSendFrom, type Netns } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { applyEgressV4 } from '../../ipamd/network/egress-v4.js';
import { startIpv6Node } from '../helpers/ipv6-node.js';

const NODE_V6 = '2600:1f14:abc:de00::10';
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

test('IPv6 mode: /128s from the /80, TCP pod↔pod and pod→IPv4 outside, no EC2 call per pod, restart keeps them', async (t) => {
  let fromOutside = { text: '' };
  const { h, node, sim } = await startIpv6Node(
    t,
    'i6',
    { DISABLE_METRICS: 'false', METRICS_BIND_ADDRESS: '127.0.0.1:0' },
    {
      cri: false,
      nodeV6: NODE_V6,
      beforeStart: async (h, node) => {
        const outside = await createNamedNetns(`eni-i6-out-${process.pid}`);
        t.after(() => outside.remove());
        await ipIn(node.path, ['link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', outside.path]);
        await ipIn(node.path, ['link', 'set', 'up0', 'up']);
        await ipIn(node.path, ['route', 'add', `${OUTSIDE_V4}/32`, 'dev', 'up0', 'src', h.nodeIp]);
        await ipIn(outside.path, ['link', 'set', 'eth0', 'up']);
        await ipIn(outside.path, ['addr', 'add', `${OUTSIDE_V4}/32`, 'dev', 'eth0']);
        await ipIn(outside.path, ['route', 'add', `${h.nodeIp}/32`, 'dev', 'eth0']);
        // ipamd's own IPv6-mode egress rules (its host networking is off in tests), in the node netns.
        await applyEgressV4(h.nodeIp, node.path);
        await applyEgressV4(h.nodeIp, node.path); // idempotent
        fromOutside = await tcpServer(t, outside, OUTSIDE_V4, 8081);
      },
    },
  );
  assert.equal(sim.countCalls('AssignIpv6Addresses'), 1, 'the /80 assigned once at start');
  const config = { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket, mtu: 9001 };
  const call = (c: Omit<CniCall, 'config' | 'prefix'> & { config?: Record<string, unknown> }) =>
    execPlugin({ ...c, config: c.config ?? config, prefix: ['nsenter', `--net=${node.path}`] });
  const [eni] = sim.state.enis.values();
  const prefix = [...sim.state.enis.values()].flatMap((e) => e.ipv6Prefixes)[0]!;
  assert.ok(eni && prefix, 'the sim holds the /80');
  const inPrefix = (ip: string) => ipaddr.IPv6.parse(ip).match(ipaddr.IPv6.parseCIDR(prefix));

  const pods: { ns: Netns; id: string; ipv6: string; egress: string; result: Record<string, unknown> }[] = [];
  t.after(async () => {
    for (const p of pods) await p.ns.remove();
  });
  for (const i of [0, 1]) {
    const ns = await createNamedNetns(`eni-i6-pod${i}-${process.pid}`);
    const id = newId();
    const add = await call({ command: 'ADD', containerId: id, netns: ns.path, ifName: 'eth0' });
    assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
    const r = JSON.parse(add.stdout) as { ips: { address: string }[] };
    const ipv6 = r.ips[0]!.address.replace(/\/128$/, '');
    const egress = r.ips[1]!.address.replace(/\/32$/, '');
    assert.ok(inPrefix(ipv6), `${ipv6} is in ${prefix}`);
    assert.match(egress, /^169\.254\.(17[2-5])\.\d+$/);
    pods.push({ ns, id, ipv6, egress, result: r });
  }
  const [p0, p1] = pods as [(typeof pods)[0], (typeof pods)[0]];
  assert.notEqual(p0.ipv6, p1.ipv6);
  // Introspection and metrics carry IPv6: the /80 under the primary ENI's IPv6Cidrs, both /128s listed.
  const ipamd = h.ipamd!;
  const enis = (await (await fetch(`http://127.0.0.1:${ipamd.introspectionPort}/v1/enis`)).json()) as {
    0: { ENIs: Record<string, { IsPrimary: boolean; IPv6Cidrs: Record<string, { IPAddresses: object }> }> };
  };
  const primary = Object.values(enis[0].ENIs).find((e) => e.IsPrimary)!;
  assert.deepEqual(Object.keys(primary.IPv6Cidrs), [prefix]);
  assert.deepEqual(Object.keys(primary.IPv6Cidrs[prefix]!.IPAddresses).sort(), [p0.ipv6, p1.ipv6].sort());
  {
    assert.ok(ipamd.metricsPort, 'metrics served');
    const text = await (await fetch(`http://127.0.0.1:${ipamd.metricsPort}/metrics`)).text();
    assert.match(text, /^awscni_assigned_ip_addresses 2$/m);
    assert.match(text, /^eni_ipam_ipv6_prefixes 1$/m);
    assert.match(text, /^eni_ipam_ipv6_addresses\{state="assigned"\} 2$/m);
  }
  {
    // ipamd's own introspection lists the IPv6 pods: each attachment with its /128 and egress IPv4.
    const listed = (await (await fetch(`http://127.0.0.1:${ipamd.introspectionPort}/v1/allocations`)).json()) as Array<{
      containerID: string;
      ipv4?: string;
      ipv6?: string;
      egressV4?: string;
    }>;
    assert.deepEqual(
      listed.map((a) => [a.containerID, a.ipv6, a.egressV4, a.ipv4]).sort(),
      pods.map((p) => [p.id, p.ipv6, p.egress, undefined]).sort(),
    );
    const counts = (await ipamd.status()).counts as { pods: number; ipv6: { prefix: string; assigned: number } };
    assert.equal(counts.pods, 2, 'the status counts the IPv6 pods');
    assert.deepEqual([counts.ipv6.prefix, counts.ipv6.assigned], [prefix, 2]);
  }
  const podServer = await tcpServer(t, p1.ns, p1.ipv6, 8082);
  await tcpSendFrom(p0.ns.path, p1.ipv6, 8082, 'pod-to-pod');
  await waitFor('pod→pod over IPv6', () => podServer.text.includes(`pod-to-pod ${p0.ipv6}`));
  await tcpSendFrom(p1.ns.path, OUTSIDE_V4, 8081, 'pod-to-outside');
  await waitFor('pod→outside over IPv4, SNATed', () => fromOutside.text.includes(`pod-to-outside ${h.nodeIp}`));

  // Churn: 20 pods added and deleted, not one EC2 call.
  const before = sim.countCalls();
  const churn = await createNamedNetns(`eni-i6-churn-${process.pid}`);
  t.after(() => churn.remove());
  for (let i = 0; i < 20; i++) {
    const id = newId();
    const add = await call({ command: 'ADD', containerId: id, netns: churn.path, ifName: 'eth0' });
    assert.equal(add.code, 0, `churn ADD ${i}: ${add.stdout}`);
    const del = await call({ command: 'DEL', containerId: id, netns: churn.path, ifName: 'eth0' });
    assert.equal(del.code, 0, `churn DEL ${i}: ${del.stdout}`);
  }
  const churnCalls = sim.countCalls() - before;
  assert.equal(churnCalls, 0, `EC2 calls while 20 pods churned: ${churnCalls}`);

  // A config asking for another family: CNI code 7 naming the mode; nothing assigned.
  const refused = await call({
    command: 'ADD',
    containerId: newId(),
    netns: churn.path,
    ifName: 'eth0',
    config: { ...config, ipFamily: 'dual' },
  });
  assert.equal(JSON.parse(refused.stdout).code, 7, refused.stdout);
  assert.match(JSON.parse(refused.stdout).msg, /serves ipv6/);

  // Restart: the pods keep their addresses (CHECK passes, a repeated ADD answers the same), no new /80.
  await h.ipamd!.stop(5000);
  await h.startIpamd();
  assert.equal(sim.countCalls('AssignIpv6Addresses'), 1, 'the /80 found again, not assigned again');
  for (const p of pods) {
    const check = await call({
      command: 'CHECK',
      containerId: p.id,
      netns: p.ns.path,
      ifName: 'eth0',
      config: { ...config, prevResult: p.result },
    });
    assert.equal(check.code, 0, `CHECK after restart: ${check.stdout}`);
  }
  await tcpSendFrom(p0.ns.path, p1.ipv6, 8082, 'after-restart');
  await waitFor('pod→pod after the restart', () => podServer.text.includes(`after-restart ${p0.ipv6}`));
  const fresh = await call({ command: 'ADD', containerId: newId(), netns: churn.path, ifName: 'eth0' });
  assert.equal(fresh.code, 0, fresh.stdout);
  const freshIp = (JSON.parse(fresh.stdout) as { ips: { address: string }[] }).ips[0]!.address.replace(/\/128$/, '');
  assert.ok(![p0.ipv6, p1.ipv6].includes(freshIp), 'a restored /128 is never handed out twice');
  for (const p of pods) {
    const del = await call({ command: 'DEL', containerId: p.id, netns: p.ns.path, ifName: 'eth0' });
    assert.equal(del.code, 0, del.stdout);
  }
});

test('dual-stack mode: one pod gets an IPv4 from the warm pool and an IPv6 from the /80, released together', async (t) => {
  let fromNode = { text: '' };
  const { h, node, sim } = await startIpv6Node(
    t,
    'i6d',
    { WARM_IP_TARGET: '2' },
    {
      mode: 'dual',
      cri: false,
      nodeV6: NODE_V6,
      beforeStart: async (_h, node) => {
        fromNode = await tcpServer(t, node, NODE_V6, 8080);
      },
    },
  );
  const d = h.ipamd!;
  const config = { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket, ipFamily: 'dual' };
  const call = (c: Omit<CniCall, 'config' | 'prefix'>) =>
    execPlugin({ ...c, config, prefix: ['nsenter', `--net=${node.path}`] });
  const ns = await createNamedNetns(`eni-i6d-pod-${process.pid}`);
  t.after(() => ns.remove());
  const id = newId();
  const add = await call({ command: 'ADD', containerId: id, netns: ns.path, ifName: 'eth0' });
  assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
  const ips = (JSON.parse(add.stdout) as { ips: { address: string }[] }).ips.map((x) => x.address);
  assert.equal(ips.length, 2, JSON.stringify(ips));
  assert.match(ips[0]!, /^10\.0\.0\.\d+\/32$/);
  const ipv6 = ips[1]!.replace(/\/128$/, '');
  const prefix = [...sim.state.enis.values()].flatMap((e) => e.ipv6Prefixes)[0]!;
  assert.ok(ipaddr.IPv6.parse(ipv6).match(ipaddr.IPv6.parseCIDR(prefix)), `${ipv6} in ${prefix}`);
  await tcpSendFrom(ns.path, NODE_V6, 8080, 'dual');
  await waitFor('pod→node over IPv6', () => fromNode.text.includes(`dual ${ipv6}`));
  assert.equal((await d.status()).counts.assigned, 1);
  // One attachment, both addresses, in ipamd's own introspection.
  const listed = (await (await fetch(`http://127.0.0.1:${d.introspectionPort}/v1/allocations`)).json()) as Array<{
    containerID: string;
    ipv4?: string;
    ipv6?: string;
  }>;
  assert.deepEqual(
    listed.map((a) => [a.containerID, a.ipv4, a.ipv6]),
    [[id, ips[0]!.replace(/\/32$/, ''), ipv6]],
  );
  const counts = (await d.status()).counts as { pods: number; ipv6: { assigned: number } };
  assert.deepEqual([counts.pods, counts.ipv6.assigned], [1, 1]);
  const del = await call({ command: 'DEL', containerId: id, netns: ns.path, ifName: 'eth0' });
  assert.equal(del.code, 0, del.stdout);
  assert.equal((await d.status()).counts.assigned, 0, 'the IPv4 released');
  const enis = (await (await fetch(`http://127.0.0.1:${d.introspectionPort}/v1/enis`)).json()) as {
    0: {
      ENIs: Record<string, { IPv6Cidrs: Record<string, { IPAddresses: Record<string, { UnassignedTime: string }> }> }>;
    };
  };
  const v6 = Object.values(enis[0].ENIs).flatMap((e) => Object.values(e.IPv6Cidrs))[0]!;
  assert.notEqual(v6.IPAddresses[ipv6]?.UnassignedTime, '0001-01-01T00:00:00Z', 'the IPv6 released with it');
});
