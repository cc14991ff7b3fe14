/**
 * The evidence pass's GC grace counts from when it began reading the runtime
 * (docs/design.md#4-restore-after-restart, item 4), end to end: the real ipamd in this
 * process over its real gRPC socket, the real AWS SDK against the simulated EC2, and
 * the CRI stand-in (a real gRPC server) as a slow runtime whose answer is a snapshot
 * taken when the pass asked. An ADD served while that read is in flight is absent from
 * it; once the read has taken longer than the grace, the allocation must not look old
 * enough to release. The pool property test found this with ENI_IPAM_FAST_RESTART=true
 * (there a 3 s event-loop stall, the EC2 SDK loading for the background confirm, played
 * the slow read's part) as a DEL answering released=false for a live pod.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { startedSimNode } from '../../kit/sim-node.js';

/** ENI_IPAM_GC_GRACE of the node (ms); the slow read lasts well past it. */
const GRACE_MS = 1000;
/** How long the slow runtime read takes (ms): under the CRI source's 5 s deadline. */
const READ_MS = 3500;

test('an ADD served while a slow runtime read is in flight keeps its IP after that pass', async (t) => {
  const { node } = await startedSimNode(t, 21, {
    env: {
      WARM_IP_TARGET: '3',
      MINIMUM_IP_TARGET: '3',
      ENI_IPAM_GC_INTERVAL: '100ms',
      ENI_IPAM_GC_GRACE: `${GRACE_MS}ms`,
      ENI_IPAM_RECONCILE_INTERVAL: '60s',
    },
  });
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const cri = node.cri!;
  const d = node.daemonHandle!;
  // One running pod, so a runtime read asks for a sandbox status (the slow part).
  cri.add({ id: 'p0', name: 'pod-p0', namespace: 'default', uid: 'uid-p0' });
  cri.setIp('p0', (await c.add('p0')).ipv4_addr);
  await waitFor('releases unfrozen (a clean evidence pass)', () => !d.gate.frozen, 20_000);
  // The warm pool refilled after p0's ADD, so p1's ADD below is served at once from it (at
  // load average 40 the refill had not landed and p1 waited out its 10 s).
  await waitFor('the warm pool refilled (3 free)', () => d.ds.counts(Date.now()).available >= 3, 30_000);

  // The next pass lists p0 only, then waits READ_MS for its status.
  cri.statusDelayMs = READ_MS;
  const calls = cri.statusCalls;
  await waitFor('an evidence pass reading the runtime', () => cri.statusCalls > calls, 5000, 2);
  const askedAt = Date.now();
  // Meanwhile a pod starts: its sandbox appears, then its ADD is served at once.
  cri.add({ id: 'p1', name: 'pod-p1', namespace: 'default', uid: 'uid-p1' });
  const ip = (await c.add('p1')).ipv4_addr;
  cri.setIp('p1', ip);
  // Precondition: the ADD was served well inside the slow read, so at merge time it is older than the grace.
  assert.ok(Date.now() - askedAt < READ_MS - GRACE_MS, 'the ADD took too long to test the race');
  cri.statusDelayMs = 0;
  // The slow pass merges its stale snapshot READ_MS after it asked; wait until a later pass has run too.
  const lists = cri.lists;
  await waitFor('two more runtime reads', () => cri.lists >= lists + 2, 15_000, 20);

  assert.equal(
    d.ds.lookup({ networkName: 'aws-cni', containerID: 'p1', ifName: 'eth0' })?.ipv4,
    ip,
    'the evidence pass released the allocation of a live pod made while its runtime read was in flight',
  );
  const del = await c.del('p1');
  assert.deepEqual([del.released, del.ipv4_addr], [true, ip]);
});
