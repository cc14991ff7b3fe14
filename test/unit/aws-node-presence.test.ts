/**
 * The signs of a live aws-node (ipamd/startup/aws-node-presence.ts), each read from a real
 * listener: a gRPC health server on a Unix socket and on TCP (grpc-js, the standard health
 * protocol), HTTP servers for metrics and introspection, and the checkpoint file's times.
 * aws-node's listeners answer as its sources say (the health service
 * `grpc.health.v1.aws-node`, `awscni_` metrics, `/v1/enis`); eni-ipam's own, and silence
 * where only aws-node would listen, are told apart. Ports are ephemeral on 127.0.0.1 and
 * sockets in the test's dir: nothing of the machine is looked at.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { AWS_NODE_HEALTH_SERVICE, lookForAwsNode } from '../../ipamd/startup/aws-node-presence.js';
import { startNpaConfigServer } from '../../ipamd/rpc/npa-config-server.js';
import { pino } from 'pino';
import { askNpaConfig } from '../../kit/npa-config-client.js';

type After = { after(fn: () => unknown): void };

/** A gRPC health server knowing `services`, on `addr` (a socket path, or '127.0.0.1:0'); resolves with its port (0 for a socket). */
async function healthServer(
  t: After,
  addr: string,
  services: Record<string, 'SERVING' | 'NOT_SERVING'>,
): Promise<number> {
  const server = new grpc.Server();
  new HealthImplementation(services).addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(addr.startsWith('/') ? `unix://${addr}` : addr, grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  t.after(() => server.forceShutdown());
  return port;
}

/** An HTTP server answering `routes` (path → [status, body]), else 404; resolves with its port. */
async function httpServer(t: After, routes: Record<string, [number, string]>): Promise<number> {
  const s = http.createServer((req, res) => {
    const [status, body] = routes[req.url ?? ''] ?? [404, 'not found'];
    res.writeHead(status).end(body);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => new Promise((r) => s.close(r)));
  return (s.address() as net.AddressInfo).port;
}

/** A port on 127.0.0.1 where nothing listens (bound, then closed). */
async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function fixture(t: After) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'aws-node-signs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const dead = await deadPort();
  return {
    dir,
    opts: {
      socket: path.join(dir, 'ipamd.sock'),
      checkpoint: path.join(dir, 'ipam.json'),
      quietMs: 30_000,
      grpcPort: dead,
      metricsPort: dead,
      introspectionPort: dead,
      timeoutMs: 1000,
    },
  };
}

test('nothing listening and no checkpoint: no sign', async (t) => {
  const { opts } = await fixture(t);
  assert.deepEqual((await lookForAwsNode(opts)).signs, []);
});

test("aws-node's gRPC health on its socket or on port 50051 is a sign; eni-ipam's health is not", async (t) => {
  const { opts } = await fixture(t);
  await healthServer(t, opts.socket, { '': 'SERVING', [AWS_NODE_HEALTH_SERVICE]: 'SERVING' });
  const port = await healthServer(t, '127.0.0.1:0', { '': 'SERVING', [AWS_NODE_HEALTH_SERVICE]: 'NOT_SERVING' });
  const { signs } = await lookForAwsNode({ ...opts, grpcPort: port });
  assert.deepEqual(
    signs.map((s) => [s.source, s.where]),
    [
      ['grpc-socket', opts.socket],
      ['grpc-port', `127.0.0.1:${port}`],
    ],
  );
  assert.match(signs[0]!.saw, /aws-node's ipamd answers gRPC health \(grpc\.health\.v1\.aws-node\)/);
  // eni-ipam's health server (no aws-node service) on the port: not aws-node.
  const ours = await healthServer(t, '127.0.0.1:0', { '': 'SERVING', 'eniipam.v1.CNIBackend': 'SERVING' });
  const { signs: again } = await lookForAwsNode({
    ...opts,
    socket: path.join(path.dirname(opts.socket), 'x.sock'),
    grpcPort: ours,
  });
  assert.deepEqual(again, []);
});

test("a silent listener on aws-node's socket is a sign (a hung aws-node); on a TCP port it is not", async (t) => {
  const { opts } = await fixture(t);
  const silent = (l: net.Server) => {
    const held: net.Socket[] = [];
    l.on('connection', (c) => held.push(c));
    t.after(() => {
      for (const c of held) c.destroy();
      return new Promise((r) => l.close(r));
    });
  };
  const onSocket = net.createServer();
  await new Promise<void>((r) => onSocket.listen(opts.socket, r));
  silent(onSocket);
  const onPort = net.createServer();
  await new Promise<void>((r) => onPort.listen(0, '127.0.0.1', r));
  silent(onPort);
  const { signs } = await lookForAwsNode({ ...opts, grpcPort: (onPort.address() as net.AddressInfo).port });
  assert.deepEqual(
    signs.map((s) => s.source),
    ['grpc-socket'],
  );
  assert.match(signs[0]!.saw, /did not answer within 1000 ms/);
});

test("aws-node's metrics and introspection are signs; eni-ipam's on the same ports are not", async (t) => {
  const { opts } = await fixture(t);
  const awsMetrics = await httpServer(t, {
    '/metrics': [200, '# HELP awscni_eni_allocated\nawscni_eni_allocated 2\n'],
  });
  const awsIntro = await httpServer(t, { '/v1/enis': [200, '{"ENIs":{}}'] });
  const { signs } = await lookForAwsNode({ ...opts, metricsPort: awsMetrics, introspectionPort: awsIntro });
  assert.deepEqual(
    signs.map((s) => s.source),
    ['metrics', 'introspection'],
  );
  const ourMetrics = await httpServer(t, { '/metrics': [200, 'awscni_eni_allocated 2\neni_ipam_pool_available 3\n'] });
  const ourIntro = await httpServer(t, { '/v1/enis': [200, '{}'], '/v1/status': [200, '{}'] });
  assert.deepEqual((await lookForAwsNode({ ...opts, metricsPort: ourMetrics, introspectionPort: ourIntro })).signs, []);
});

test("aws-node's checkpoint: recent or changed between looks is a sign; quiet for the period is not", async (t) => {
  const { opts } = await fixture(t);
  await writeFile(opts.checkpoint, '{"version":"vpc-cni-ipam/1","allocations":[]}');
  const first = await lookForAwsNode(opts);
  assert.deepEqual(
    first.signs.map((s) => s.source),
    ['checkpoint'],
  );
  assert.match(first.signs[0]!.saw, /was written \d+ s ago \(quiet period 30 s\)/);
  // Quiet for longer than the period: a stale checkpoint, no sign (it is imported later).
  const old = new Date(Date.now() - 60_000);
  await utimes(opts.checkpoint, old, old);
  const quiet = await lookForAwsNode(opts);
  assert.deepEqual(quiet.signs, []);
  // Written again since that look (an ADD served by aws-node), even with an old mtime: a sign.
  await writeFile(opts.checkpoint, '{"version":"vpc-cni-ipam/1","allocations":[{}]}');
  const older = new Date(Date.now() - 120_000);
  await utimes(opts.checkpoint, older, older);
  const changed = await lookForAwsNode(opts, quiet.stamp);
  assert.match(changed.signs[0]?.saw ?? '', /was written since the last look/);
  // An mtime an hour ahead (a clock step) is not by itself a sign.
  const ahead = new Date(Date.now() + 3_600_000);
  await utimes(opts.checkpoint, ahead, ahead);
  const stepped = await lookForAwsNode(opts);
  assert.deepEqual(stepped.signs, []);
});

test("ipamd's own answer to the network policy agent on aws-node's socket is no sign of aws-node", async (t) => {
  const { opts } = await fixture(t);
  const server = await startNpaConfigServer({
    socketPath: opts.socket,
    answer: { mode: 'strict', nodeIpv4: '10.0.0.5', nodeIpv6: '', instanceId: 'i-0123', region: 'us-west-2' },
    log: pino({ level: 'silent' }),
  });
  t.after(() => server.close(0));
  assert.equal((await askNpaConfig(opts.socket)).NetworkPolicyMode, 'strict', 'it serves there');
  assert.deepEqual((await lookForAwsNode(opts)).signs, []);
  assert.equal(server.answered(), 1);
});
