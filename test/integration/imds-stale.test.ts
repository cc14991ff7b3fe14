/**
 * docs/design.md#10-the-warm-pool-at-depth item 6, IMDS is a hint and EC2 is the truth, with the simulated cloud's IMDS
 * lag knob (the field's 90 s / 120 s cases shortened to a few seconds, same logic):
 * a new ENI that IMDS shows late is waited for with backoff, then adopted (also when
 * the wait runs out first: the reconcile adopts it, no second ENI is created); a freed
 * IP that IMDS still lists is never handed out, also across a restart; IPs that IMDS
 * does not list yet at a restart stay with their pods. The reconcile reports the
 * content differences. Each test ends with the "nothing lost" check.
 *
 * "Partial list at restart" is tested for secondary IPs and for /28 prefixes. One test
 * runs the "new ENI missing 90 s" case with every period scaled by the same factor.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import {
  createLifecycleNode,
  listParam,
  nothingLost,
  ourEnis,
  waitUnfrozen,
  type LifecycleNode,
} from '../helpers/lifecycle-node.js';
import { waitFor } from '../../kit/wait.js';

/**
 * With ENI_IPAM_FAST_RESTART the first reconcile pass after a restart is EC2's confirm of
 * the cached inventory, after a random delay up to this: kept well inside the IMDS lag,
 * so that the pass still sees IMDS behind EC2 (the case under test).
 */
const CONFIRM_SOON = { ENI_IPAM_RESTART_CONFIRM_JITTER: '100ms' };

async function nodeWithPods(t: TestContext, env: NodeJS.ProcessEnv = {}): Promise<LifecycleNode> {
  const n = await createLifecycleNode({ env: { WARM_IP_TARGET: '2', ENI_IPAM_ADD_WAIT_TIMEOUT: '15s', ...env } });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  for (const id of ['live0', 'live1', 'live2']) await n.add(id);
  return n;
}

/** 7 concurrent ADDs (they need a second ENI), with the time each was answered. */
async function burst(n: LifecycleNode): Promise<Array<{ ip: string; at: number }>> {
  return Promise.all(
    Array.from({ length: 7 }, async (_, i) => ({ ip: (await n.add(`g${i}`)).ipv4_addr, at: Date.now() })),
  );
}

/** True if `ip` is on a secondary ENI of ours in EC2. */
function onSecondEni(n: LifecycleNode, ip: string): boolean {
  return ourEnis(n).some((e) => (e.attachment?.deviceIndex ?? 0) > 0 && e.secondaryIps.includes(ip));
}

test('a new ENI IMDS lists 3 s late is waited for with backoff, then adopted; its IPs are not served before', async (t) => {
  const n = await nodeWithPods(t);
  n.h.sim.faults.setImdsLag('attach', 3000);
  const replies = await burst(n);
  const attach = n.h.sim.calls.find((c) => c.action === 'AttachNetworkInterface')!;
  const visibleAt = attach.at + 3000;
  const late = replies.filter((r) => onSecondEni(n, r.ip));
  assert.ok(late.length > 0, 'some ADDs were served from the new ENI');
  for (const r of late)
    assert.ok(r.at >= visibleAt - 50, `${r.ip} served ${visibleAt - r.at} ms before IMDS listed its ENI`);
  assert.equal(n.h.sim.countCalls('CreateNetworkInterface'), 1);
  assert.deepEqual(await nothingLost(n), []);
});

test('when IMDS is later than ENI_IPAM_IMDS_ENI_WAIT, the ENI stays pending, no second ENI is made, the reconcile adopts it', async (t) => {
  const n = await nodeWithPods(t, { ENI_IPAM_IMDS_ENI_WAIT: '500ms', ENI_IPAM_RECONCILE_INTERVAL: '30s' });
  n.h.sim.faults.setImdsLag('attach', 3000);
  const pending = burst(n);
  await waitFor(
    'the ENI left pending',
    async () => (await n.status()).eniLifecycle.pendingEnis.length === 1,
    10_000,
    20,
  );
  const s = await n.status();
  assert.equal(s.counts.enis, 1, 'not served from while IMDS does not list it');
  const replies = await pending;
  assert.equal(n.h.sim.countCalls('CreateNetworkInterface'), 1, 'no second ENI for the same demand');
  const after = await n.status();
  assert.equal(after.counts.enis, 2);
  assert.deepEqual(after.eniLifecycle.pendingEnis, []);
  assert.ok(after.eniLifecycle.reconcilePasses >= 2, 'adopted by a reconcile retry, well before the 30 s interval');
  assert.equal(new Set(replies.map((r) => r.ip)).size, 7);
  assert.deepEqual(await nothingLost(n), []);
});

