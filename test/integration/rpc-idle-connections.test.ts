/**
 * ipamd's gRPC socket closes idle client connections (docs/design.md#bounds-on-bad-input: 232 idle
 * HTTP/2 connections used to be held forever, one fd each). The real RpcServer
 * (grpc-js) on a Unix socket, plain node:http2 clients that connect and then do nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../../ipamd/log.js';
import { RpcServer } from '../../ipamd/rpc/server.js';
import type { IpamService } from '../../ipamd/service/ipam-service.js';
import { connectIpamd } from '../../cni-plugin/ipamd-client.js';
import { IPAM_API_VERSION, type IpamStatusRequest } from '../../proto/ipam.js';
import { waitFor } from '../../kit/wait.js';

test('idle gRPC connections are closed after the idle bound, connections over the cap at once; a working client is not disturbed', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-rpc-idle-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const socketPath = path.join(dir, 'ipamd.sock');
  const service = { status: () => ({ canServe: true, code: 0, message: '' }) } as unknown as IpamService;
  const rpc = new RpcServer({
    socketPath,
    service,
    log: createLogger({ level: 'fatal', format: 'json' }),
    vpcCidrs: () => [],
    externalSnat: false,
    connectionBounds: { idleMs: 500, maxConnections: 30 },
  } as ConstructorParameters<typeof RpcServer>[0]);
  await rpc.listen();
  t.after(() => rpc.shutdown(100));

  const N = 30;
  const sessions = await Promise.all(
    Array.from(
      { length: N },
      () =>
        new Promise<http2.ClientHttp2Session>((resolve, reject) => {
          const s = http2.connect('http://localhost', { createConnection: () => net.connect(socketPath) });
          s.once('remoteSettings', () => resolve(s));
          s.once('error', reject);
        }),
    ),
  );
  t.after(() => {
    for (const s of sessions) s.destroy();
  });
  // Over the bound: closed at accept, never served.
  const refused = await Promise.all(
    Array.from(
      { length: 5 },
      () =>
        new Promise<string>((resolve) => {
          const s = http2.connect('http://localhost', { createConnection: () => net.connect(socketPath) });
          s.on('error', () => undefined);
          s.once('remoteSettings', () => {
            s.destroy();
            resolve('served');
          });
          s.once('close', () => resolve('closed'));
        }),
    ),
  );
  assert.deepEqual(refused, Array(5).fill('closed'), 'connections over maxConnections are closed');
  const closed = new Set<number>();
  sessions.forEach((s, i) => {
    s.on('error', () => undefined);
    s.once('goaway', () => closed.add(i));
    s.once('close', () => closed.add(i));
  });
  const t0 = Date.now();
  await waitFor(`all ${N} idle connections closed by ipamd`, () => closed.size === N, 10_000);
  const ms = Date.now() - t0;
  assert.ok(ms >= 300, `closed after ${ms} ms: not before the idle bound`);

  // A client that makes calls still works (a new connection after its old one was closed).
  const c = connectIpamd(socketPath);
  t.after(() => c.close());
  const st = await c.ipamStatus({ api_version: IPAM_API_VERSION, client_version: 'test' } as IpamStatusRequest, 5000);
  assert.equal(st.can_serve, true);
});
