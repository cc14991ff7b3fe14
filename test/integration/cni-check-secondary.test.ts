/**
 * CHECK drift that cni-check.test.ts leaves out, on real kernel state: a pod on a
 * secondary ENI (so ADD writes the prio 1536 from-pod rule to the ENI's table) in a
 * `/proc/<pid>/ns/net` namespace, and the drifts CHECK reports other than "missing":
 * the from-pod rule, a host veth that is down, a pod MAC that differs from prevResult,
 * a neighbour entry that is no longer permanent, and a host route to another device.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { ipIn, ipj, startCniNode } from '../helpers/cni-node.js';

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

test('CHECK on a secondary-ENI pod names the from-pod rule, a down host veth, a foreign MAC, a stale neighbour, a misrouted host route', async (t) => {
  const n = await startCniNode(t, 'cs');
  // Addresses go from the lowest device number up: fill the primary ENI so the pod lands on a secondary one.
  const client = ipamdClient(n.h.socket);
  t.after(() => client.close());
  for (let i = 0; ; i++) {
    assert.ok(i < 30, 'the pool never reached a secondary ENI');
    if ((await client.add(`fill-${i}`)).device_number > 0) break;
  }

  const pod = await n.pod('proc');
  const att = { containerId: randomBytes(32).toString('hex'), netns: pod.path, ifName: 'eth0' };
  const add = await n.call({ ...att, command: 'ADD' });
  assert.equal(add.code, 0, add.stdout);
  const prevResult = add.json;
  const ip = String(prevResult.ips[0].address).split('/')[0]!;
  const [hostIf, podIf] = prevResult.interfaces as Array<{ name: string; mac: string }>;
  const fromRule = (await ipj(n.node.path, ['rule', 'show'])).find((r) => r.priority === 1536 && r.src === ip);
  assert.ok(
    fromRule && Number(fromRule.table) >= 2,
    `a from-pod rule to a secondary ENI table: ${JSON.stringify(fromRule)}`,
  );
  const P = esc(pod.path);
  const drifts: Array<{ what: string; apply: () => Promise<unknown>; want: RegExp }> = [
    {
      what: 'from-pod rule',
      apply: () => ipIn(n.node.path, ['rule', 'del', 'priority', '1536', 'from', ip]),
      want: new RegExp(`^ip rule priority 1536 from ${esc(ip)} lookup ${fromRule.table} missing on the node$`),
    },
    {
      what: 'host veth up',
      apply: () => ipIn(n.node.path, ['link', 'set', hostIf!.name, 'down']),
      want: new RegExp(`host veth ${hostIf!.name} is down on the node`),
    },
    // (a new MAC also flushes the interface's neighbour entries: CHECK lists that next)
    {
      what: 'pod MAC',
      apply: () => ipIn(pod.path, ['link', 'set', 'eth0', 'address', '02:00:00:00:0e:99']),
      want: new RegExp(
        `^interface eth0 in ${P} has MAC 02:00:00:00:0e:99, prevResult says ${podIf!.mac.toLowerCase()}(;|$)`,
      ),
    },
    {
      what: 'permanent neighbour',
      apply: () =>
        ipIn(pod.path, ['neigh', 'replace', '169.254.1.1', 'lladdr', hostIf!.mac, 'dev', 'eth0', 'nud', 'reachable']),
      want: new RegExp(`^neighbour 169\\.254\\.1\\.1 on eth0 in ${P} is not permanent`),
    },
    {
      what: 'host route device',
      want: new RegExp(`^host route ${esc(ip)}/32 points at other0, not ${hostIf!.name}$`),
      apply: async () => {
        await ipIn(n.node.path, ['link', 'add', 'other0', 'type', 'veth', 'peer', 'name', 'other1']);
        await ipIn(n.node.path, ['link', 'set', 'other0', 'up']);
        await ipIn(n.node.path, ['route', 'replace', `${ip}/32`, 'dev', 'other0']);
      },
    },
  ];
  for (const d of drifts) {
    const again = await n.call({ ...att, command: 'ADD' }); // a repeated ADD re-wires from scratch
    assert.deepEqual([again.code, again.json], [0, prevResult], `re-ADD before ${d.what}`);
    const ok = await n.call({ ...att, command: 'CHECK', conf: { prevResult } });
    assert.deepEqual([ok.code, ok.stdout], [0, ''], `CHECK before ${d.what}: ${ok.stdout}`);
    await d.apply();
    const bad = await n.call({ ...att, command: 'CHECK', conf: { prevResult } });
    assert.equal(bad.code, 1, `CHECK after changing the ${d.what} must fail`);
    assert.equal(bad.json.code, 100);
    assert.match(bad.json.msg, d.want, `${d.what}: ${bad.json.msg}`);
  }
  await ipIn(n.node.path, ['link', 'del', 'other0']);
  const del = await n.call({ ...att, command: 'DEL', conf: { prevResult } });
  assert.equal(del.code, 0, del.stdout);
  assert.deepEqual(
    (await ipj(n.node.path, ['rule', 'show'])).filter((r) => r.src === ip || r.dst === ip),
    [],
    'DEL removed both pod rules',
  );
});
