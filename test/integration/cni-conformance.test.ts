/**
 * CNI spec conformance of the real plugin against the real ipamd (simulated cloud), in
 * real namespaces, per version and verb: the ADD result shape for every cniVersion,
 * VERSION, the verbs' version gates (CHECK from 0.4.0, GC and STATUS from 1.1.0), error
 * objects, ADD inside a conflist, GC with `cni.dev/valid-attachments`, and STATUS with
 * ipamd up, with an instance at its limits (pool empty and cannot grow: 50, the running
 * pods are unaffected), stopped, killed (stale socket) and absent (all 50).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { SUPPORTED_VERSIONS } from '../../cni-plugin/versions.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { ipj, startCniNode } from '../helpers/cni-node.js';
import { waitFor } from '../../kit/wait.js';

const newId = () => randomBytes(32).toString('hex');
const legacy = (v: string) => v.startsWith('0.');

// Once with the Node plugin, once through the native shim (ipamd's exec server runs the verbs).
for (const plugin of ['node', 'shim'] as const)
  test(`result shape, verb gates and error objects per cniVersion (${plugin})`, async (t) => {
    const n = await startCniNode(t, `cv${plugin[0]}`, { plugin });
    for (const v of SUPPORTED_VERSIONS) {
      const pod = await n.pod();
      const id = newId();
      const conf = { cniVersion: v };
      const att = { containerId: id, netns: pod.path, ifName: 'eth0', conf };
      const add = await n.call({ ...att, command: 'ADD' });
      assert.equal(add.code, 0, `ADD ${v}: ${add.stdout} ${add.stderr}`);
      const r = add.json;
      assert.equal(r.cniVersion, v);
      assert.deepEqual(Object.keys(r).sort(), ['cniVersion', 'dns', 'interfaces', 'ips', 'routes']);
      const ip = String(r.ips[0].address).split('/')[0];
      assert.deepEqual(
        r.ips,
        [{ ...(legacy(v) ? { version: '4' } : {}), address: `${ip}/32`, gateway: '169.254.1.1', interface: 1 }],
        v,
      );
      assert.deepEqual(r.routes, [{ dst: '0.0.0.0/0' }]);
      assert.equal(r.interfaces.length, 2);
      assert.equal(r.interfaces[1].sandbox, pod.path);
      assert.equal(r.interfaces[0].sandbox, undefined);
      for (const i of r.interfaces) assert.equal('mtu' in i, v === '1.1.0', `interface mtu only in 1.1.0 (${v})`);

      const check = await n.call({ ...att, command: 'CHECK', conf: { ...conf, prevResult: r } });
      if (v === '0.3.0' || v === '0.3.1') {
        assert.equal(check.code, 1);
        assert.deepEqual(
          [check.json.cniVersion, check.json.code, check.json.msg],
          [v, 1, 'config version does not allow CHECK'],
        );
      } else {
        assert.equal(check.code, 0, `CHECK ${v}: ${check.stdout}`);
        assert.equal(check.stdout, '', 'CHECK prints nothing on success');
      }
      for (const verb of ['GC', 'STATUS'] as const) {
        const out = await n.call({
          command: verb,
          conf: { ...conf, 'cni.dev/valid-attachments': [{ containerID: id, ifname: 'eth0' }] },
        });
        if (v === '1.1.0') {
          assert.deepEqual([out.code, out.stdout], [0, ''], `${verb} ${v}: ${out.stdout}`);
        } else {
          assert.equal(out.code, 1);
          assert.deepEqual(
            [out.json.cniVersion, out.json.code, out.json.msg],
            [v, 1, `config version does not allow ${verb}`],
          );
        }
      }
      const bad = await n.call({
        ...att,
        command: 'ADD',
        containerId: newId(),
        conf: { ...conf, vethPrefix: 'toolong' },
      });
      assert.equal(bad.code, 1);
      assert.deepEqual(Object.keys(bad.json).sort(), ['cniVersion', 'code', 'details', 'msg']);
      assert.deepEqual([bad.json.cniVersion, bad.json.code], [v, 7]);

      const del = await n.call({ ...att, command: 'DEL', conf: { ...conf, prevResult: r } });
      assert.deepEqual([del.code, del.stdout], [0, ''], `DEL ${v}: ${del.stdout}`);
      assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), []);
    }
    const version = await n.call({ command: 'VERSION', rawConfig: '' });
    assert.deepEqual(version.json, {
      cniVersion: '1.1.0',
      supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
    });
    const old = await n.call({ command: 'STATUS', conf: { cniVersion: '0.2.0' } });
    assert.deepEqual([old.code, old.json.code], [1, 1]);
    const noCmd = await n.call({ command: '' as 'ADD' });
    assert.equal(noCmd.json.code, 4);
    assert.equal((await n.d.status()).counts.assigned, 0);
  });

test('ADD in a conflist appends to prevResult, and CHECK/DEL accept the chained result', async (t) => {
  const n = await startCniNode(t, 'cc');
  const pod = await n.pod();
  const id = newId();
  const prevResult = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'net9', sandbox: pod.path }],
    ips: [{ address: '192.168.50.2/24', interface: 0 }],
    routes: [{ dst: '192.168.0.0/16' }],
    dns: { nameservers: ['10.0.0.2'] },
  };
  const att = { containerId: id, netns: pod.path, ifName: 'eth0' };
  const add = await n.call({ ...att, command: 'ADD', conf: { cniVersion: '1.0.0', prevResult } });
  assert.equal(add.code, 0, add.stdout);
  const r = add.json;
  assert.deepEqual(r.interfaces.map((i: { name: string }) => i.name).slice(0, 1), ['net9']);
  assert.equal(r.interfaces.length, 3);
  assert.deepEqual(
    r.ips.map((i: { interface: number }) => i.interface),
    [0, 2],
  );
  assert.deepEqual(r.routes, [{ dst: '192.168.0.0/16' }, { dst: '0.0.0.0/0' }]);
  assert.deepEqual(r.dns, { nameservers: ['10.0.0.2'] });
  const check = await n.call({ ...att, command: 'CHECK', conf: { cniVersion: '1.0.0', prevResult: r } });
  assert.deepEqual([check.code, check.stdout], [0, ''], check.stdout);
  const del = await n.call({ ...att, command: 'DEL', conf: { cniVersion: '1.0.0', prevResult: r } });
  assert.equal(del.code, 0);
});

test('GC releases the attachments not in cni.dev/valid-attachments, in its network only', async (t) => {
  const n = await startCniNode(t, 'gc');
  const a = { containerId: newId(), netns: (await n.pod()).path, ifName: 'eth0' };
  const podB = await n.pod();
  const b = { containerId: newId(), netns: podB.path, ifName: 'eth0' };
  const c = {
    containerId: newId(),
    netns: (await n.pod()).path,
    ifName: 'eth0',
    conf: { name: 'other-net', vethPrefix: 'oth' },
  };
  const results = [];
  for (const x of [a, b, c]) {
    const add = await n.call({ ...x, command: 'ADD' });
    assert.equal(add.code, 0, add.stdout);
    results.push(add.json);
  }
  const [ra, rb, rc] = results;
  const ipB = String(rb.ips[0].address).split('/')[0];
  assert.equal((await n.d.status()).counts.assigned, 3);

  const valid = [
    { containerID: a.containerId, ifname: 'eth0' },
    { containerID: newId(), ifname: 'eth0' },
  ];
  // B's pod is still wired (its netns, veth and host route exist): the list is one source's
  // word against the kernel's, so B is kept (a second runtime sharing the conf dir must not
  // be able to free the real one's pods).
  const held = await n.call({ command: 'GC', conf: { 'cni.dev/valid-attachments': valid } });
  assert.deepEqual([held.code, held.stdout], [0, ''], `GC: ${held.stdout} ${held.stderr}`);
  assert.equal((await n.d.status()).counts.assigned, 3, 'B is kept while the kernel shows it wired');
  // B's sandbox goes without a DEL: its netns, and with it the veth and host route, are gone.
  await podB.remove();
  await waitFor(
    "B's veth to go with its netns",
    async () => (await ipj(n.node.path, ['route', 'show', `${ipB}/32`])).length === 0,
    10_000,
  );
  const gc = await n.call({ command: 'GC', conf: { 'cni.dev/valid-attachments': valid } });
  assert.deepEqual([gc.code, gc.stdout], [0, ''], `GC: ${gc.stdout} ${gc.stderr}`);
  const s = await n.d.status();
  assert.equal(s.counts.assigned, 2, "B released; A and the other network's C kept");
  assert.ok(s.counts.cooling >= 1, 'released into cooldown');
  const veths = (await ipj(n.node.path, ['link', 'show', 'type', 'veth'])).map((l) => l.ifname).sort();
  assert.deepEqual(veths, [ra.interfaces[0].name, rc.interfaces[0].name].sort(), "B's host veth is gone");
  assert.deepEqual(await ipj(n.node.path, ['route', 'show', `${ipB}/32`]), [], "B's host route is gone");
  assert.deepEqual(
    (await ipj(n.node.path, ['rule', 'show'])).filter((r) => r.src === ipB || r.dst === ipB),
    [],
    "B's rules are gone",
  );
  // CHECK of B now fails (its netns is gone, and ipamd holds nothing for it any more).
  const checkB = await n.call({ ...b, command: 'CHECK', conf: { prevResult: rb } });
  assert.equal(checkB.code, 1, checkB.stdout);
  for (const [x, r] of [
    [a, ra],
    [c, rc],
  ] as const) {
    const ok = await n.call({ ...x, command: 'CHECK', conf: { ...('conf' in x ? x.conf : {}), prevResult: r } });
    assert.deepEqual([ok.code, ok.stdout], [0, ''], ok.stdout);
  }
  const again = await n.call({ command: 'GC', conf: { 'cni.dev/valid-attachments': valid } });
  assert.equal(again.code, 0);
  assert.equal((await n.d.status()).counts.assigned, 2, 'a repeated GC changes nothing');

  const noList = await n.call({ command: 'GC' });
  assert.deepEqual([noList.code, noList.json.code, noList.json.msg], [1, 7, 'GC needs cni.dev/valid-attachments']);
  const badList = await n.call({ command: 'GC', conf: { 'cni.dev/valid-attachments': [{ containerID: 'x' }] } });
  assert.equal(badList.json.code, 7);
  for (const x of [a, b, c]) assert.equal((await n.call({ ...x, command: 'DEL' })).code, 0);
  assert.equal((await n.d.status()).counts.assigned, 0);
});

test('STATUS: 0 with ipamd up; 50 when the pool is empty and cannot grow, with ipamd down, killed or absent', async (t) => {
  // CNI 1.1.0 STATUS: 50 "cannot service ADD requests"; 51 only when existing containers may
  // lose connectivity, which none of these conditions causes (a running pod keeps passing CHECK).
  // t3.medium: 3 ENIs × 5 secondary IPs = 15 pod IPs at most.
  // The Node plugin's messages with ipamd down (the shim's: cni-shim-ipamd-down.test.ts).
  const n = await startCniNode(t, 'st', {
    instanceType: 't3.medium',
    ipamdEnv: { WARM_IP_TARGET: '2' },
    plugin: 'node',
  });
  const up = await n.call({ command: 'STATUS' });
  assert.deepEqual([up.code, up.stdout], [0, ''], up.stdout);
  const running = { containerId: newId(), netns: (await n.pod()).path, ifName: 'eth0' };
  const add = await n.call({ ...running, command: 'ADD' });
  assert.equal(add.code, 0, add.stdout);
  const client = ipamdClient(n.h.socket);
  t.after(() => client.close());
  for (let i = 0; i < 14; i++) await client.add(`fill-${i}`);
  const s = await n.d.status();
  assert.deepEqual([s.counts.assigned, s.counts.available, s.enis.length], [15, 0, 3]);
  const full = await n.call({ command: 'STATUS' });
  assert.equal(full.code, 1);
  assert.equal(full.json.code, 50, full.stdout);
  assert.equal(full.json.cniVersion, '1.1.0');
  assert.match(
    full.json.msg,
    /no IP can be had now \(15 assigned.*instance type t3.medium is at its ENI limit \(3 ENIs\)/,
  );
  await assert.rejects(
    client.add('fill-16'),
    (e: Error & { code: number }) => e.code === 8,
    'ADD agrees: RESOURCE_EXHAUSTED',
  );
  const check = await n.call({ ...running, command: 'CHECK', conf: { prevResult: add.json } });
  assert.deepEqual(
    [check.code, check.stdout],
    [0, ''],
    `the running pod is intact while STATUS says 50: ${check.stdout}`,
  );
  await client.del('fill-0');
  const cooling = await n.call({ command: 'STATUS' });
  assert.equal(cooling.json?.code, 50, 'an IP cooling for 30 s is no IP now');

  await n.d.stop(5000);
  await waitFor('ipamd to be gone', async () => (await n.call({ command: 'STATUS' })).json?.code === 50, 10_000);
  const down = await n.call({ command: 'STATUS' });
  assert.equal(down.code, 1);
  assert.deepEqual([down.json.code, down.json.msg], [50, `ipamd is not available on ${n.h.socket}`]);
  assert.match(down.json.details, /IpamStatus failed/);

  // Killed (stale socket file, nothing listening: also how a not-yet-serving ipamd looks), then no socket at all.
  const again = await n.h.startIpamd();
  const restarted = await n.call({ command: 'STATUS' });
  assert.match(
    restarted.json?.msg ?? '',
    /^no IP can be had now/,
    `ipamd answers again (its restored pool is still full): ${restarted.stdout}`,
  );
  await again.kill9();
  assert.equal(existsSync(n.h.socket), true, 'SIGKILL leaves the socket file behind');
  const killed = await n.call({ command: 'STATUS' });
  assert.deepEqual(
    [killed.code, killed.json?.code, killed.json?.msg],
    [1, 50, `ipamd is not available on ${n.h.socket}`],
    killed.stdout,
  );
  await rm(n.h.socket, { force: true });
  const absent = await n.call({ command: 'STATUS' });
  assert.deepEqual([absent.code, absent.json?.code], [1, 50], absent.stdout);
  assert.match(absent.json.details, /ENOENT|No such file|connect/i);
});
