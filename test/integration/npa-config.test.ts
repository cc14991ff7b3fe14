/**
 * ipamd answers the network policy agent's start-up call (issue 39 item 2):
 * `rpc.ConfigServerBackend/GetNetworkPolicyConfigs` on ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET
 * (on a node: /var/run/aws-node/ipamd.sock, where the agent dials), with the mode of
 * NETWORK_POLICY_ENFORCING_MODE, in both modes. The real ipamd binary as a child process on
 * a simulated node (the real AWS SDK and IMDS client over HTTP), asked over real gRPC on the
 * Unix socket the way the agent asks (kit/npa-config-client.ts).
 *
 * The harness puts this socket where ipamd also looks for a live aws-node (both default to
 * the same path on a node: kit/own-paths.ts), so every restart here is also ipamd meeting its
 * own socket: after a stop (file removed) and after a SIGKILL (file left behind) it must take
 * the node, not stand by as if aws-node ran. The refused values are config unit tests
 * (test/unit/config.test.ts); what aws-node-presence makes of this server, aws-node-presence.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { ImdsClient } from '../../ipamd/cloud/imds.js';
import { askNpaConfig } from '../../kit/npa-config-client.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { startedSimNode } from '../../kit/sim-node.js';

test('ipamd answers the agent its mode (strict, then standard after a restart) and the node; a restart meets its own socket', async (t) => {
  const { node } = await startedSimNode(t, 391, {
    mode: 'child',
    cri: false,
    env: { WARM_IP_TARGET: '1', NETWORK_POLICY_ENFORCING_MODE: 'Strict' },
  });
  const sock = node.env.ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET!;
  assert.equal(sock, node.env.ENI_IPAM_AWS_NODE_SOCKET, 'the harness shares the path, as a node does');
  const imds = new ImdsClient({ endpoint: node.env.AWS_EC2_METADATA_SERVICE_ENDPOINT! });
  const inst = await imds.instance();
  imds.close();

  const strict = await askNpaConfig(sock);
  assert.deepEqual(strict, {
    NetworkPolicyMode: 'strict',
    MultiNICEnabled: false,
    NodeIPv4: inst.localIpv4,
    NodeIPv6: '',
    InstanceID: node.instanceId,
    Region: inst.region,
  });
  assert.equal((await stat(sock)).mode & 0o777, 0o660, 'root:root 0660, as aws-node');
  const log = path.join(node.dir, 'ipamd.log');
  assert.match(await readFile(log, 'utf8'), /the network policy agent asked for its configuration/);

  // A graceful stop removes the socket; the next ipamd (standard now) serves it again.
  await node.stop();
  await assert.rejects(stat(sock), /ENOENT/, 'the socket is gone with ipamd');
  node.env.NETWORK_POLICY_ENFORCING_MODE = 'standard';
  await node.start();
  assert.equal((await askNpaConfig(sock)).NetworkPolicyMode, 'standard');

  // SIGKILL leaves the file; the next ipamd finds it dead, takes the node and serves again.
  await node.stop({ crash: true });
  assert.ok((await stat(sock)).isSocket(), 'a killed ipamd leaves its socket file');
  await assert.rejects(askNpaConfig(sock, 2000), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
  await node.start();
  assert.equal((await askNpaConfig(sock)).NetworkPolicyMode, 'standard');
  assert.doesNotMatch(await readFile(log, 'utf8'), /aws-node is running on this node/, 'never stood by for itself');
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  assert.ok((await c.add('after-restart')).ipv4_addr, 'it serves pods');
});
