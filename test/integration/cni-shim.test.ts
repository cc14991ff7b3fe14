/**
 * The native CNI shim (cni-plugin/shim) against the real ipamd and its CNI exec server,
 * in real namespaces: the fast path gives what the Node plugin gives (ADD/CHECK/DEL, both
 * netns path shapes, CHECK drift, error codes for malformed input, concurrent ADDs);
 * ipamd refusing to run an invocation ("F": the shim in another netns, a pod netns ipamd
 * cannot see) is a CNI error naming the DaemonSet setting, never a silent fallback; the
 * Node plugin runs only in developer mode (`nodePlugin` in the config). (The exec
 * protocol's edges: cni-shim-exec-edges.test.ts; ipamd down on a host without Node:
 * cni-shim-ipamd-down.test.ts.)
 *
 * The shim prints `eni-ipam: running <nodePlugin>: <reason>` on stderr when it execs the
 * Node plugin (ENI_IPAM_SHIM_DEBUG=1), which is how these tests tell the paths apart;
 * ipamd's log lines "CNI exec: invocation done" count the calls it ran.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { PLUGIN_PATH } from '../../kit/cni-exec.js';
import { createNamedNetns } from '../../kit/netns.js';
import { ipIn, ipj, startCniNode, type VerbCall } from '../helpers/cni-node.js';
import { pluginArgv } from '../helpers/plugin-under-test.js';
import {
  DEBUG,
  FELL_BACK,
  ipOf,
  newId,
  served,
  servedReaches,
  viaNode,
  viaShim,
  viaShimIn,
} from '../helpers/shim-calls.js';

/** An ADD result with the per-attachment values (IP, MACs, names, netns) replaced by placeholders. */
function shape(r: unknown, ip: string, netns: string): string {
  return JSON.stringify(r)
    .replaceAll(ip, '<ip>')
    .replaceAll(netns, '<netns>')
    .replace(/"([0-9a-f]{2}:){5}[0-9a-f]{2}"/g, '"<mac>"')
    .replace(/"eni[0-9a-f]{12}"/g, '"<veth>"');
}

/** The pod netns as iproute2 shows it, with the per-attachment values replaced. */
async function podState(netns: string, ip: string): Promise<string> {
  const parts = [await ipIn(netns, ['-4', '-o', 'addr']), await ipIn(netns, ['route']), await ipIn(netns, ['neigh'])];
  return parts
    .join('\n')
    .replaceAll(ip, '<ip>')
    .replace(/([0-9a-f]{2}:){5}[0-9a-f]{2}/g, '<mac>');
}

test('ADD, CHECK and DEL through the shim match the Node plugin, both netns shapes, and CHECK drift', async (t) => {
  const n = await startCniNode(t, 'sh', { plugin: 'shim' });
  for (const shapeOf of ['named', 'proc'] as const) {
    const results: Record<string, { out: string; pod: string; check: string; drift: unknown }> = {};
    for (const who of ['shim', 'node'] as const) {
      const run = who === 'shim' ? viaShim : viaNode;
      const pod = await n.pod(shapeOf);
      const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
      const before = await served(n);
      const add = await run(n, { ...att, command: 'ADD' });
      assert.equal(add.code, 0, `${who} ADD (${shapeOf}): ${add.stdout} ${add.stderr}`);
      if (who === 'shim') {
        assert.doesNotMatch(add.stderr, FELL_BACK, 'the shim used the exec socket');
        assert.equal(await servedReaches(n, before + 1), before + 1, 'ipamd ran the ADD in-process');
      }
      const ip = ipOf(add.json);
      const check = await run(n, { ...att, command: 'CHECK', conf: { prevResult: add.json } });
      assert.deepEqual([check.code, check.stdout], [0, ''], `${who} CHECK: ${check.stdout}`);
      const podNow = await podState(pod.path, ip);
      await ipIn(pod.path, ['route', 'del', 'default']);
      const drift = await run(n, { ...att, command: 'CHECK', conf: { prevResult: add.json } });
      assert.equal(drift.code, 1);
      const del = await run(n, { ...att, command: 'DEL', conf: { prevResult: add.json } });
      assert.deepEqual([del.code, del.stdout], [0, ''], `${who} DEL: ${del.stdout} ${del.stderr}`);
      if (who === 'shim') assert.doesNotMatch(del.stderr, FELL_BACK);
      assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), [], 'host veth gone');
      assert.equal((await ipIn(n.node.path, ['rule'])).includes(ip), false, 'pod rules gone');
      results[who] = {
        out: shape(add.json, ip, pod.path),
        pod: podNow,
        check: check.stdout,
        drift: JSON.parse(JSON.stringify(drift.json).replaceAll(pod.path, '<netns>')),
      };
    }
    assert.deepEqual(results.shim, results.node, `shim and Node plugin agree (${shapeOf} netns)`);
  }
  assert.equal((await n.d.status()).counts.assigned, 0);
});

