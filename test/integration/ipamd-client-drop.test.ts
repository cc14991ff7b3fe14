/**
 * The plugin's gRPC client (cni-plugin/ipamd-client.ts over grpc-http2.ts) when the server
 * dies mid-call: an HTTP/2 server in its own process takes the call and is SIGKILLed, as
 * ipamd killed while an ADD waits for a refill. The call fails UNAVAILABLE ("dropped"), as
 * grpc-js's "Connection dropped", so the Node plugin answers CNI 11 like the shim — not
 * CANCELLED/INTERNAL from the local stream reset (which answered 100).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { connectIpamd, IpamdCallError } from '../../cni-plugin/ipamd-client.js';
import { addFailure } from '../../cni-plugin/add.js';
import { waitFor } from '../../kit/wait.js';

const ids = (id: string) => ({
  api_version: 1,
  client_version: '0.1.0-drop',
  container_id: id,
  if_name: 'eth0',
  network_name: 'aws-cni',
  netns: `/var/run/netns/cni-${id}`,
  k8s_pod_name: 'pod',
  k8s_pod_namespace: 'default',
  k8s_pod_infra_container_id: id,
  k8s_pod_uid: '6d4e1c1a-0b7e-4f55-9a3b-1f2d3c4b5a69',
});

test('the server killed (SIGKILL) while a call waits: UNAVAILABLE "dropped", so ADD answers 11, not CANCELLED', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-wire-kill-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const socket = path.join(dir, 'ipamd.sock');
  // An HTTP/2 server in its own process that takes the call and never answers, as ipamd waiting on a refill.
  const server = spawn(
    process.execPath,
    [
      '-e',
      `const h=require('node:http2').createServer();h.on('stream',()=>console.log('call'));h.listen(${JSON.stringify(socket)},()=>console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => server.kill('SIGKILL'));
  let out = '';
  server.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  await waitFor('the server listening', () => out.includes('listening'));
  const c = connectIpamd(socket);
  t.after(() => c.close());
  const call = c.addNetwork(ids('killed'), 10_000);
  call.catch(() => undefined);
  await waitFor('the server holding the call', () => out.includes('call'));
  server.kill('SIGKILL');
  await assert.rejects(call, (e: unknown) => {
    assert.ok(e instanceof IpamdCallError, String(e));
    assert.equal(e.statusName, 'UNAVAILABLE', e.message);
    assert.match(e.details, /dropped before the answer/);
    return true;
  });
  assert.equal(addFailure(await call.catch((e: unknown) => e)).code, 11, 'the plugin maps it to CNI 11');
});
