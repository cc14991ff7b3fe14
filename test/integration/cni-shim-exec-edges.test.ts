/**
 * The native CNI shim against the real ipamd's exec socket at the edges of the exec
 * protocol, in real namespaces: a connection dropped after the request was sent is CNI
 * error 11 and never a second ADD; ipamd answering "U" (shutting down) makes ADD retry,
 * DEL spool and STATUS answer 50; `execSocket` is read from the config's top level only;
 * a config over the protocol's 8 MiB is refused whole. (The fast path itself:
 * cni-shim.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { execPlugin } from '../../kit/cni-exec.js';
import { createNodeMountNs } from '../../kit/node-mountns.js';
import { decodeRequest, encodeResult, encodeUnavailable, MAX_STDIN_BYTES } from '../../ipamd/cni-exec/protocol.js';
import { spoolDirFor } from '../../ipamd/cni-exec/spool.js';
import { ipj, startCniNode } from '../helpers/cni-node.js';
import { pluginArgv } from '../helpers/plugin-under-test.js';
import { DEBUG, FELL_BACK, ipOf, newId, viaShim } from '../helpers/shim-calls.js';

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
  // An unscannable key makes the shim use its default socket, /var/run/eni-ipam/cni-exec.sock: run
  // that case in a node mount namespace of this test's own, where that dir is this test's empty
  // dir, so an ipamd serving the machine's default socket (a cluster, a demo) cannot answer it.
  const own = await createNodeMountNs({ root: dir, binds: [{ nodePath: '/run/eni-ipam' }] });
  t.after(() => own.close());
  const unscannable = await execPlugin({
    command: 'CHECK',
    config: `{"exec\\u0053ocket":${s}}`,
    plugin: ['nsenter', `--mount=${own.nsPath}`, '--', ...pluginArgv('shim')],
    env: DEBUG,
  });
  assert.deepEqual([unscannable.code, unscannable.json?.code], [1, 11], unscannable.stdout);
  assert.match(unscannable.json.msg, /^ipamd is not serving on \/var\/run\/eni-ipam\/cni-exec\.sock/);
  const cases: Array<[string, number, RegExp]> = [
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
