/**
 * The native CNI shim (cni-plugin/shim) against the real ipamd and its CNI exec server,
 * in real namespaces: the fast path gives what the Node plugin gives (ADD/CHECK/DEL, both
 * netns path shapes, CHECK drift, error codes for malformed input, concurrent ADDs);
 * ipamd refusing to run an invocation ("F": the shim in another netns, a pod netns ipamd
 * cannot see) is a CNI error naming the DaemonSet setting, never a silent fallback; the
 * Node plugin runs only in developer mode (`nodePlugin` in the config); a connection
 * dropped after the request was sent gives CNI error 11 and never a second ADD; a config
 * over the protocol's 8 MiB is refused whole. (ipamd down on a host without Node:
 * cni-shim-ipamd-down.test.ts.)
 *
 * The shim prints `eni-ipam: running <nodePlugin>: <reason>` on stderr when it execs the
 * Node plugin (ENI_IPAM_SHIM_DEBUG=1), which is how these tests tell the paths apart;
 * ipamd's log lines "CNI exec: invocation done" count the calls it ran.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { execPlugin, PLUGIN_PATH, type CniOutcome } from '../kit/cni-exec.js';
import { createNamedNetns } from '../kit/netns.js';
import { decodeRequest, encodeResult, encodeUnavailable, MAX_STDIN_BYTES } from '../../ipamd/cni-exec/protocol.js';
import { spoolDirFor } from '../../ipamd/cni-exec/spool.js';
import { ipIn, ipj, startCniNode, type CniNode, type VerbCall } from '../helpers/cni-node.js';
import { pluginArgv } from '../helpers/plugin-under-test.js';
import { waitFor } from '../helpers/wait.js';

const newId = () => randomBytes(32).toString('hex');
const DEBUG = { ENI_IPAM_SHIM_DEBUG: '1' };
const FELL_BACK = /eni-ipam: running \S+eni-ipam\.cjs: /;

/** Runs `c` through the shim (with the fallback trace on) or the Node plugin. */
const viaShim = (n: CniNode, c: VerbCall): Promise<CniOutcome> =>
  n.call({ ...c, plugin: pluginArgv('shim'), env: { ...DEBUG, ...c.env } });
const viaNode = (n: CniNode, c: VerbCall): Promise<CniOutcome> => n.call({ ...c, plugin: pluginArgv('node') });

/** Invocations ipamd's exec server ran so far (from its log). */
async function served(n: CniNode): Promise<number> {
  return (await readFile(path.join(n.h.dir, 'ipamd.log'), 'utf8'))
    .split('\n')
    .filter((l) => l.includes('"CNI exec: invocation done"')).length;
}

/** Waits until ipamd's log shows `count` exec invocations (its log is written asynchronously). */
async function servedReaches(n: CniNode, count: number): Promise<number> {
  return waitFor(
    `ipamd logged ${count} exec invocations`,
    async () => {
      const s = await served(n);
      return s >= count ? s : undefined;
    },
    5000,
    50,
  );
}

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

const ipOf = (r: { ips: Array<{ address: string }> }): string => r.ips[0]!.address.split('/')[0]!;

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

/** Runs the shim inside the netns at `nodePath` instead of the node's (same config). */
function viaShimIn(n: CniNode, nodePath: string, c: VerbCall): Promise<CniOutcome> {
  return n.call({ ...c, plugin: ['nsenter', `--net=${nodePath}`, ...pluginArgv('shim')], env: DEBUG });
}

test('a connection dropped after the request was sent is CNI error 11, never a fallback (no double ADD)', async (t) => {
  const n = await startCniNode(t, 'sx', { plugin: 'shim' });
  const fake = path.join(n.h.dir, 'fake-exec.sock');
  let requests = 0;
  let mode: 'drop' | 'partial' | 'garbage' = 'drop';
  const server = net.createServer((c) => {
    let buf = Buffer.alloc(0);
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (decodeRequest(buf).state !== 'complete') return;
      requests++;
      if (mode === 'drop') c.destroy();
      else if (mode === 'partial') c.end(Buffer.from('EIX1R\0\0'));
      else c.end(Buffer.from('hello'));
    });
  });
  await new Promise<void>((r) => server.listen(fake, r));
  t.after(() => new Promise((r) => server.close(r)));
  for (const m of ['drop', 'partial', 'garbage'] as const) {
    mode = m;
    const pod = await n.pod();
    const out = await viaShim(n, {
      containerId: newId(),
      netns: pod.path,
      ifName: 'eth0',
      command: 'ADD',
      conf: { execSocket: fake, cniVersion: '0.4.0' },
    });
    assert.deepEqual([out.code, out.json?.code, out.json?.cniVersion], [1, 11, '0.4.0'], `${m}: ${out.stdout}`);
    assert.doesNotMatch(out.stderr, FELL_BACK, `${m}: no fallback after the request was sent`);
  }
  assert.equal(requests, 3);
  assert.equal((await n.d.status()).counts.assigned, 0, 'no ADD reached ipamd');
  assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), []);
});

