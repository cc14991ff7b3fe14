/**
 * Bounds of ipamd's CNI exec socket (docs/design.md#bounds-on-bad-input), against the real ipamd process
 * over its real Unix socket: a request must arrive whole within a deadline from the
 * accept (a byte every second does not extend it), connections still receiving a request
 * are capped (an ADD arriving meanwhile is told "busy" and retries within its wait), and
 * so are the bytes held by partial requests (ipamd's RSS is read from /proc/<pid>/status).
 * After each attack the shim is served normally again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { MAX_STDIN_BYTES } from '../../ipamd/cni-exec/protocol.js';
import { MAX_BUFFERED_BYTES, MAX_PENDING, REQUEST_DEADLINE_MS } from '../../ipamd/cni-exec/server.js';
import { startCniNode, type CniNode } from '../helpers/cni-node.js';
import { pluginArgv } from '../helpers/plugin-under-test.js';
import { waitFor } from '../../kit/wait.js';

/** ipamd's resident set in bytes. */
async function rss(pid: number): Promise<number> {
  const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** Opens a connection to the exec socket; `closed` is set when the server closes it. */
function open(sock: string): Promise<{ c: net.Socket; closed: () => boolean; closedAt: () => number }> {
  return new Promise((resolve, reject) => {
    let at = 0;
    const c = net.createConnection(sock, () => resolve({ c, closed: () => at > 0, closedAt: () => at }));
    c.on('error', () => undefined);
    c.on('close', () => {
      at = performance.now();
    });
    c.resume(); // read (and discard) whatever ipamd answers, so its FIN is seen
    c.once('error', reject);
  });
}

/** A shim ADD then DEL succeed (the socket serves after an attack). */
async function stillServes(n: CniNode): Promise<void> {
  const pod = await n.pod();
  const att = { containerId: randomBytes(32).toString('hex'), netns: pod.path, ifName: 'eth0' };
  const add = await n.call({ ...att, command: 'ADD', plugin: pluginArgv('shim') });
  assert.equal(add.code, 0, `${add.stdout} ${add.stderr}`);
  const del = await n.call({ ...att, command: 'DEL', plugin: pluginArgv('shim') });
  assert.equal(del.code, 0, del.stdout);
}

test('200 slow-drip connections (a byte a second) are all dropped by the whole-request deadline', async (t) => {
  const n = await startCniNode(t, 'bd', { plugin: 'shim' });
  const sock = n.config.execSocket as string;
  const t0 = performance.now();
  const conns = await Promise.all(Array.from({ length: 200 }, () => open(sock)));
  t.after(() => {
    for (const x of conns) x.c.destroy();
  });
  // A well-formed request that is never finished: env (16 bytes), then a stdin of 1000 bytes sent one a second.
  const wire = Buffer.from('EIX1\0\0\0\x10CNI_COMMAND=ADD\0\0\0\x03\xe8', 'latin1');
  for (const x of conns) x.c.write(wire);
  const drip = setInterval(() => {
    for (const x of conns) if (!x.closed()) x.c.write(' ');
  }, 1000);
  t.after(() => clearInterval(drip));
  // A real ADD while the drips hold every pending slot: answered "U" (busy), it retries within its wait.
  const pod = await n.pod();
  const during = n.call({
    containerId: randomBytes(32).toString('hex'),
    netns: pod.path,
    ifName: 'eth0',
    command: 'ADD',
    plugin: pluginArgv('shim'),
    conf: { ipamdWaitSeconds: 20 },
  });
  await waitFor(
    'every slow-drip connection closed by ipamd',
    () => conns.every((x) => x.closed()),
    REQUEST_DEADLINE_MS + 10_000,
    100,
  );
  clearInterval(drip);
  const last = Math.max(...conns.map((x) => x.closedAt())) - t0;
  const early = conns.filter((x) => x.closedAt() - t0 < REQUEST_DEADLINE_MS - 1000).length;
  t.diagnostic(
    `200 drips: ${early} closed at once (over the ${MAX_PENDING} pending cap), the last at ${Math.round(last)} ms (deadline ${REQUEST_DEADLINE_MS} ms) while dripping a byte a second`,
  );
  assert.ok(early >= 200 - MAX_PENDING, `${early} closed at once over the pending cap`);
  assert.ok(
    last < REQUEST_DEADLINE_MS + 3000,
    `the last was closed at ${Math.round(last)} ms, not kept alive by its drip`,
  );
  const add = await during;
  assert.equal(add.code, 0, `the ADD made while the slots were held succeeded once they were dropped: ${add.stdout}`);
  await stillServes(n);
});

test('almost-complete 8 MiB requests: bytes held by partial requests are capped, ipamd RSS stays bounded', async (t) => {
  const n = await startCniNode(t, 'bm', { plugin: 'shim' });
  const sock = n.config.execSocket as string;
  const rss0 = await rss(n.d.pid);
  const env = Buffer.from('CNI_COMMAND=ADD\0', 'latin1');
  const head = Buffer.alloc(4 + 4 + env.length + 4);
  head.write('EIX1', 0, 'latin1');
  head.writeUInt32BE(env.length, 4);
  env.copy(head, 8);
  head.writeUInt32BE(MAX_STDIN_BYTES, 8 + env.length);
  const body = Buffer.alloc(MAX_STDIN_BYTES - 1, 0x20); // one byte short of complete
  const conns = await Promise.all(Array.from({ length: 8 }, () => open(sock)));
  t.after(() => {
    for (const x of conns) x.c.destroy();
  });
  await Promise.all(
    conns.map(
      (x) =>
        new Promise<void>((r) => {
          x.c.write(head);
          x.c.write(body, () => r());
          x.c.once('close', () => r());
        }),
    ),
  );
  const held =
    (await waitFor(
      'ipamd closed the connections over the memory cap',
      () => {
        const open = conns.filter((x) => !x.closed()).length;
        return open <= Math.floor(MAX_BUFFERED_BYTES / MAX_STDIN_BYTES) ? open + 1 : 0; // +1: 0 open is also fine
      },
      10_000,
      50,
    )) - 1;
  const grew = (await rss(n.d.pid)) - rss0;
  t.diagnostic(
    `8 almost-complete 8 MiB requests: ${held} held, ${8 - held} closed; ipamd RSS +${Math.round(grew / 2 ** 20)} MiB`,
  );
  assert.ok(grew < 64 * 2 ** 20, `RSS grew ${Math.round(grew / 2 ** 20)} MiB (8 partial requests are 64 MiB)`);
  await waitFor(
    'the held ones dropped at the deadline',
    () => conns.every((x) => x.closed()),
    REQUEST_DEADLINE_MS + 5000,
    100,
  );
  await stillServes(n);
});
