/**
 * CNI CHECK and DEL-without-ipamd of the real plugin against the real ipamd (simulated
 * cloud) in real namespaces: CHECK passes after ADD (both netns shapes) and fails with a
 * precise message on each kind of drift; DEL with ipamd down tears the node side down
 * from prevResult (host veth, host route, the pod IP's rules) and succeeds, leaving
 * alone an IP another attachment routes now.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { policyRoutingLines } from '../../cni-plugin/wiring.js';
import { ipIn, ipj, startCniNode } from '../helpers/cni-node.js';

const newId = () => randomBytes(32).toString('hex');
/** A wiring plan for `ip` (only `ipv4`/`routeTableId` matter to the rules). */
const planOf = (ip: string) => ({
  netns: '',
  ifName: 'eth0',
  hostVeth: 'x',
  hostMac: '',
  podMac: '',
  ipv4: ip,
  mtu: 9001,
  routeTableId: 254,
});
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** `ip rule add <args>` in `ns`; an identical rule already there is fine. */
const ruleAdd = (ns: string, args: string[]) =>
  ipIn(ns, ['rule', 'add', ...args]).catch((e: Error) => {
    if (!/File exists/.test(e.message)) throw e;
  });

test('CHECK passes after ADD and names each kind of drift', async (t) => {
  const n = await startCniNode(t, 'ck');
  for (const shape of ['named', 'proc'] as const) {
    const pod = await n.pod(shape);
    const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
    const add = await n.call({ ...att, command: 'ADD' });
    assert.equal(add.code, 0, add.stdout);
    const check = await n.call({ ...att, command: 'CHECK', conf: { prevResult: add.json } });
    assert.deepEqual([check.code, check.stdout], [0, ''], `CHECK (${shape}): ${check.stdout}`);
    assert.equal((await n.call({ ...att, command: 'DEL', conf: { prevResult: add.json } })).code, 0);
  }

  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const first = await n.call({ ...att, command: 'ADD' });
  assert.equal(first.code, 0, first.stdout);
  const prevResult = first.json;
  const ip = String(prevResult.ips[0].address).split('/')[0]!;
  const hostVeth = String(prevResult.interfaces[0].name);
  const P = esc(pod.path);
  const drifts: Array<{ what: string; apply: () => Promise<unknown>; want: RegExp }> = [
    {
      what: 'address',
      apply: () => ipIn(pod.path, ['addr', 'del', `${ip}/32`, 'dev', 'eth0']),
      want: new RegExp(`^address ${esc(ip)}/32 missing on eth0 in ${P}(;|$)`),
    },
    {
      what: 'default route',
      apply: () => ipIn(pod.path, ['route', 'del', 'default']),
      want: new RegExp(`^route default via 169\\.254\\.1\\.1 dev eth0 missing in ${P}$`),
    },
    {
      what: 'scope-link route',
      apply: () => ipIn(pod.path, ['route', 'del', '169.254.1.1', 'dev', 'eth0']),
      want: new RegExp(`^route 169\\.254\\.1\\.1 dev eth0 scope link missing in ${P}$`),
    },
    {
      what: 'neighbour',
      apply: () => ipIn(pod.path, ['neigh', 'del', '169.254.1.1', 'dev', 'eth0']),
      want: new RegExp(
        `^neighbour 169\\.254\\.1\\.1 lladdr ${prevResult.interfaces[0].mac} permanent missing on eth0 in ${P}$`,
      ),
    },
    {
      what: 'neighbour MAC',
      apply: () =>
        ipIn(pod.path, [
          'neigh',
          'replace',
          '169.254.1.1',
          'lladdr',
          '02:de:ad:be:ef:00',
          'dev',
          'eth0',
          'nud',
          'permanent',
        ]),
      want: /^neighbour 169\.254\.1\.1 on eth0 .* points at 02:de:ad:be:ef:00, not the host veth MAC/,
    },
    {
      what: 'host route',
      apply: () => ipIn(n.node.path, ['route', 'del', `${ip}/32`]),
      want: new RegExp(`^host route ${esc(ip)}/32 dev ${hostVeth} missing on the node$`),
    },
    {
      what: 'host veth',
      apply: () => ipIn(n.node.path, ['link', 'del', hostVeth]),
      want: new RegExp(
        `interface eth0 missing in ${P}.*host veth ${hostVeth} missing on the node; host route ${esc(ip)}/32 dev ${hostVeth} missing on the node`,
      ),
    },
    ...(policyRoutingLines({ ...planOf(ip), routeTableId: 254 }).length === 0
      ? []
      : [
          {
            what: 'to-pod rule',
            apply: () => ipIn(n.node.path, ['rule', 'del', 'priority', '512', 'to', ip]),
            want: new RegExp(`^ip rule priority 512 to ${esc(ip)} lookup main missing on the node$`),
          },
        ]),
    {
      what: 'pod interface down',
      apply: () => ipIn(pod.path, ['link', 'set', 'eth0', 'down']),
      want: new RegExp(`interface eth0 is down in ${P}`),
    },
  ];
  for (const d of drifts) {
    const again = await n.call({ ...att, command: 'ADD' }); // a repeated ADD re-wires from scratch
    assert.deepEqual([again.code, again.json], [0, prevResult], `re-ADD before ${d.what}`);
    const ok = await n.call({ ...att, command: 'CHECK', conf: { prevResult } });
    assert.equal(ok.code, 0, `CHECK before ${d.what}: ${ok.stdout}`);
    await d.apply();
    const bad = await n.call({ ...att, command: 'CHECK', conf: { prevResult } });
    assert.equal(bad.code, 1, `CHECK after removing the ${d.what} must fail`);
    assert.equal(bad.json.code, 100);
    assert.match(bad.json.msg, d.want, `${d.what}: ${bad.json.msg}`);
  }

  const noPrev = await n.call({ ...att, command: 'CHECK' });
  assert.deepEqual([noPrev.json.code, noPrev.json.msg], [7, 'prevResult is missing']);
  const wrongIp = await n.call({
    ...att,
    command: 'CHECK',
    conf: { prevResult: { ...prevResult, ips: [{ ...prevResult.ips[0], address: '10.9.9.9/32' }] } },
  });
  assert.match(
    wrongIp.json.msg,
    new RegExp(`^ipamd holds ${esc(ip)} for this container, prevResult says 10\\.9\\.9\\.9`),
  );
  const goneNs = await n.call({
    ...att,
    netns: '/var/run/netns/eni-no-such-ns',
    command: 'CHECK',
    conf: { prevResult },
  });
  assert.equal(goneNs.json.code, 100);
  assert.match(goneNs.json.msg, /cannot read netns \/var\/run\/netns\/eni-no-such-ns|prevResult puts eth0 in/);
  const noNetns = await n.call({ ...att, netns: '', command: 'CHECK', conf: { prevResult } });
  assert.deepEqual([noNetns.json.code, noNetns.json.msg], [4, 'missing CNI_NETNS']);
  assert.equal((await n.call({ ...att, command: 'DEL', conf: { prevResult } })).code, 0);
});

