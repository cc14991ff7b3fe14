/**
 * docs/design.md#10-the-warm-pool-at-depth item 5, unknown outcomes on the grow side: AssignPrivateIpAddresses (secondary
 * IPs and /28 prefixes), CreateNetworkInterface and AttachNetworkInterface each fail once
 * with a 500 that EC2 did act on, a 500 that it did not, and (assign, create) no answer
 * at all after acting (the 1 s attempt timeout runs out). The real ipamd against the
 * simulated cloud, with a stand-in CRI so releases are not frozen.
 *
 * Every case: each ADD gets an IP EC2 shows on an ENI attached to the node at that
 * moment; ipamd then converges on EC2 (per-ENI address counts equal, nothing pending,
 * any leaked ENI swept once 5 minutes old); and the "nothing lost" check passes.
 * The prefix cases also prove that the reconcile adds /28 prefixes EC2 shows but the
 * datastore lacks (an assign that happened though the call failed).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { AssignPrivateIpAddressesCommand } from '@aws-sdk/client-ec2';
import {
  createLifecycleNode,
  nothingLost,
  ourEnis,
  prefixAddresses,
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
  const n = await createLifecycleNode({ env: { ...UNKNOWN_OUTCOME_ENV, ...env } });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  return n;
}

/** Pods (at least `pods`, more than the pool has available) that outgrow the warm pool while `action` fails once as `outcome`; then converge and check. */
async function growThrough(
  n: LifecycleNode,
  action: string,
  outcome: UnknownOutcome,
  pods: number,
): Promise<{ swept: string[] }> {
  // The pool at its targets (no grow in flight), then more pods than it has available: the
  // grow, and so the injected failure, must happen however the pool got to its size.
  const settled = await waitFor(
    'the warm pool filled, at its targets',
    async () => {
      const s = await n.status();
      return s.counts.available >= 2 && s.pool.short === 0 ? s : undefined;
    },
    15_000,
  );
  // Assign cases: whatever size the pool reached, outnumber it so the assign must happen. Create and
  // attach cases keep their count: a new ENI is needed anyway, and more waiters would outwait its sweep.
  const count = action === 'AssignPrivateIpAddresses' ? Math.max(pods, settled.counts.available + 1) : pods;
  injectUnknown(n, action, outcome);
  const ips = await Promise.all(Array.from({ length: count }, (_, i) => addOnEc2(n, `g${i}`)));
  assert.equal(new Set(ips).size, count, 'unique IPs');
  await waitFaultDrawn(n, action);
  const swept = await waitConverged(n);
  for (let i = 0; i < 4; i++) await addOnEc2(n, `after${i}`);
  await waitConverged(n);
  assert.deepEqual(await nothingLost(n), []);
  return { swept };
}

for (const outcome of OUTCOMES) {
  test(`AssignPrivateIpAddresses (secondary IPs), ${outcome}: converges, no IP served that EC2 does not show`, async (t) => {
    const n = await node(t, { WARM_IP_TARGET: '2' });
    for (const id of ['live0', 'live1', 'live2']) await n.add(id);
    await growThrough(n, 'AssignPrivateIpAddresses', outcome, 5);
  });

  test(`AssignPrivateIpAddresses (/28 prefixes), ${outcome}: a prefix EC2 assigned is added by the reconcile`, async (t) => {
    const n = await node(t, { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1' });
    await waitFor('one free /28', async () => (await n.status()).pool.freePrefixes === 1);
    for (let i = 0; i < 14; i++) await n.add(`live${i}`);
    await growThrough(n, 'AssignPrivateIpAddresses', outcome, 6);
    if (outcome !== 'not-applied-5xx') {
      const s = await n.status();
      const onEc2 = [...n.h.sim.state.enis.values()]
        .filter((e) => e.attachment?.instanceId === n.h.instanceId)
        .flatMap((e) => e.ipv4Prefixes);
      assert.equal(s.counts.total, onEc2.length * 16, `every /28 EC2 shows is known: ${onEc2.join(', ')}`);
    }
  });
}

for (const outcome of OUTCOMES) {
  test(`CreateNetworkInterface, ${outcome}: an ENI EC2 made for a failed call is swept, never served from`, async (t) => {
    const n = await node(t, { WARM_IP_TARGET: '2' });
    for (let i = 0; i < 7; i++) await n.add(`live${i}`);
    const { swept } = await growThrough(n, 'CreateNetworkInterface', outcome, 5);
    const creates = n.h.sim.calls.filter((c) => c.action === 'CreateNetworkInterface');
    assert.equal(swept.length, outcome === 'not-applied-5xx' ? 0 : 1, `leaked ENIs swept: ${swept.join(', ')}`);
    assert.equal(creates.length, 2, 'one failed create, one that worked');
    assert.equal(ourEnis(n).length, 1);
  });
}

for (const outcome of ['applied-5xx', 'not-applied-5xx'] as const) {
  test(`AttachNetworkInterface, ${outcome}: attached → adopted; not attached → swept; never a second ENI for one attach`, async (t) => {
    const n = await node(t, { WARM_IP_TARGET: '2' });
    for (let i = 0; i < 7; i++) await n.add(`live${i}`);
    const { swept } = await growThrough(n, 'AttachNetworkInterface', outcome, 5);
    const first = n.h.sim.calls.find((c) => c.action === 'CreateNetworkInterface');
    assert.ok(first);
    if (outcome === 'applied-5xx') {
      assert.equal(swept.length, 0, 'the attached ENI was adopted, not leaked');
      assert.equal(n.h.sim.countCalls('CreateNetworkInterface'), 1, 'no second ENI');
    } else {
      assert.equal(swept.length, 1, 'the unattached ENI was swept');
    }
    assert.ok(
      ourEnis(n).every((e) => e.attachment?.status === 'attached' && e.attachment.deleteOnTermination),
      'every ENI of ours attached with DeleteOnTermination',
    );
  });
}

test('the reconcile adds a /28 prefix EC2 shows on our ENI that the datastore lacks (and serves from it)', async (t) => {
  const n = await node(t, { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1', ENI_IPAM_SHRINK_DELAY: '1h' });
  await waitFor('one free /28', async () => (await n.status()).pool.freePrefixes === 1);
  const primary = [...n.h.sim.state.enis.values()].find(
    (e) => e.attachment?.instanceId === n.h.instanceId && e.attachment.deviceIndex === 0,
  )!;
  const before = [...primary.ipv4Prefixes];
  // A prefix assigned behind ipamd's back (as an assign whose answer was lost leaves it).
  const out = await n.ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: primary.networkInterfaceId, Ipv4PrefixCount: 1 }),
  );
  const extra = out.AssignedIpv4Prefixes![0]!.Ipv4Prefix!;
  const r = await waitFor(
    'a reconcile pass that added it',
    async () => {
      const last = (await n.status()).eniLifecycle.lastReconcile;
      return last?.addedIps.includes(extra) ? last : undefined;
    },
    10_000,
  );
  assert.deepEqual(r.removedIps, []);
  const s = await n.status();
  assert.equal(s.counts.total, (before.length + 1) * 16);
  for (let i = 0; i < 32; i++) await addOnEc2(n, `p${i}`);
  assert.ok(
    [...n.pods.values()].some((ip) => prefixAddresses(extra).includes(ip)),
    'its addresses are served',
  );
  assert.deepEqual(await nothingLost(n), []);
});
