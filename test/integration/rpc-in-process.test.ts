/**
 * The in-process path (RpcServer.directClient, handed to the plugin code in the CNI exec
 * server's host): inside ipamd, the plugin code calls ipamd's handlers with the request
 * object itself, and gets the same replies and the same gRPC status codes as over the
 * socket, without protobuf or HTTP/2. A config naming another socket goes over gRPC. A
 * real ipamd in this process (startDaemon, exec server on) against the simulated cloud
 * over HTTP.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rename } from 'node:fs/promises';
import { IPAM_API_VERSION, type AddNetworkRequest } from '../../proto/ipam.js';
import { connectIpamd, IpamdCallError } from '../../cni-plugin/ipamd-client.js';
import { GrpcCallFailure, openUnixChannel } from '../../cni-plugin/grpc-http2.js';
import { GrpcStatus } from '../../proto/grpc-status.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { startedSimNode, testSimNode } from '../../kit/sim-node.js';
import { stageTrace } from '../../ipamd/service/stage-trace.js';

const req = (containerId: string, over: Partial<AddNetworkRequest> = {}): AddNetworkRequest => ({
  api_version: IPAM_API_VERSION,
  client_version: 'test',
  container_id: containerId,
  if_name: 'eth0',
  network_name: 'aws-cni',
  netns: '/var/run/netns/x',
  k8s_pod_name: `pod-${containerId}`,
  k8s_pod_namespace: 'default',
  k8s_pod_infra_container_id: containerId,
  k8s_pod_uid: '',
  ...over,
});

test('plugin calls inside ipamd take the in-process path: same replies and statuses as over the socket', async (t) => {
  const { node } = await startedSimNode(t, 5, { env: { WARM_IP_TARGET: '3', ENI_IPAM_CNI_EXEC: 'true' } });
  await waitFor('a warm IP', () => node.daemonHandle!.ds.counts(Date.now()).available >= 1);
  const host = node.daemonHandle!.pluginHost!;
  assert.ok(host, 'the exec server hands the plugin code a host');
  const direct = host.ipamd(node.socket);
  assert.equal(host.ipamd(node.socket), direct, "the config's ipamdSocket is ipamd's own: the direct client");
  const other = host.ipamd(`${node.socket}.other`);
  t.after(() => other.close());
  assert.notEqual(other, direct, 'another socket goes over gRPC');
  await assert.rejects(
    other.addNetwork(req('c0'), 2000),
    (e: unknown) => e instanceof IpamdCallError && e.status === GrpcStatus.UNAVAILABLE,
  );

  // Over the socket (grpc-js, the test's own client) and in-process (the plugin's client) agree.
  const wire = ipamdClient(node.socket);
  t.after(() => wire.close());
  const viaSocket = await wire.add('c1');
  const again = await direct.addNetwork(req('c1'), 5000);
  assert.equal(again.ipv4_addr, viaSocket.ipv4_addr, 'a repeated ADD through the in-process path returns the same IP');
  assert.equal(again.message, 'already assigned');
  assert.equal(again.device_number, viaSocket.device_number);
  assert.deepEqual(again.vpc_v4_cidrs, viaSocket.vpc_v4_cidrs);

  // The socket file moved away: the host's client for ipamd's socket still works, so it does not use the socket.
  const moved = `${node.socket}.moved`;
  await rename(node.socket, moved);
  const fresh = host.ipamd(node.socket);
  try {
    const c2 = await fresh.addNetwork(req('c2'), 5000);
    assert.notEqual(c2.ipv4_addr, viaSocket.ipv4_addr);
    assert.ok(node.daemonHandle!.ds.counts(Date.now()).assigned >= 2);
    const del = await fresh.delNetwork({ ...req('c2'), reason: 'test' }, 5000);
    assert.equal(del.released, true);
    assert.equal(del.ipv4_addr, c2.ipv4_addr);
    const check = await fresh.checkNetwork(req('c1'), 5000);
    assert.equal(check.held, true);
    assert.equal(check.ipv4_addr, viaSocket.ipv4_addr);

    // Same statuses as a socket call would get.
    const statusOf = async (p: Promise<unknown>): Promise<number> =>
      p.then(
        () => -1,
        (e: unknown) => (e as IpamdCallError).status,
      );
    assert.equal(
      await statusOf(fresh.addNetwork(req('c3', { api_version: IPAM_API_VERSION + 1 }), 5000)),
      GrpcStatus.FAILED_PRECONDITION,
    );
    assert.equal(await statusOf(fresh.addNetwork(req(''), 5000)), GrpcStatus.INVALID_ARGUMENT);
  } finally {
    await rename(moved, node.socket);
  }
  // Bytes only exist on the wire: an unknown method and undecodable bytes get their statuses there.
  const raw = openUnixChannel(node.socket);
  await assert.rejects(
    raw.unary('/eniipam.v1.CNIBackend/NoSuchMethod', new Uint8Array(0), 5000),
    (e: unknown) => e instanceof GrpcCallFailure && e.code === GrpcStatus.UNIMPLEMENTED,
  );
  await assert.rejects(
    raw.unary('/eniipam.v1.CNIBackend/AddNetwork', Uint8Array.from([0xff, 0xff, 0xff]), 5000),
    (e: unknown) => e instanceof GrpcCallFailure && e.code === GrpcStatus.INTERNAL,
  );
  raw.close();
  // The plugin's gRPC client over the socket agrees with the direct one.
  const plugin = connectIpamd(node.socket);
  t.after(() => plugin.close());
  assert.equal((await plugin.checkNetwork(req('c1'), 5000)).ipv4_addr, viaSocket.ipv4_addr);

  // Once ipamd stops, its direct client answers UNAVAILABLE like the (removed) socket would.
  await node.stop();
  await assert.rejects(
    fresh.addNetwork(req('c4'), 2000),
    (e: unknown) => e instanceof IpamdCallError && e.status === GrpcStatus.UNAVAILABLE,
  );
});

test('a daemon started again in the same process times each call once (the service definition is shared)', async (t) => {
  const { node } = await testSimNode(t, { seed: 6, env: { WARM_IP_TARGET: '2' } });
  for (const round of [1, 2, 3]) {
    await node.start();
    await waitFor('a warm IP', () => node.daemonHandle!.ds.counts(Date.now()).available >= 1);
    const c = ipamdClient(node.socket);
    try {
      stageTrace.reset();
      await c.add(`again${round}`);
      const s = stageTrace.summary();
      assert.equal(s['add.decode']?.count, 1, `start ${round}: one decode timed`);
      assert.equal(s['add.encode']?.count, 1, `start ${round}: one encode timed`);
    } finally {
      c.close();
    }
    await node.stop();
  }
});
