/**
 * Cold node (docs/design.md#10-the-warm-pool-at-depth item 2): ipamd (the real binary, real gRPC) on a fresh m5.xlarge
 * (4 ENIs × 14 secondary IPs) whose simulated EC2, reached through the real AWS SDK,
 * takes 0.5 s per CreateNetworkInterface and 3 s from attach to `attached`. 30 ADDs
 * arrive within a second with the default WARM_ENI_TARGET=1 and the default 10 s wait:
 * none may fail. Outcomes, not timings: 30 unique IPs, each a secondary IP EC2 shows on
 * an ENI attached to this instance; ENIs created as the pool math says (30 pods + 14
 * warm = 44 addresses > 3 × 14 → the instance's 3 more ENIs), each at its own device index.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNode } from '../../kit/node-harness.js';
import { ipamdClient, type GrpcError } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';

test('cold m5.xlarge: 30 ADDs within 1 s with slow create/attach are all served, on 3 ENIs created in parallel', async (t) => {
  const h = await createNode({ instanceType: 'm5.xlarge', ipamdEnv: { ENI_IPAM_INSTALL_CNI: 'false' } });
  t.after(() => h.close());
  h.sim.faults.setLatency('CreateNetworkInterface', 500);
  h.sim.faults.setAttachmentDelays({ attachMs: 3000 });
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());

  const outcomes = await Promise.all(
    Array.from({ length: 30 }, async (_, i) => {
      await new Promise((r) => setTimeout(r, (i * 1000) / 30)); // not a wait: 30 ADDs spread over 1 s
      try {
        return { id: `cold${i}`, ip: (await c.add(`cold${i}`)).ipv4_addr };
      } catch (e) {
        return { id: `cold${i}`, err: (e as GrpcError).details ?? (e as Error).message };
      }
    }),
  );
  const failed = outcomes.filter((o) => o.err);
  assert.deepEqual(failed, [], 'no ADD may fail');
  const ips = outcomes.map((o) => o.ip!);
  assert.equal(new Set(ips).size, 30, 'unique IPs');

  // Every pod IP is a secondary IP EC2 shows on an ENI attached to this instance.
  const attached = [...h.sim.state.enis.values()].filter((e) => e.attachment?.instanceId === h.instanceId);
  const onEc2 = new Map(attached.flatMap((e) => e.secondaryIps.map((ip) => [ip, e.networkInterfaceId] as const)));
  for (const ip of ips) assert.ok(onEc2.has(ip), `${ip} is on one of the instance's ENIs in EC2`);

  // The pool settles at the instance's limit: exactly 3 ENIs created and attached, distinct device indexes.
  await waitFor(
    'the warm pool to settle (4 ENIs, 14 available)',
    async () => {
      const s = await d.status();
      return s.counts.total === 56 && s.counts.available === 26 && s.eniLifecycle.pendingEnis.length === 0;
    },
    30_000,
  );
  assert.equal(h.sim.countCalls('CreateNetworkInterface'), 3, 'CreateNetworkInterface calls');
  assert.equal(h.sim.countCalls('AttachNetworkInterface'), 3, 'AttachNetworkInterface calls');
  const devices = [...h.sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === h.instanceId)
    .map((e) => e.attachment!.deviceIndex)
    .sort();
  assert.deepEqual(devices, [0, 1, 2, 3]);
});
