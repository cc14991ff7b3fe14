/**
 * SIGTERM always ends ipamd within its grace period, whatever it is doing
 * (docs/design.md#bounds-on-bad-input): the real binary, signalled during each long-running
 * operation, must exit 0 well within the chart's 30 s terminationGracePeriodSeconds:
 *
 * - start-up, while IMDS accepts the connection and never answers (it used to die of the
 *   signal's default action, without its shutdown);
 * - a wedged log writer: stdout is a pipe nobody reads (it used to hang in pino's exit-time
 *   flush for ever; only SIGKILL ended it);
 * - an ADD waiting on a refill while EC2 takes a minute to answer (the ADD held the drain);
 * - checkpoint writes failing on a full disk (a 1 MiB tmpfs, filled).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rmdir } from 'node:fs/promises';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { spawnBareIpamd } from '../helpers/ipamd-signal.js';
import { waitFor } from '../../kit/wait.js';

const run = promisify(execFile);

/** Longest a shutdown may take here (ms): well within the chart's 30 s grace period, and below ipamd's own 20 s deadline. */
const GRACE_MS = 12_000;

/** A free TCP port on 127.0.0.1 (bound, then closed). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** A node (simulated cloud) whose ipamd env has introspection on a known port; closed after the test. */
async function node(t: { after(fn: () => unknown): void }, ipamdEnv: NodeJS.ProcessEnv = {}) {
  const h: NodeHarness = await createNode({
    ipamdEnv: { ENI_IPAM_INSTALL_CNI: 'false', ENI_IPAM_HOST_NETWORK: 'false', DISABLE_METRICS: 'true', ...ipamdEnv },
  });
  t.after(() => h.close());
  const port = await freePort();
  const env = {
    ...h.env,
    INTROSPECTION_BIND_ADDRESS: `127.0.0.1:${port}`,
    CRI_RUNTIME_ENDPOINT: path.join(h.dir, 'no-cri.sock'),
  };
  const status = async () =>
    (await fetch(`http://127.0.0.1:${port}/v1/status`)).json() as Promise<Record<string, unknown>>;
  // Introspection answers before the gRPC socket is bound: serving is both.
  const serving = async () => !!(await status()).counts && existsSync(h.socket);
  return { h, env, status, serving };
}

test('SIGTERM during start-up (IMDS never answers) ends ipamd at once, exit 0', async (t) => {
  const { env } = await node(t);
  let connected = 0;
  const held = new Set<net.Socket>();
  const imds = net.createServer((c) => {
    connected++;
    held.add(c); // held open, never answered
    c.on('error', () => undefined);
  });
  await new Promise<void>((r) => imds.listen(0, '127.0.0.1', r));
  t.after(async () => {
    for (const c of held) c.destroy();
    await new Promise((r) => imds.close(r));
  });
  const d = spawnBareIpamd(
    { ...env, AWS_EC2_METADATA_SERVICE_ENDPOINT: `http://127.0.0.1:${(imds.address() as net.AddressInfo).port}` },
    { readStdout: true },
  );
  t.after(() => d.child.kill('SIGKILL'));
  await waitFor('ipamd to be waiting on IMDS', () => connected > 0, 15_000);
  const r = await d.term(GRACE_MS);
  assert.deepEqual(
    { code: r.code, signal: r.signal, killed: r.killed },
    { code: 0, signal: null, killed: false },
    d.stderr(),
  );
  t.diagnostic(`exit ${r.code ?? r.signal} ${Math.round(r.ms)} ms after SIGTERM${r.killed ? ' (SIGKILL)' : ''}`);
  assert.ok(r.ms < GRACE_MS, `${r.ms} ms`);
  assert.match(d.stdout(), /signal during start-up: exiting/);
});

test('SIGTERM with a wedged log writer (stdout nobody reads) ends ipamd within the grace period, exit 0', async (t) => {
  const { env, status, serving, h } = await node(t, { AWS_VPC_K8S_CNI_LOGLEVEL: 'trace', IP_COOLDOWN_PERIOD: '0' });
  const d = spawnBareIpamd(env, { readStdout: false });
  t.after(() => d.child.kill('SIGKILL'));
  await waitFor('ipamd serving', serving, 20_000);
  // Far more log than the pipe (64 KiB) and Node's read buffer hold: the writer is now stuck on a full pipe.
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  for (let i = 0; i < 150; i++) {
    await c.add(`w${i}`);
    await c.del(`w${i}`);
  }
  assert.ok(d.child.stdout!.readableLength >= d.child.stdout!.readableHighWaterMark, 'the pipe reader stopped reading');
  assert.ok((await status()).counts, 'ipamd still serves with its log writer stuck');
  const r = await d.term(GRACE_MS);
  assert.deepEqual(
    { code: r.code, signal: r.signal, killed: r.killed },
    { code: 0, signal: null, killed: false },
    d.stderr(),
  );
  t.diagnostic(`exit ${r.code ?? r.signal} ${Math.round(r.ms)} ms after SIGTERM${r.killed ? ' (SIGKILL)' : ''}`);
  assert.ok(r.ms < GRACE_MS, `${r.ms} ms`);
});

