/**
 * docs/design.md#10-the-warm-pool-at-depth, the race behind the property test's "ADD got an IP EC2 no longer shows":
 * the evidence pass (restore/reconciler.ts) adopting a runtime sandbox's IP while the
 * shrink has that IP `releasing` with its UnassignPrivateIpAddresses in flight.
 *
 * Real ipamd in this process (startDaemon over its real gRPC socket), the real AWS SDK
 * against the simulated EC2 with a slow unassign, and the CRI stand-in of the property
 * test as the runtime (a real gRPC server). Each test checks its outcome against EC2:
 * the datastore never keeps as usable an address EC2 no longer shows on the ENI.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { SimCloud } from '../../sim/index.js';
import type { Daemon } from '../../ipamd/daemon.js';
import { ipamdClient, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { testSimNode, type SimNode } from '../../kit/sim-node.js';

/**
 * How long the simulated EC2 takes to answer an unassign (ms): the adoption must land
 * inside it (an evidence pass every 100 ms), with room for a slow, loaded machine.
 */
const UNASSIGN_MS = 4000;

interface Rig {
  sim: SimCloud;
  node: SimNode;
  c: TestIpamdClient;
  d: Daemon;
}

/** A node with WARM_IP_TARGET=1, no cooldown and no hysteresis (a DEL's IP is unassigned at once); the GC grace outlasts each test. */
async function rig(t: TestContext): Promise<Rig> {
  const { sim, node } = await testSimNode(t, {
    seed: 11,
    env: {
      WARM_IP_TARGET: '1',
      MINIMUM_IP_TARGET: '0',
      IP_COOLDOWN_PERIOD: '0',
      ENI_IPAM_SHRINK_DELAY: '0',
      ENI_IPAM_POOL_INTERVAL: '50ms',
      ENI_IPAM_GC_INTERVAL: '100ms',
      ENI_IPAM_GC_GRACE: '30s',
      ENI_IPAM_RECONCILE_INTERVAL: '60s',
    },
  });
  sim.faults.setLatency('UnassignPrivateIpAddresses', { min: UNASSIGN_MS, max: UNASSIGN_MS });
  await node.start();
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const d = node.daemonHandle!;
  await waitFor('a warm IP', () => d.ds.counts(Date.now()).available >= 1);
  return { sim, node, c, d };
}

/** Secondary IPs EC2 shows on the instance's ENIs. */
function ec2Ips(r: Rig): Set<string> {
  return new Set(
    [...r.sim.state.enis.values()]
      .filter((e) => e.attachment?.instanceId === r.node.instanceId)
      .flatMap((e) => e.secondaryIps),
  );
}

/** The datastore's usable addresses (anything but `releasing`) that EC2 does not show: must be none. */
function usableButGone(r: Rig): string[] {
  const onEc2 = ec2Ips(r);
  const now = Date.now();
  return r.d.ds
    .listEnis()
    .flatMap((e) => r.d.ds.eniIps(e.eniId))
    .filter((ip) => r.d.ds.ipState(ip, now) !== 'releasing' && !onEc2.has(ip));
}

/** Waits until the simulated EC2 received an unassign naming `ip`; returns when it arrived. */
async function unassignSent(r: Rig, ip: string): Promise<number> {
  const call = await waitFor(
    `an UnassignPrivateIpAddresses of ${ip}`,
    () => r.sim.calls.find((x) => x.action === 'UnassignPrivateIpAddresses' && Object.values(x.params).includes(ip)),
    10_000,
    5,
  );
  return call.at;
}

/** Every address the datastore holds on an ENI, in any state. */
function onDatastoreEnis(r: Rig): string[] {
  return r.d.ds.listEnis().flatMap((e) => r.d.ds.eniIps(e.eniId));
}

/** A check: has the simulated EC2 answered an unassign (any)? */
const unassignDone = (r: Rig) => () =>
  r.sim.calls.some((x) => x.action === 'UnassignPrivateIpAddresses' && x.durationMs !== undefined);

const key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });

test('a sandbox whose DEL ipamd already served is not re-adopted from a runtime snapshot taken before the DEL', async (t) => {
  const r = await rig(t);
  const cri = r.node.cri!;
  cri.add({ id: 'p1', name: 'pod-p1', namespace: 'default', uid: 'uid-p1' });
  const ip = (await r.c.add('p1')).ipv4_addr;
  cri.setIp('p1', ip);
  await waitFor('the pool to settle', () => r.d.ds.counts(Date.now()).available === 1);

  // A slow runtime: the next evidence pass reads p1 (READY, with its IP) and gets the answer late.
  cri.statusDelayMs = 1000;
  const before = cri.statusCalls;
  await waitFor('an evidence pass reading the runtime', () => cri.statusCalls > before, 5000, 2);
  // containerd's StopPodSandbox: CNI DEL while the sandbox is still READY, then the sandbox goes.
  assert.equal((await r.c.del('p1')).released, true);
  cri.remove('p1');
  cri.statusDelayMs = 0;
  await unassignSent(r, ip);
  // The pass with the stale snapshot merges (1 s) while the unassign is in flight (4 s), then EC2 answers.
  await waitFor('the unassign to finish', unassignDone(r), 15_000, 20);
  await waitFor(`ipamd to drop ${ip} after EC2 unassigned it`, () => !onDatastoreEnis(r).includes(ip), 5_000, 5);

  assert.equal(
    r.d.ds.lookup(key('p1')),
    undefined,
    'the deleted sandbox was adopted again from a stale runtime snapshot',
  );
  assert.deepEqual(usableButGone(r), [], 'the datastore keeps addresses EC2 no longer shows');
  assert.equal(
    r.d.ds.ipState(ip, Date.now()),
    undefined,
    `${ip} was unassigned in EC2 and must have left the datastore`,
  );
});