test('DEL with ipamd down tears down the node side from prevResult', async (t) => {
  // The Node plugin's own behaviour (the shim spools the DEL instead: cni-shim-ipamd-down.test.ts).
  const n = await startCniNode(t, 'dd', { plugin: 'node' });
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const add = await n.call({ ...att, command: 'ADD' });
  assert.equal(add.code, 0, add.stdout);
  const ip = String(add.json.ips[0].address).split('/')[0]!;
  // The pod's policy routing as docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 4 has it for a secondary ENI (table 3);
  // ADD may have added the prio 512 rule itself already.
  await ruleAdd(n.node.path, ['priority', '512', 'to', ip, 'lookup', 'main']);
  await ruleAdd(n.node.path, ['priority', '1536', 'from', ip, 'lookup', '3']);
  // Another IP's rule must survive.
  await ruleAdd(n.node.path, ['priority', '1536', 'from', '10.99.0.1', 'lookup', '3']);
  await n.d.stop(5000);

  const check = await n.call({ ...att, command: 'CHECK', conf: { prevResult: add.json } });
  assert.deepEqual(
    [check.json?.code, check.json?.msg],
    [11, 'cannot reach ipamd to verify the allocation, try again later'],
  );
  const del = await n.call({ ...att, command: 'DEL', conf: { prevResult: add.json } });
  assert.deepEqual([del.code, del.stdout], [0, ''], `DEL: ${del.stdout} ${del.stderr}`);
  assert.match(del.stderr, /reclaim the IP later/);
  assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), [], 'host veth gone');
  assert.deepEqual(await ipj(n.node.path, ['route', 'show', `${ip}/32`]), [], 'host route gone');
  const rules = await ipj(n.node.path, ['rule', 'show']);
  assert.deepEqual(
    rules.filter((r) => r.src === ip || r.dst === ip),
    [],
    "the pod IP's rules are gone",
  );
  assert.ok(
    rules.some((r) => r.src === '10.99.0.1'),
    'other rules stay',
  );
  const again = await n.call({ ...att, command: 'DEL', conf: { prevResult: add.json } });
  assert.equal(again.code, 0, 'a repeated DEL succeeds');

  // The IP now belongs to another attachment (its route points elsewhere): its rules are left alone.
  await ipIn(n.node.path, ['link', 'add', 'other0', 'type', 'veth', 'peer', 'name', 'other1']);
  await ipIn(n.node.path, ['link', 'set', 'other0', 'up']);
  await ipIn(n.node.path, ['route', 'add', `${ip}/32`, 'dev', 'other0']);
  await ruleAdd(n.node.path, ['priority', '512', 'to', ip, 'lookup', 'main']);
  const stale = await n.call({ ...att, command: 'DEL', conf: { prevResult: add.json } });
  assert.equal(stale.code, 0);
  assert.match(stale.stderr, /another attachment holds it now/);
  assert.ok(
    (await ipj(n.node.path, ['rule', 'show'])).some((r) => r.dst === ip),
    "the new holder's rule stays",
  );
});