/**
 * The field's timings scaled by 1/30 so the order of events is the production one: IMDS
 * lists the new ENI 90 s (3 s) late, grow waits 30 s (1 s) for it, the reconcile runs
 * every 60 s (2 s), an ADD waits at most 10 s (333 ms). ADDs the old pool cannot serve
 * fail with the reason and are retried (as kubelet does) until the ENI is adopted.
 */
test('scaled 1/30: a new ENI IMDS lists 90 s late outlasts the grow wait and several reconcile passes; adopted once listed', async (t) => {
  const n = await nodeWithPods(t, {
    ENI_IPAM_IMDS_ENI_WAIT: '1s',
    ENI_IPAM_RECONCILE_INTERVAL: '2s',
    ENI_IPAM_ADD_WAIT_TIMEOUT: '333ms',
  });
  n.h.sim.faults.setImdsLag('attach', 3000);
  const passesBefore = (await n.status()).eniLifecycle.reconcilePasses as number;
  const served: Array<{ ip: string; at: number }> = [];
  const failures: string[] = [];
  await Promise.all(
    Array.from({ length: 7 }, async (_, i) => {
      for (let attempt = 0; ; attempt++) {
        try {
          served.push({ ip: (await n.add(`g${i}`)).ipv4_addr, at: Date.now() });
          return;
        } catch (e) {
          failures.push((e as Error).message);
          n.cri.removePod(`g${i}`);
          await n.client.del(`g${i}`); // kubelet's DEL of the failed sandbox, then a retry
          assert.ok(attempt < 60, 'retried for 30 s');
          await new Promise((r) => setTimeout(r, 500)); // not a wait: kubelet's back-off before it retries a sandbox
        }
      }
    }),
  );
  const attach = n.h.sim.calls.find((c) => c.action === 'AttachNetworkInterface')!;
  const visibleAt = attach.at + 3000;
  assert.ok(failures.length > 0, 'some ADDs outwaited their 333 ms');
  for (const m of failures) assert.match(m, /no free IP/);
  const late = served.filter((r) => onSecondEni(n, r.ip));
  assert.ok(late.length > 0);
  for (const r of late)
    assert.ok(r.at >= visibleAt - 50, `${r.ip} served ${visibleAt - r.at} ms before IMDS listed its ENI`);
  assert.equal(n.h.sim.countCalls('CreateNetworkInterface'), 1, 'no second ENI while the first is pending');
  const s = await n.status();
  assert.ok(
    s.eniLifecycle.reconcilePasses - passesBefore >= 3,
    `several reconcile passes during the lag (${s.eniLifecycle.reconcilePasses - passesBefore})`,
  );
  assert.deepEqual(s.eniLifecycle.pendingEnis, []);
  assert.equal(new Set(served.map((r) => r.ip)).size, 7);
  assert.deepEqual(await nothingLost(n), []);
});

test('a freed IP IMDS still lists for 5 s is never handed out, also after a kill -9 and restart', async (t) => {
  const n = await nodeWithPods(t, { ENI_IPAM_SHRINK_DELAY: '500ms' });
  const extra = ['x0', 'x1', 'x2', 'x3'];
  for (const id of extra) await n.add(id);
  n.h.sim.faults.setImdsLag('unassign', 5000);
  for (const id of extra) await n.del(id);
  await waitFor(
    'the surplus unassigned',
    () => n.h.sim.calls.some((c) => c.action === 'UnassignPrivateIpAddresses' && c.durationMs !== undefined),
    10_000,
  );
  const freed = n.h.sim.calls
    .filter((c) => c.action === 'UnassignPrivateIpAddresses')
    .flatMap((c) => listParam(c.params, 'PrivateIpAddress'));
  await n.h.ipamd!.kill9();
  await n.start(CONFIRM_SOON);
  await waitFor(
    'a reconcile pass after the restart',
    async () => (await n.status()).eniLifecycle.lastReconcile?.ok === true,
  );
  const s = await n.status();
  for (const ip of freed)
    assert.ok(s.eniLifecycle.lastReconcile.imdsOnly.includes(ip), `IMDS still lists ${ip} (reported, ignored)`);
  const onEc2 = ourEnis(n)
    .concat([...n.h.sim.state.enis.values()].filter((e) => e.attachment?.deviceIndex === 0))
    .flatMap((e) => e.secondaryIps);
  assert.equal(s.counts.total, onEc2.length, 'the datastore holds what EC2 shows, not what IMDS lists');
  const first = [await n.add('y0'), await n.add('y1')].map((r) => r.ipv4_addr);
  for (const ip of first)
    assert.ok(!freed.includes(ip), `${ip} was freed; IMDS still listing it does not make it ours`);
  await waitFor(
    'IMDS caught up',
    async () => (await n.status()).eniLifecycle.lastReconcile.imdsOnly.length === 0,
    10_000,
  );
  assert.deepEqual(await nothingLost(n), []);
});

