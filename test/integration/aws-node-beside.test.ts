/**
 * Never beside a live aws-node (ipamd/startup/aws-node-wait.ts). Issue 37: ipamd adopted
 * aws-node's ENIs and served a node while aws-node still ran there (the install guide's
 * chart had no node selector). Now the real ipamd binary, on a simulated node whose
 * aws-node answers gRPC health as aws-node's ipamd does (the service
 * `grpc.health.v1.aws-node` on its socket; amazon-vpc-cni-k8s `pkg/ipamd/rpc_handler.go`),
 * must stand by: no EC2 call, no checkpoint, not ready, alive for the liveness probe, one
 * log line naming what it found; and take the node once that aws-node is gone.
 *
 * The aws-node here is its health listener alone: the real aws-k8s-agent needs the EKS
 * node it was built for (docs/design.md#never-beside-a-live-aws-node says what was not run).
 * The other signs (ports, checkpoint writes) are proven in test/unit/aws-node-presence.test.ts;
 * a stale aws-node checkpoint imported after the quiet period in aws-node-migration.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { createNode } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { probeHealth } from '../../ipamd/health-probe.js';
import { AWS_NODE_HEALTH_SERVICE } from '../../ipamd/startup/aws-node-presence.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

test('ipamd stands by while aws-node serves on the node, touching nothing, and takes the node once it is gone', async (t) => {
  ensureDummyAwsCredentials();
  const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '2', ENI_IPAM_INSTALL_CNI: 'false' } });
  t.after(() => h.close());
  const awsSocket = path.join(h.dir, 'aws-node', 'ipamd.sock');
  h.env.ENI_IPAM_AWS_NODE_SOCKET = awsSocket;
  await mkdir(path.dirname(awsSocket));
  // aws-node's ipamd: its health service on its socket.
  const aws = new grpc.Server();
  new HealthImplementation({ '': 'SERVING', [AWS_NODE_HEALTH_SERVICE]: 'SERVING' }).addToServer(aws);
  await new Promise<void>((resolve, reject) =>
    aws.bindAsync(`unix://${awsSocket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
  );
  t.after(() => aws.forceShutdown());

  const callsBefore = h.sim.calls.length;
  const serving = h.startIpamd().then(
    (d) => d,
    (e: Error) => e,
  );
  const log = path.join(h.dir, 'ipamd.log');
  const line = await waitFor(
    'the line naming aws-node',
    async () =>
      (await readFile(log, 'utf8').catch(() => ''))
        .split('\n')
        .find((l) => l.includes('aws-node is running on this node')),
    20_000,
  );
  assert.ok(line.includes(`aws-node's ipamd answers gRPC health (${AWS_NODE_HEALTH_SERVICE}) on ${awsSocket}`), line);
  assert.ok(line.includes('AwsNodeRunning'), line);
  // Liveness answered (the kubelet does not restart it), readiness not (it serves no pod).
  const live = await probeHealth({ socket: h.socket, service: 'eniipam.v1.Liveness', timeoutMs: 2000 });
  assert.equal(live.code, 0, live.message);
  const ready = await probeHealth({ socket: h.socket, service: '', timeoutMs: 2000 });
  assert.equal(ready.code, 1, ready.message);
  // It touched nothing: no EC2 call, no checkpoint.
  assert.deepEqual(
    h.sim.calls.slice(callsBefore).map((c) => c.action),
    [],
  );
  assert.equal(await stat(h.checkpoint).catch(() => undefined), undefined, 'no checkpoint written');

  // aws-node goes: ipamd takes the node.
  aws.forceShutdown();
  const d = await serving;
  assert.ok(!(d instanceof Error), `ipamd did not serve once aws-node was gone: ${String(d)}`);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  assert.ok((await c.add('first-pod')).ipv4_addr);
  assert.match(await readFile(log, 'utf8'), /aws-node is gone from this node: eni-ipam takes it over/);
});
