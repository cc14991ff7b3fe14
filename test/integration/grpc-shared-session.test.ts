/**
 * cni-plugin/grpc-http2.ts's shared sessions (a SessionPool, what ipamd's CNI exec server
 * puts in the host it hands the plugin code) against a real grpc-js server (the CNI
 * backend stand-in) behind a counting Unix-socket relay: calls through the pool reuse one
 * connection, each channel without one has its own, a server that went away is replaced
 * by a new connection to the restarted one, and closing the pool closes the shared connection.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SessionPool } from '../../cni-plugin/grpc-http2.js';
import { connectIpamd } from '../../cni-plugin/ipamd-client.js';
import { startCniBackendStandIn, type CniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { waitFor } from '../../kit/wait.js';

/** A Unix-socket relay to `target()` counting connections (total and open). */
async function countingRelay(sock: string, target: () => string) {
  const counts = { total: 0, open: 0 };
  const server = net.createServer((c) => {
    counts.total++;
    counts.open++;
    const up = net.connect(target());
    c.pipe(up);
    up.pipe(c);
    const done = () => {
      c.destroy();
      up.destroy();
    };
    c.on('error', done);
    up.on('error', done);
    up.on('close', done);
    c.on('close', () => {
      counts.open--;
      done();
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
  return { counts, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const ids = (i: number) => ({
  network_name: 'aws-cni',
  container_id: `c${i}`,
  if_name: 'eth0',
  netns: '/var/run/netns/x',
  api_version: 1,
  client_version: 'test',
  k8s_pod_name: '',
  k8s_pod_namespace: '',
  k8s_pod_infra_container_id: '',
  k8s_pod_uid: '',
});

async function callOnce(sock: string, i: number, pool?: SessionPool): Promise<string> {
  const c = connectIpamd(sock, pool);
  try {
    return (await c.addNetwork(ids(i), 5_000)).ipv4_addr;
  } finally {
    c.close();
  }
}

test('shared sessions: one connection, replaced after a server restart, closed when turned off', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-shared-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  let standin: CniBackendStandIn = await startCniBackendStandIn();
  t.after(() => standin.close());
  const relay = await countingRelay(path.join(dir, 'relay.sock'), () => standin.socket);
  t.after(() => relay.close());
  const sock = path.join(dir, 'relay.sock');
  const pool = new SessionPool();
  t.after(() => pool.close());

  // No pool (the plugin process): a connection per channel.
  for (let i = 0; i < 3; i++) assert.match(await callOnce(sock, i), /^\d+\.\d+\.\d+\.\d+$/);
  assert.equal(relay.counts.total, 3);

  // A pool: three channels, one connection, still open after their close().
  for (let i = 3; i < 6; i++) assert.match(await callOnce(sock, i, pool), /^\d+\.\d+\.\d+\.\d+$/);
  assert.equal(relay.counts.total, 4);
  await waitFor('the per-channel connections closed', () => relay.counts.open === 1 || undefined);

  // The server goes away and comes back: the next call gets a new connection and succeeds.
  await standin.close();
  standin = await startCniBackendStandIn();
  await waitFor('the old connection dropped', () => relay.counts.open === 0 || undefined);
  assert.match(await callOnce(sock, 6, pool), /^\d+\.\d+\.\d+\.\d+$/);
  assert.equal(relay.counts.total, 5);
  assert.equal(standin.calls.length, 1, 'the call reached the new server');

  // The pool closed: the shared connection is closed, none left open.
  assert.equal(pool.size, 1);
  pool.close();
  await waitFor('the shared connection closed', () => relay.counts.open === 0 || undefined);
});
