/**
 * Each IP family's IAM policy (docs/iam/, docs/install-eks.md#1-the-iam-policy) is enough
 * for ipamd in that mode and no more than it uses: the real ipamd binary against the
 * simulated cloud enforcing the policy (sim/iam.ts answers anything no statement allows with
 * EC2's 403 UnauthorizedOperation). IPv4 and dual-stack ipamd grow to a second ENI (created
 * with its ownership tags, which IAM authorizes as CreateTags on the new ENI), then, restarted
 * with a smaller target, shrink and free it (detach, delete); IPv6 ipamd takes its /80.
 * None is refused anything, and every action the policy grants is called. IPv6 ipamd under
 * the IPv4 policy (what AmazonEKS_CNI_Policy grants) stops at start, naming
 * ec2:AssignIpv6Addresses. That the policies match the code's calls is
 * test/unit/iam-policy.test.ts; the enforcement itself, test/unit/sim-iam.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { waitFor } from '../../kit/wait.js';
import type { IamPolicy } from '../../sim/iam.js';
import type { SimCloud } from '../../sim/index.js';
import { startIpv6Node } from '../helpers/ipv6-node.js';
import { FAST_ENV } from '../helpers/lifecycle-node.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const policy = (family: string) =>
  JSON.parse(readFileSync(path.join(ROOT, 'docs', 'iam', `eni-ipam-${family}.json`), 'utf8')) as IamPolicy;
const statements = (p: IamPolicy) => (Array.isArray(p.Statement) ? p.Statement : [p.Statement]);
/** The EC2 actions a policy grants as calls (CreateTags is granted only with a create: not a call of its own). */
const grantedCalls = (p: IamPolicy) =>
  [
    ...new Set(
      statements(p)
        .filter((s) => !s.Condition)
        .flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action])),
    ),
  ]
    .map((a) => a.replace(/^ec2:/, ''))
    .sort();
const calledActions = (sim: SimCloud) => [...new Set(sim.calls.map((c) => c.action))].sort();
const refusals = (sim: SimCloud) =>
  sim.calls
    .filter((c) => c.errorCode === 'UnauthorizedOperation')
    .map((c) => `${c.action} ${JSON.stringify(c.params)}`);

const env = FAST_ENV as Record<string, string>;
/** m5.large: 9 secondary IPs (or /28 prefixes) per ENI, so a warm target of 12 (10 prefixes) needs a second ENI. */
const IPS = {
  grow: { WARM_IP_TARGET: '12', WARM_ENI_TARGET: '0' },
  shrunk: { WARM_IP_TARGET: '1', WARM_ENI_TARGET: '0', ENI_IPAM_MIN_ENI_AGE: '1s' },
};
/** Prefix delegation (IPv6 and dual-stack modes need it). */
const PREFIXES = {
  grow: { WARM_PREFIX_TARGET: '10', WARM_ENI_TARGET: '0' },
  shrunk: { WARM_PREFIX_TARGET: '1', WARM_ENI_TARGET: '0', ENI_IPAM_MIN_ENI_AGE: '1s' },
};

/** ipamd grows to two ENIs, then, restarted with a target of 1, frees the second (no pods). */
async function growShrinkFree(h: NodeHarness, targets: typeof IPS | typeof PREFIXES): Promise<void> {
  const status = async () => (await h.ipamd!.status()) as { counts: { enis: number; total: number } };
  await h.startIpamd(targets.grow);
  await waitFor('two ENIs', async () => ((await status()).counts.enis === 2 ? true : undefined), 30_000);
  const [created] = [...h.sim.state.enis.values()].filter((e) => e.attachment?.deviceIndex === 1);
  assert.equal(
    created?.tags['node.k8s.amazonaws.com/instance_id'],
    h.instanceId,
    'the second ENI carries its ownership tags from its creation',
  );
  await h.ipamd!.stop(10_000);
  await h.startIpamd(targets.shrunk);
  await waitFor(
    'the second ENI freed (detached and deleted)',
    async () =>
      (await status()).counts.enis === 1 && !h.sim.state.enis.has(created.networkInterfaceId) ? true : undefined,
    60_000,
  );
  await waitFor('the surplus on the primary ENI unassigned', () =>
    h.sim.calls.some((c) => c.action === 'UnassignPrivateIpAddresses' && c.ok) ? true : undefined,
  );
}

test('IPv4 mode under the IPv4 policy: grow, shrink, free with no refusal, every granted action used', async (t) => {
  const h = await createNode({ cri: { identity: null }, ipamdEnv: env });
  t.after(() => h.close());
  h.sim.setIamPolicy(policy('ipv4'));
  await growShrinkFree(h, IPS);
  assert.deepEqual(refusals(h.sim), []);
  assert.deepEqual(calledActions(h.sim), grantedCalls(policy('ipv4')));
});

test('IPv6 mode under the IPv6 policy: the /80 with no refusal, every granted action used', async (t) => {
  const { h, sim } = await startIpv6Node(t, 'iam6', env, {
    beforeStart: (h) => Promise.resolve(h.sim.setIamPolicy(policy('ipv6'))),
  });
  assert.equal(sim.countCalls('AssignIpv6Addresses'), 1);
  const st = (await h.ipamd!.status()) as { counts: { enis: number } };
  assert.equal(st.counts.enis, 1, 'IPv6 mode creates no ENI');
  assert.deepEqual(refusals(sim), []);
  assert.deepEqual(calledActions(sim), grantedCalls(policy('ipv6')));
});

test('dual-stack mode under the dual policy: the /80, grow, shrink, free with no refusal, every granted action used', async (t) => {
  const { h, sim } = await startIpv6Node(t, 'iamd', env, {
    mode: 'dual',
    beforeStart: (h) => Promise.resolve(h.sim.setIamPolicy(policy('dual'))),
  });
  await h.ipamd!.stop(10_000);
  await growShrinkFree(h, PREFIXES);
  assert.deepEqual(refusals(sim), []);
  assert.deepEqual(calledActions(sim), grantedCalls(policy('dual')));
});

test('IPv6 mode under the IPv4 policy stops at start naming ec2:AssignIpv6Addresses', async (t) => {
  await assert.rejects(
    startIpv6Node(t, 'iam64', env, {
      beforeStart: (h) => Promise.resolve(h.sim.setIamPolicy(policy('ipv4'))),
    }),
    (e: Error) => {
      assert.match(e.message, /ipamd exited with \d+ before serving/);
      assert.match(e.message, /UnauthorizedOperation/);
      assert.match(e.message, /ec2:AssignIpv6Addresses/);
      return true;
    },
  );
});