test('ipamd answering "U" (shutting down, nothing done): ADD retries and gets served, DEL is spooled, STATUS is 50', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-shim-u-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'exec.sock');
  let unavailable = 0;
  let served = 0;
  const server = net.createServer((c) => {
    let buf = Buffer.alloc(0);
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const r = decodeRequest(buf);
      if (r.state !== 'complete') return;
      const verb = r.request.env.CNI_COMMAND;
      if (verb !== 'ADD' || unavailable < 3) {
        unavailable++;
        c.end(encodeUnavailable('ipamd is shutting down'));
        return;
      }
      served++;
      c.end(encodeResult(0, 'served ADD', ''));
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
  t.after(() => new Promise((r) => server.close(r)));
  const conf = (extra: object = {}) =>
    JSON.stringify({ cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', execSocket: sock, ...extra });
  const add = await execPlugin({
    command: 'ADD',
    containerId: newId(),
    netns: '/proc/self/ns/net',
    config: conf({ ipamdWaitSeconds: 5 }),
    plugin: pluginArgv('shim'),
  });
  assert.deepEqual(
    [add.code, add.stdout, unavailable, served],
    [0, 'served ADD', 3, 1],
    'retried after each U, served once',
  );
  const id = newId();
  const del = await execPlugin({ command: 'DEL', containerId: id, config: conf(), plugin: pluginArgv('shim') });
  assert.deepEqual([del.code, del.stdout], [0, ''], del.stderr);
  assert.match(del.stderr, /ipamd is not serving \(ipamd is shutting down\)/);
  assert.equal((await readdir(spoolDirFor(sock))).length, 1);
  const status = await execPlugin({ command: 'STATUS', config: conf(), plugin: pluginArgv('shim') });
  assert.deepEqual([status.code, status.json?.code, status.json?.details], [1, 50, 'ipamd is shutting down']);
});

test('the shim reads execSocket from the top level of the config only (last one wins); unreadable configs get their CNI code', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-shim-scan-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'exec.sock');
  const server = net.createServer((c) => {
    let buf = Buffer.alloc(0);
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const r = decodeRequest(buf);
      if (r.state === 'complete') c.end(encodeResult(0, `served ${r.request.env.CNI_COMMAND}`, ''));
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
  t.after(() => new Promise((r) => server.close(r)));
  const run = (config: string) => execPlugin({ command: 'CHECK', config, plugin: pluginArgv('shim'), env: DEBUG });
  const s = JSON.stringify(sock);
  for (const config of [
    `{"prevResult":{"execSocket":"/nope"},"execSocket":${s}}`,
    `{"execSocket":"/nope","execSocket":${s}}`,
    ` {"a":[1,{"b":"\\"}]"}],"n":-1.5e3,"t":true,"z":null,"execSocket":${s}} \n`,
  ]) {
    const out = await run(config);
    assert.deepEqual([out.code, out.stdout], [0, 'served CHECK'], config);
  }
  const cases: Array<[string, number, RegExp]> = [
    [`{"exec\\u0053ocket":${s}}`, 11, /^ipamd is not serving on \/var\/run\/eni-ipam\/cni-exec\.sock/], // unscannable key: the default socket
    ['{"execSocket":""}', 7, /^invalid network configuration$/],
    [`{"execSocket":${s}`, 6, /^failed to decode/],
    [`[${s}]`, 6, /^failed to decode/],
    ['', 6, /^failed to decode/],
    [`${'['.repeat(100)}${']'.repeat(100)}`, 6, /^failed to decode/],
  ];
  for (const [config, code, msg] of cases) {
    const out = await run(config);
    assert.deepEqual([out.code, out.json?.code], [1, code], `${config}: ${out.stdout}`);
    assert.match(out.json.msg, msg, config);
    assert.doesNotMatch(out.stderr, FELL_BACK);
  }
});

test('a network configuration over the exec protocol limit is refused whole (code 7), one under it is served whole', async (t) => {
  const n = await startCniNode(t, 'sl', { plugin: 'shim' });
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const big = await viaShim(n, { ...att, command: 'ADD', conf: { padding: 'x'.repeat(MAX_STDIN_BYTES) } });
  assert.deepEqual([big.code, big.json?.code, big.json?.msg], [1, 7, 'network configuration too large'], big.stdout);
  assert.match(big.json.details, /^stdin has \d+ bytes; eni-ipam accepts at most 8388608 \(8 MiB\)$/);
  const bigDel = await viaShim(n, { ...att, command: 'DEL', conf: { padding: 'x'.repeat(MAX_STDIN_BYTES) } });
  assert.deepEqual([bigDel.code, bigDel.json?.code], [1, 7], 'a DEL too: never cut, never spooled half-read');
  // Just under the limit: ipamd gets every byte and runs it (the padding is an unknown key, kept).
  const conf = { ...n.config, ...att, padding: '' };
  const room = MAX_STDIN_BYTES - Buffer.byteLength(JSON.stringify(conf)) - 100;
  const near = await viaShim(n, { ...att, command: 'ADD', conf: { padding: 'y'.repeat(room) } });
  assert.equal(near.code, 0, `${near.stdout.slice(0, 300)} ${near.stderr}`);
  assert.equal(ipOf(near.json).split('.').length, 4);
  assert.equal((await n.d.status()).counts.assigned, 1);
});