test('a live sandbox found holding an IP whose unassign is in flight: EC2 decides, the IP never stays usable when gone', async (t) => {
  const r = await rig(t);
  const cri = r.node.cri!;
  cri.add({ id: 'p1', name: 'pod-p1', namespace: 'default', uid: 'uid-p1' });
  const ip = (await r.c.add('p1')).ipv4_addr;
  cri.setIp('p1', ip);
  await waitFor('the pool to settle', () => r.d.ds.counts(Date.now()).available === 1);
  assert.equal((await r.c.del('p1')).released, true);
  cri.remove('p1');
  const sentAt = await unassignSent(r, ip);
  assert.equal(r.d.ds.ipState(ip, Date.now()), 'releasing');
  // While EC2 works on the unassign, the runtime reports another sandbox using that IP
  // (e.g. one the checkpoint lacked): the evidence pass sees it.
  cri.add({ id: 'ghost', name: 'pod-ghost', namespace: 'default', uid: 'uid-ghost', ip });
  await waitFor('the evidence pass to adopt the sandbox', () => r.d.ds.lookup(key('ghost')), 10_000, 5);
  assert.equal(unassignDone(r)(), false, 'adopted while the unassign is in flight');
  assert.equal(r.d.ds.ipState(ip, Date.now()), 'assigned', 'nobody else can be handed the address meanwhile');
  await waitFor('the unassign to finish', unassignDone(r), 15_000, 20);
  assert.ok(Date.now() - sentAt >= UNASSIGN_MS - 50);
  await waitFor(
    `ipamd to drop ${ip} from its ENI after EC2 unassigned it`,
    () => !onDatastoreEnis(r).includes(ip),
    5_000,
    5,
  );

  assert.equal(ec2Ips(r).has(ip), false, 'EC2 did unassign the IP');
  assert.deepEqual(usableButGone(r), [], 'the datastore keeps addresses EC2 no longer shows');
  // The sandbox's allocation is kept (never dropped while the runtime vouches for it), flagged as
  // holding an address no ENI has: a repeated ADD is refused instead of answering with a dead IP.
  const ghost = r.d.ds.lookup(key('ghost'));
  assert.equal(ghost?.ipv4, ip, 'the live sandbox keeps its allocation');
  assert.deepEqual(
    r.d.ds.pendingAllocations().map((a) => a.containerID),
    ['ghost'],
  );
  await assert.rejects(r.c.add('ghost'), /not yet visible on any ENI/);
  // Any new ADD gets an address EC2 shows.
  for (const id of ['n1', 'n2', 'n3']) {
    const got = (await r.c.add(id)).ipv4_addr;
    assert.equal(ec2Ips(r).has(got), true, `ADD ${id} got ${got}, which EC2 does not show`);
    assert.notEqual(got, ip);
  }
});

test('a live sandbox found holding an IP whose unassign then fails for sure keeps it, assigned', async (t) => {
  const r = await rig(t);
  const cri = r.node.cri!;
  cri.add({ id: 'p1', name: 'pod-p1', namespace: 'default', uid: 'uid-p1' });
  const ip = (await r.c.add('p1')).ipv4_addr;
  cri.setIp('p1', ip);
  await waitFor('the pool to settle', () => r.d.ds.counts(Date.now()).available === 1);
  r.sim.faults.injectError({ action: 'UnassignPrivateIpAddresses', code: 'InvalidParameterValue', count: 1 });
  assert.equal((await r.c.del('p1')).released, true);
  cri.remove('p1');
  await unassignSent(r, ip);
  cri.add({ id: 'ghost', name: 'pod-ghost', namespace: 'default', uid: 'uid-ghost', ip });
  await waitFor('the evidence pass to adopt the sandbox', () => r.d.ds.lookup(key('ghost')), 10_000, 5);
  assert.equal(unassignDone(r)(), false, 'adopted while the unassign is in flight');
  await waitFor('the unassign to fail', unassignDone(r), 15_000, 20);
  await new Promise((res) => setTimeout(res, 100));

  assert.equal(ec2Ips(r).has(ip), true, 'EC2 refused the unassign');
  assert.equal(r.d.ds.ipState(ip, Date.now()), 'assigned');
  assert.equal(r.d.ds.holderOf(ip)?.containerID, 'ghost');
  assert.equal((await r.c.add('ghost')).ipv4_addr, ip, 'a repeated ADD of the live sandbox returns its IP');
  assert.deepEqual(usableButGone(r), []);
});