test('SIGTERM while an ADD waits on a refill (EC2 slow) ends ipamd promptly, exit 0; the ADD is answered', async (t) => {
  const { env, serving, h } = await node(t, {
    ENI_IPAM_ADD_WAIT_TIMEOUT: '60s',
    WARM_ENI_TARGET: '0',
    WARM_IP_TARGET: '1',
  });
  for (const a of ['AssignPrivateIpAddresses', 'CreateNetworkInterface']) h.sim.faults.setLatency(a, 120_000);
  const d = spawnBareIpamd(env, { readStdout: true });
  t.after(() => d.child.kill('SIGKILL'));
  await waitFor('ipamd serving', serving, 20_000);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  let answered: string | undefined;
  const add = c.add('waits').then(
    (r) => (answered = `ok ${r.ipv4_addr}`),
    (e: Error) => (answered = `error ${e.message}`),
  );
  await waitFor('a refill in flight at EC2', () =>
    h.sim.calls.some((x) => x.action === 'AssignPrivateIpAddresses' || x.action === 'CreateNetworkInterface'),
  );
  assert.equal(answered, undefined, 'the ADD is waiting');
  const r = await d.term(GRACE_MS);
  assert.deepEqual(
    { code: r.code, signal: r.signal, killed: r.killed },
    { code: 0, signal: null, killed: false },
    d.stderr(),
  );
  t.diagnostic(`exit ${r.code ?? r.signal} ${Math.round(r.ms)} ms after SIGTERM${r.killed ? ' (SIGKILL)' : ''}`);
  assert.ok(r.ms < GRACE_MS, `${r.ms} ms`);
  await add;
  assert.match(answered ?? '', /^error .*shutting down|^error /, 'the waiting ADD got an answer, not silence');
});

test('SIGTERM while checkpoint writes fail on a full disk ends ipamd within the grace period, exit 0', async (t) => {
  const { env, serving, h } = await node(t, { WARM_IP_TARGET: '3', IP_COOLDOWN_PERIOD: '0' });
  // Outside the node's dir: `t.after` hooks run in the order added, so the node's removal comes first.
  const mnt = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-full-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mnt]);
  t.after(async () => {
    await run('umount', ['-l', mnt]).catch(() => undefined);
    await rmdir(mnt);
  });
  const d = spawnBareIpamd({ ...env, ENI_IPAM_CHECKPOINT_PATH: path.join(mnt, 'ipam.json') }, { readStdout: true });
  t.after(() => d.child.kill('SIGKILL'));
  await waitFor('ipamd serving', serving, 20_000);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await c.add('before');
  await run('dd', ['if=/dev/zero', `of=${path.join(mnt, 'fill')}`, 'bs=64k']).catch(() => undefined); // until ENOSPC
  // Churn until a change cannot be made durable (the journal's last page is full too).
  let failure: unknown;
  for (let i = 0; i < 500 && !failure; i++) {
    failure = await c
      .add(`full${i}`)
      .then(() => c.del(`full${i}`))
      .then(
        () => undefined,
        (e: Error) => e, // the ADD's or the DEL's write failed
      );
  }
  assert.ok(failure instanceof Error, 'a change on the full disk fails');
  // More in flight, failing their checkpoint writes, while the signal arrives.
  const adds = Array.from({ length: 10 }, (_, i) => c.add(`late${i}`).catch((e: Error) => e));
  const r = await d.term(GRACE_MS);
  assert.deepEqual(
    { code: r.code, signal: r.signal, killed: r.killed },
    { code: 0, signal: null, killed: false },
    d.stderr(),
  );
  t.diagnostic(`exit ${r.code ?? r.signal} ${Math.round(r.ms)} ms after SIGTERM${r.killed ? ' (SIGKILL)' : ''}`);
  assert.ok(r.ms < GRACE_MS, `${r.ms} ms`);
  await Promise.all(adds);
});