test('malformed input gets the same CNI error through the shim as from the Node plugin', async (t) => {
  const n = await startCniNode(t, 'sm', { plugin: 'shim' });
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const cases: VerbCall[] = [
    { ...att, command: 'ADD', rawConfig: 'not json' },
    { ...att, command: 'ADD', rawConfig: '[1,2]' },
    {
      ...att,
      command: 'ADD',
      rawConfig: JSON.stringify({ ...n.config, execSocket: `${n.h.dir}/cni-exec.sock`, cniVersion: '9.9.9' }),
    },
    {
      ...att,
      command: 'ADD',
      rawConfig: JSON.stringify({ ...n.config, execSocket: `${n.h.dir}/cni-exec.sock`, mtu: 'big' }),
    },
    { ...att, command: 'ADD', containerId: '../x', conf: {} },
    { ...att, command: 'ADD', args: { K8S_POD_NAME: 'a', Bogus: '1' }, conf: {} },
    { ...att, command: 'FOO' as 'ADD', conf: {} },
  ];
  for (const c of cases) {
    const s = await viaShim(n, c);
    const o = await viaNode(n, c);
    assert.equal(s.code, 1, `shim: ${s.stdout}`);
    assert.deepEqual(
      [s.code, s.json?.code, s.json?.msg, s.json?.cniVersion],
      [o.code, o.json?.code, o.json?.msg, o.json?.cniVersion],
      `${c.rawConfig ?? JSON.stringify(c)}: shim ${s.stdout} vs node ${o.stdout}`,
    );
  }
  assert.equal((await n.d.status()).counts.assigned, 0);
});

test('concurrent ADDs through the shim run independently inside ipamd', async (t) => {
  const n = await startCniNode(t, 'sc', { plugin: 'shim', ipamdEnv: { WARM_IP_TARGET: '8' } });
  const pods = await Promise.all(Array.from({ length: 6 }, () => n.pod()));
  const atts = pods.map((p) => ({ containerId: newId(), netns: p.path, ifName: 'eth0' }));
  const adds = await Promise.all(atts.map((a) => viaShim(n, { ...a, command: 'ADD' })));
  for (const a of adds) assert.equal(a.code, 0, `${a.stdout} ${a.stderr}`);
  const ips = adds.map((a) => ipOf(a.json));
  assert.equal(new Set(ips).size, ips.length, 'distinct IPs');
  // ipamd traced each ADD's stages (ms since accept), and wired through its netlink helper:
  // no `ip-ready` mark, which only the ip-batch wiring records.
  const trace = (await (await fetch(`http://127.0.0.1:${n.d.introspectionPort}/v1/stage-trace`)).json()) as Record<
    string,
    { count: number; p50: number }
  >;
  for (const mark of ['decoded', 'checked', 'parsed', 'netns-checked', 'veth-up', 'ipamd-replied', 'answered'])
    assert.equal(trace[`cni.add.${mark}`]?.count, 6, `cni.add.${mark}: ${JSON.stringify(trace[`cni.add.${mark}`])}`);
  assert.equal(trace['cni.add.ip-ready'], undefined, 'ADD started no ip batch');
  assert.ok(trace['cni.add.answered']!.p50 >= trace['cni.add.veth-up']!.p50);
  for (const [i, p] of pods.entries())
    assert.match(
      await ipIn(p.path, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']),
      new RegExp(`inet ${ips[i]!.replaceAll('.', '\\.')}/32`),
    );
  const dels = await Promise.all(
    atts.map((a, i) => viaShim(n, { ...a, command: 'DEL', conf: { prevResult: adds[i]!.json } })),
  );
  for (const d of dels) assert.equal(d.code, 0, d.stdout);
  assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), []);
  assert.equal((await n.d.status()).counts.assigned, 0);
});

