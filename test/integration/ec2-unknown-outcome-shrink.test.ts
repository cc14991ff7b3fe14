/**
 * docs/design.md#10-the-warm-pool-at-depth item 5, unknown outcomes on the shrink side: UnassignPrivateIpAddresses
 * (secondary IPs and /28 prefixes), DetachNetworkInterface and DeleteNetworkInterface
 * each fail once with a 500 that EC2 did act on, a 500 that it did not, and no answer at
 * all after acting (the 1 s attempt timeout runs out). The real ipamd against the
 * simulated cloud, with a stand-in CRI so releases are not frozen.
 *
 * Every case: ADDs right after the failure get IPs EC2 shows on an ENI attached to the
 * node at that moment (an address whose unassign may have happened is never handed
 * out); ipamd converges on EC2 (per-ENI address counts equal, nothing releasing,
 * pending or orphaned, any leaked ENI swept); and the "nothing lost" check passes (no
 * live pod's IP, prefix or ENI released).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import {
  createLifecycleNode,
  nothingLost,
  ourEnis,
  waitUnfrozen,
  type LifecycleNode,
} from '../helpers/lifecycle-node.js';
import {
  addOnEc2,
  injectUnknown,
  OUTCOMES,
  UNKNOWN_OUTCOME_ENV,
  waitConverged,
  waitFaultDrawn,
  type UnknownOutcome,
} from '../helpers/unknown-outcome.js';
import { waitFor } from '../../kit/wait.js';

async function node(t: TestContext, env: NodeJS.ProcessEnv): Promise<LifecycleNode> {
  // The periodic reconcile (60 s by default) is far off: ipamd must get it right without it.
  const n = await createLifecycleNode({
    env: { ...UNKNOWN_OUTCOME_ENV, ENI_IPAM_SHRINK_DELAY: '500ms', ENI_IPAM_RECONCILE_INTERVAL: '30s', ...env },
  });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  return n;
}

/**
 * After the failure: once the failed call and its retries are over and nothing is held
 * `releasing`, ADDs take every available address (each checked against EC2: an address
 * whose release may have happened must not be among them); then convergence, the check.
 */
async function afterFailure(t: TestContext, n: LifecycleNode, action: string): Promise<string[]> {
  await waitFaultDrawn(n, action);
  await waitFor(
    'the failed release settled',
    async () =>
      !n.h.sim.calls.some((c) => c.action === action && c.durationMs === undefined) &&
      (await n.status()).counts.releasing === 0,
    60_000,
  );
  const available = (await n.status()).counts.available as number;
  const t0 = n.h.sim.calls.find((c) => c.action === action)!.at;
  t.diagnostic(
    `${available} available; mutating calls from the failure on: ${n.h.sim.calls
      .filter((c) => c.at >= t0 && !c.action.startsWith('Describe'))
      .map((c) => `+${c.at - t0}ms ${c.action}${c.errorCode ? `!${c.errorCode}` : ''}`)
      .join(', ')}`,
  );
  for (let i = 0; i <= available; i++) await addOnEc2(n, `r${i}`);
  const swept = await waitConverged(n);
  for (let i = 0; i < 3; i++) await addOnEc2(n, `s${i}`);
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
  return swept;
}

for (const outcome of OUTCOMES) {
  test(`UnassignPrivateIpAddresses (secondary IPs), ${outcome}: an IP that may be gone is never handed out`, async (t) => {
    const n = await node(t, { WARM_IP_TARGET: '2' });
    for (const id of ['live0', 'live1', 'live2']) await n.add(id);
    const extra = Array.from({ length: 5 }, (_, i) => `x${i}`);
    for (const id of extra) await n.add(id);
    injectUnknown(n, 'UnassignPrivateIpAddresses', outcome);
    for (const id of extra) await n.del(id);
    await afterFailure(t, n, 'UnassignPrivateIpAddresses');
  });

  test(`UnassignPrivateIpAddresses (/28 prefixes), ${outcome}: a prefix that may be gone is never served from`, async (t) => {
    const n = await node(t, { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1' });
    await waitFor('one free /28', async () => (await n.status()).pool.freePrefixes === 1);
    for (let i = 0; i < 17; i++) await n.add(`p${i}`);
    await waitFor('3 prefixes, one free', async () => {
      const s = await n.status();
      return s.pool.freePrefixes === 1 && s.counts.total === 48;
    });
    injectUnknown(n, 'UnassignPrivateIpAddresses', outcome);
    await n.del('p16');
    await afterFailure(t, n, 'UnassignPrivateIpAddresses');
  });
}

/** A node with 3 ENIs whose surplus ENI is freed while `action` fails once as `outcome`. */
async function freeEniThrough(
  t: TestContext,
  action: string,
  outcome: UnknownOutcome,
  detachMs = 0,
): Promise<{ n: LifecycleNode; swept: string[] }> {
  const n = await node(t, { ENI_IPAM_MIN_ENI_AGE: '1s' });
  n.h.sim.faults.setAttachmentDelays({ detachMs });
  const extra = Array.from({ length: 15 }, (_, i) => `x${i}`);
  for (const id of ['live0', 'live1', 'live2', ...extra]) await n.add(id);
  await waitFor('3 ENIs', async () => (await n.status()).counts.enis === 3);
  injectUnknown(n, action, outcome);
  for (const id of extra) await n.del(id);
  const swept = await afterFailure(t, n, action);
  return { n, swept };
}

for (const outcome of OUTCOMES) {
  test(`DetachNetworkInterface, ${outcome}: the ENI is never served from once a detach may have happened; converges`, async (t) => {
    const { n } = await freeEniThrough(t, 'DetachNetworkInterface', outcome);
    assert.ok(n.h.sim.countCalls('DetachNetworkInterface') >= 1);
    for (const e of ourEnis(n))
      assert.equal(e.attachment?.status, 'attached', `${e.networkInterfaceId} is attached or gone`);
  });

  test(`DetachNetworkInterface with a 1 s detach, ${outcome}: converges`, async (t) => {
    await freeEniThrough(t, 'DetachNetworkInterface', outcome, 1000);
  });

  test(`DeleteNetworkInterface, ${outcome}: the detached ENI is deleted (NotFound on a repeat is success)`, async (t) => {
    const { n } = await freeEniThrough(t, 'DeleteNetworkInterface', outcome);
    assert.ok(n.h.sim.countCalls('DeleteNetworkInterface') >= 1);
  });
}
