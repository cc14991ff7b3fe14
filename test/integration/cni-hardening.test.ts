/**
 * Fuzz-found holes of the CNI plugin (docs/design.md#13-evidence-before-trust item 4 and docs/design.md#bounds-on-bad-input), through the real
 * bundled plugin (or the shim with ENI_IPAM_TEST_PLUGIN=shim falls back to it) against
 * the stand-in ipamd (helpers/cni-backend-standin.ts), in real namespaces:
 * - an ADD handed an IP the node already routes to a live pod's veth is refused, the
 *   live pod's route, rules and traffic are untouched, ipamd is told "ip-conflict";
 * - a 100,000-deep `prevResult` is refused with code 6 before any IP is asked for;
 * - CNI_NETNS naming the node's own netns (by its name or /proc/self/ns/net) is refused
 *   and the node's default route is untouched;
 * - echoed values are cut (a 100 KB `cniVersion` does not come back whole).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, tcpSendFrom, type Netns } from '../../kit/netns.js';
import { startCniBackendStandIn, type CniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { ipIn, ipj } from '../helpers/cni-node.js';
import { waitFor } from '../../kit/wait.js';

const NODE_ADDR = '10.0.0.10';
const newId = () => randomBytes(32).toString('hex');

interface Env {
  node: Netns;
  standin: CniBackendStandIn;
  config: Record<string, unknown>;
  pods: Netns[];
  call(c: Omit<CniCall, 'config' | 'prefix'> & { config?: unknown }): ReturnType<typeof execPlugin>;
}

async function setup(t: { after(fn: () => unknown): void }, tag: string): Promise<Env> {
  const standin = await startCniBackendStandIn();
  t.after(() => standin.close());
  const node = await createNamedNetns(`eni-hd-${tag}-${process.pid}`);
  t.after(() => node.remove());
  const pods: Netns[] = [];
  t.after(async () => {
    for (const p of pods) await p.remove();
  });
  const config = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: standin.socket, mtu: 9001 };
  return {
    node,
    standin,
    config,
    pods,
    call: (c) => execPlugin({ ...c, config: c.config ?? config, prefix: ['nsenter', `--net=${node.path}`] }),
  };
}

const vethsOf = async (node: Netns): Promise<string[]> =>
  (await ipj(node.path, ['link', 'show', 'type', 'veth'])).map((l) => String(l.ifname));

test('ADD handed an IP the node routes to a live pod is refused; the live pod keeps its route, rules and traffic', async (t) => {
  const e = await setup(t, 'dup');
  await ipIn(e.node.path, ['addr', 'add', `${NODE_ADDR}/32`, 'dev', 'lo']);
  const server = spawn(
    'nsenter',
    [
      `--net=${e.node.path}`,
      process.execPath,
      '-e',
      `require('net').createServer(s=>s.once('data',d=>{console.log(d.toString().trim()+' '+s.remoteAddress);s.end('ok\\n')})).listen(8080,'${NODE_ADDR}',()=>console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => {
    server.kill('SIGKILL');
  });
  let seen = '';
  server.stdout!.on('data', (b: Buffer) => (seen += b.toString()));
  await waitFor('the node TCP server', () => seen.includes('listening'));

  // Pod A, on a secondary ENI (table 3), so it has both its rules.
  e.standin.addReply = () => ({ device_number: 2, route_table_id: 3 });
  const podA = await createNamedNetns(`eni-hd-a-${process.pid}`);
  e.pods.push(podA);
  const idA = newId();
  const addA = await e.call({ command: 'ADD', containerId: idA, netns: podA.path, ifName: 'eth0' });
  assert.equal(addA.code, 0, addA.stdout);
  const x = e.standin.allocations.get(`aws-cni/${idA}/eth0`)!;
  const vethA = addA.json.interfaces[0].name as string;
  const rulesOf = async () =>
    (await ipj(e.node.path, ['rule', 'show']))
      .filter((r) => r.dst === x || r.src === x)
      .map((r) => `${r.priority} ${r.src} ${r.dst} ${r.table}`)
      .sort();
  const rulesA = await rulesOf();
  assert.equal(rulesA.length, 2, JSON.stringify(rulesA));

  // ipamd (here the stand-in) hands x out again to pod B, as a lost allocation would.
  e.standin.addReply = () => ({ ipv4_addr: x, device_number: 0, route_table_id: 254 });
  const podB = await createNamedNetns(`eni-hd-b-${process.pid}`);
  e.pods.push(podB);
  const idB = newId();
  const addB = await e.call({ command: 'ADD', containerId: idB, netns: podB.path, ifName: 'eth0' });
  assert.equal(addB.code, 1, `the duplicate ADD must fail: ${addB.stdout}`);
  assert.equal(addB.json.code, 11, addB.stdout);
  assert.match(
    addB.json.msg,
    new RegExp(`IP ${x.replace(/\./g, '\\.')} is already in use on this node: it is routed to "${vethA}"`),
  );

  // A's host route and rules are untouched, B's veth is gone, ipamd was told why.
  const routes = await ipj(e.node.path, ['route', 'show', `${x}/32`]);
  assert.deepEqual(
    routes.map((r) => r.dev),
    [vethA],
  );
  assert.deepEqual(await rulesOf(), rulesA);
  assert.deepEqual(await vethsOf(e.node), [vethA]);
  const del = e.standin.calls.find((c) => c.method === 'DelNetwork' && c.request.container_id === idB);
  assert.equal(del?.method === 'DelNetwork' ? del.request.reason : undefined, 'ip-conflict');
  assert.equal(e.standin.allocations.has(`aws-cni/${idB}/eth0`), false);
  // ... and A still talks to the node from x.
  await tcpSendFrom(podA.path, NODE_ADDR, 8080, 'still-alive');
  await waitFor('the node to see A from its IP', () => seen.includes(`still-alive ${x}`), 5000);
});

test('ADD with a 100,000-deep prevResult is refused with code 6 before an IP is assigned', async (t) => {
  const e = await setup(t, 'deep');
  const pod = await createNamedNetns(`eni-hd-pdeep-${process.pid}`);
  e.pods.push(pod);
  const depth = 100_000;
  const raw = `{"cniVersion":"1.0.0","name":"aws-cni","type":"eni-ipam","ipamdSocket":${JSON.stringify(e.standin.socket)},"prevResult":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
  const r = await e.call({ command: 'ADD', containerId: newId(), netns: pod.path, ifName: 'eth0', config: raw });
  assert.equal(r.code, 1, r.stdout.slice(0, 500));
  assert.equal(r.json.code, 6, r.stdout.slice(0, 500));
  assert.match(r.json.details, /nest deeper than 64/);
  assert.equal(e.standin.calls.filter((c) => c.method === 'AddNetwork').length, 0, 'no IP was asked for');
  assert.equal(e.standin.allocations.size, 0);
  assert.deepEqual(await vethsOf(e.node), []);
  // A normal chained ADD still works.
  const ok = await e.call({
    command: 'ADD',
    containerId: newId(),
    netns: pod.path,
    ifName: 'eth0',
    config: {
      ...e.config,
      prevResult: { cniVersion: '1.0.0', interfaces: [{ name: 'x' }], ips: [], dns: { nameservers: ['10.0.0.2'] } },
    },
  });
  assert.equal(ok.code, 0, ok.stdout);
  assert.deepEqual(ok.json.dns, { nameservers: ['10.0.0.2'] });
});

test("CNI_NETNS naming the node's own netns is refused; the node keeps its default route", async (t) => {
  const e = await setup(t, 'self');
  await ipIn(e.node.path, ['link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'up1']);
  await ipIn(e.node.path, ['link', 'set', 'up0', 'up']);
  await ipIn(e.node.path, ['link', 'set', 'up1', 'up']);
  await ipIn(e.node.path, ['addr', 'add', '10.0.0.10/24', 'dev', 'up0']);
  await ipIn(e.node.path, ['route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'up0']);
  const defaultRoute = async () =>
    (await ipj(e.node.path, ['route', 'show', 'default'])).map((r) => `${r.gateway} ${r.dev}`);
  assert.deepEqual(await defaultRoute(), ['10.0.0.1 up0']);
  // The plugin runs inside the node netns: its name and /proc/self/ns/net are the same namespace.
  for (const netns of [e.node.path, '/proc/self/ns/net']) {
    const id = newId();
    const r = await e.call({ command: 'ADD', containerId: id, netns, ifName: 'eth0' });
    assert.equal(r.code, 1, `${netns}: ${r.stdout}`);
    assert.equal(r.json.code, 4, r.stdout);
    assert.equal(r.json.msg, 'invalid CNI_NETNS');
    assert.match(r.json.details, /is the node's own network namespace/);
    assert.deepEqual(await defaultRoute(), ['10.0.0.1 up0'], `the node's default route after ADD with ${netns}`);
    assert.equal(e.standin.allocations.has(`aws-cni/${id}/eth0`), false, 'the IP was given back');
    const d = await e.call({ command: 'DEL', containerId: id, netns, ifName: 'eth0' });
    assert.equal(d.code, 0, d.stdout);
    assert.deepEqual(await defaultRoute(), ['10.0.0.1 up0'], `the node's default route after DEL with ${netns}`);
  }
  assert.deepEqual((await vethsOf(e.node)).sort(), ['up0', 'up1']);
});

test('error messages cut the values they echo', async (t) => {
  const e = await setup(t, 'echo');
  const big = 'v'.repeat(100_000);
  const r1 = await e.call({
    command: 'ADD',
    containerId: newId(),
    netns: '/var/run/netns/none',
    ifName: 'eth0',
    config: { ...e.config, cniVersion: big },
  });
  assert.equal(r1.json.code, 1, r1.stdout.slice(0, 300));
  assert.ok(r1.stdout.length < 1000, `a 100 KB cniVersion came back in ${r1.stdout.length} bytes`);
  assert.match(r1.json.msg, /^unsupported cniVersion "v{64}"…\(\+99936 chars\)$/);
  const r2 = await e.call({
    command: 'ADD',
    containerId: 'c'.repeat(50_000) + '/',
    netns: '/var/run/netns/none',
    ifName: 'eth0',
  });
  assert.equal(r2.json.code, 4, r2.stdout.slice(0, 300));
  assert.ok(r2.stdout.length < 1000, `a 50 KB CNI_CONTAINERID came back in ${r2.stdout.length} bytes`);
  const r3 = await e.call({
    command: 'ADD',
    containerId: newId(),
    netns: '/var/run/netns/none',
    ifName: 'eth0',
    args: { [`K${'k'.repeat(50_000)}`]: '1' },
  });
  assert.equal(r3.json.code, 4, r3.stdout.slice(0, 300));
  assert.ok(r3.stdout.length < 1000, `a 50 KB CNI_ARGS key came back in ${r3.stdout.length} bytes`);
});