test('developer mode: with nodePlugin in the config the shim execs the Node plugin when ipamd is down (teardown from prevResult)', async (t) => {
  const n = await startCniNode(t, 'sd', { plugin: 'shim' });
  const dev = { nodePlugin: PLUGIN_PATH };
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const add = await viaShim(n, { ...att, command: 'ADD', conf: dev });
  assert.equal(add.code, 0, add.stdout);
  assert.doesNotMatch(add.stderr, FELL_BACK, 'ipamd serving: the exec socket is used even in developer mode');
  const ip = ipOf(add.json);
  assert.match(await ipIn(n.node.path, ['rule']), new RegExp(`to ${ip.replaceAll('.', '\\.')} lookup main`));
  await n.d.stop();
  const version = await viaShim(n, { command: 'VERSION', rawConfig: JSON.stringify({ cniVersion: '1.0.0', ...dev }) });
  assert.deepEqual(version.json, {
    cniVersion: '1.1.0',
    supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
  });
  assert.doesNotMatch(version.stderr, FELL_BACK, "VERSION is always the shim's own");
  const del = await viaShim(n, { ...att, command: 'DEL', conf: { ...dev, prevResult: add.json } });
  assert.deepEqual([del.code, del.stdout], [0, ''], del.stderr);
  assert.match(del.stderr, FELL_BACK, 'the Node plugin ran');
  assert.match(del.stderr, /ipamd not reached on DEL/);
  assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), [], 'host veth gone');
  assert.equal((await ipIn(n.node.path, ['rule'])).includes(ip), false, 'pod rules removed from prevResult');
  const add2 = await viaShim(n, { ...att, containerId: newId(), command: 'ADD', conf: dev });
  assert.deepEqual([add2.code, add2.json.code], [1, 11], 'ADD with ipamd down: try again later');
  assert.match(add2.stderr, FELL_BACK);
});

test('ipamd cannot run it here: a CNI error naming the DaemonSet setting (no fallback), or the Node plugin in developer mode', async (t) => {
  const n = await startCniNode(t, 'sf', { plugin: 'shim' });
  const before = await served(n);
  // A shim in another "node" netns than the one ipamd wires: ipamd is not in the host netns.
  const other = await createNamedNetns(`eni-sf-o${process.pid}`);
  t.after(() => other.remove());
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const add = await viaShim(n, { ...att, command: 'ADD' });
  assert.equal(add.code, 0, add.stdout);
  const refused = await viaShimIn(n, other.path, {
    ...att,
    containerId: newId(),
    netns: (await n.pod()).path,
    command: 'ADD',
  });
  assert.deepEqual([refused.code, refused.json?.code], [1, 5], refused.stdout);
  assert.match(refused.json.msg, /ipamd is not in the node's network namespace .*needs hostNetwork: true/);
  assert.deepEqual(await ipj(other.path, ['link', 'show', 'type', 'veth']), [], 'nothing was wired');
  const status = await viaShimIn(n, other.path, { command: 'STATUS' });
  assert.deepEqual([status.code, status.json?.code], [1, 50], status.stdout);
  const elsewhere = await viaShimIn(n, other.path, {
    ...att,
    containerId: newId(),
    netns: (await n.pod()).path,
    command: 'ADD',
    conf: { nodePlugin: PLUGIN_PATH },
  });
  assert.equal(elsewhere.code, 0, `${elsewhere.stdout} ${elsewhere.stderr}`);
  assert.match(elsewhere.stderr, /eni-ipam: running \S+: ipamd is not in the node's network namespace/);
  assert.equal(
    (await ipj(other.path, ['link', 'show', 'type', 'veth'])).length,
    1,
    'the Node plugin wired the node side in its own netns',
  );
  // A pod netns bind-mounted in a private mount namespace of the shim: ipamd cannot see it.
  const hidden = await n.pod('proc');
  const dir = path.join(n.h.dir, 'hidden');
  const script = `mkdir -p ${dir} && mount -t tmpfs none ${dir} && touch ${dir}/ns && mount --bind ${hidden.path} ${dir}/ns && exec "$@"`;
  const inPrivateMounts = await n.call({
    containerId: newId(),
    netns: `${dir}/ns`,
    ifName: 'eth0',
    command: 'ADD',
    env: DEBUG,
    plugin: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', ...pluginArgv('shim')],
  });
  assert.deepEqual(
    [inPrivateMounts.code, inPrivateMounts.json?.code],
    [1, 5],
    `${inPrivateMounts.stdout} ${inPrivateMounts.stderr}`,
  );
  assert.match(
    inPrivateMounts.json.msg,
    new RegExp(
      `ipamd cannot enter the pod netns: CNI_NETNS ${dir}/ns does not exist in ipamd's mount namespace \\(ENOENT\\); the eni-ipam DaemonSet needs the ${dir} hostPath mount with mountPropagation: HostToContainer`,
    ),
  );
  assert.deepEqual(await ipj(hidden.path, ['link', 'show', 'type', 'veth']), [], 'the pod was not wired');
  assert.equal(await servedReaches(n, before + 1), before + 1, 'ipamd ran only the first ADD');
});