test('at a restart, IPs IMDS does not list yet stay with their pods (EC2 confirms them); nothing is dropped', async (t) => {
  const n = await nodeWithPods(t);
  // A lag no restart outlasts, even on a loaded machine; IMDS is made to catch up once the reconcile was seen.
  n.h.sim.faults.setImdsLag('assign', 120_000);
  const extra = ['x0', 'x1', 'x2', 'x3'];
  const held = new Map<string, string>();
  for (const id of extra) held.set(id, (await n.add(id)).ipv4_addr);
  await waitFor('the pool refilled', async () => (await n.status()).counts.available >= 2);
  await n.h.ipamd!.kill9();
  await n.start(CONFIRM_SOON);
  await waitFor(
    'a reconcile pass after the restart',
    async () => (await n.status()).eniLifecycle.lastReconcile?.ok === true,
  );
  const s = await n.status();
  assert.ok(s.eniLifecycle.lastReconcile.imdsMissing.length > 0, 'IMDS lists fewer IPs than EC2 (reported, ignored)');
  assert.equal(s.counts.assigned, 7, 'every pod kept its IP');
  n.h.sim.faults.setImdsLag('assign', 0);
  n.h.sim.catchUpImds();
  for (const [id, ip] of held) assert.equal((await n.client.add(id)).ipv4_addr, ip, `${id} keeps ${ip}`);
  const fresh = [];
  for (let i = 0; i < 4; i++) fresh.push((await n.add(`y${i}`)).ipv4_addr);
  for (const ip of fresh) assert.ok(![...held.values()].includes(ip), `${ip} is held by a pod`);
  assert.equal(n.h.sim.countCalls('UnassignPrivateIpAddresses'), 0, "nothing released on IMDS's word");
  assert.deepEqual(await nothingLost(n), []);
});

test('prefix delegation: at a restart, /28 prefixes IMDS does not list yet stay with their pods', async (t) => {
  const n = await createLifecycleNode({
    env: { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1', ENI_IPAM_ADD_WAIT_TIMEOUT: '15s' },
  });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  n.h.sim.faults.setImdsLag('assign', 120_000);
  const held = new Map<string, string>();
  for (let i = 0; i < 20; i++) held.set(`p${i}`, (await n.add(`p${i}`)).ipv4_addr);
  const prefixes = ourEnisOrPrimary(n).flatMap((e) => e.ipv4Prefixes);
  assert.ok(prefixes.length >= 2, `pods span /28 prefixes: ${prefixes.join(', ')}`);
  await n.h.ipamd!.kill9();
  await n.start(CONFIRM_SOON);
  await waitFor(
    'a reconcile pass after the restart',
    async () => (await n.status()).eniLifecycle.lastReconcile?.ok === true,
  );
  const s = await n.status();
  assert.ok(
    s.eniLifecycle.lastReconcile.imdsMissing.some((x: string) => x.endsWith('/28')),
    `IMDS lists a partial prefix list: ${JSON.stringify(s.eniLifecycle.lastReconcile)}`,
  );
  assert.equal(s.counts.assigned, 20, 'every pod kept its IP');
  n.h.sim.faults.setImdsLag('assign', 0);
  n.h.sim.catchUpImds();
  for (const [id, ip] of held) assert.equal((await n.client.add(id)).ipv4_addr, ip, `${id} keeps ${ip}`);
  const fresh = [];
  for (let i = 0; i < 5; i++) fresh.push((await n.add(`y${i}`)).ipv4_addr);
  for (const ip of fresh) assert.ok(![...held.values()].includes(ip), `${ip} is held by a pod`);
  assert.equal(n.h.sim.countCalls('UnassignPrivateIpAddresses'), 0, "nothing released on IMDS's word");
  assert.deepEqual(await nothingLost(n), []);
});

/** Our ENIs and the primary ENI of the node, as EC2 holds them. */
function ourEnisOrPrimary(n: LifecycleNode) {
  return [...n.h.sim.state.enis.values()].filter((e) => e.attachment?.instanceId === n.h.instanceId);
}
