/**
 * Subnet discovery and failover through real containerd (ENABLE_SUBNET_DISCOVERY at its
 * default, custom networking off): pods run with RunPodSandbox over the CRI, containerd
 * execs the plugin, the real ipamd creates ENIs on the simulated cloud. The node's own
 * subnet is tagged `kubernetes.io/role/cni=0` (no new ENI there); three subnets tagged
 * `=1` have different free counts: a 10.0.64.0/26 (59 free), b 10.0.65.0/26 (49 free,
 * a neighbour holds 10), c 10.0.66.0/27 (27 free).
 *
 * The first ENI lands in a (most free); a neighbour then takes every free address of a,
 * mid-burst: EC2 refuses the next assign or create there, and the burst completes from b
 * with no failed RunPodSandbox. Ends with the nothing-lost check. Needs root and
 * `scripts/ensure-deps.sh --containerd`; run under the containerd lock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createContainerdNode } from '../../kit/containerd-node.js';
import { callCounts, describeEnis, instanceEnis, runPods } from '../helpers/custom-net-containerd.js';

const ROLE = 'kubernetes.io/role/cni';

test('discovery through containerd: ENIs land in the most-free tagged subnet; one runs dry mid-burst and the burst completes from the next', async (t) => {
  const n = await createContainerdNode({
    instanceType: 'm5.xlarge',
    vpc: {
      subnetTags: { [ROLE]: '0' },
      extraSubnets: [
        { cidr: '10.0.64.0/26', tags: { [ROLE]: '1' } },
        { cidr: '10.0.65.0/26', tags: { [ROLE]: '1' } },
        { cidr: '10.0.66.0/27', tags: { [ROLE]: '1' } },
      ],
    },
    ipamdEnv: { WARM_IP_TARGET: '2', ENI_IPAM_ADD_WAIT_TIMEOUT: '20s' },
  });
  t.after(() => n.close());
  const [a, b, c] = n.extraSubnets as [
    (typeof n.extraSubnets)[0],
    (typeof n.extraSubnets)[0],
    (typeof n.extraSubnets)[0],
  ];
  n.sim.occupy(b.subnetId, 49);
  const name = (id: string) => ({ [a.subnetId]: 'a', [b.subnetId]: 'b', [c.subnetId]: 'c' })[id] ?? id;
  const landed = () =>
    instanceEnis(n.sim, n.instanceId)
      .filter((e) => e.attachment!.deviceIndex > 0)
      .map((e) => name(e.subnetId));

  // The primary ENI serves 14 (custom networking off); the next pods need an ENI: in a, the most free.
  const first = await runPods(n, 'first', 18);
  // (A refill racing the pods may add a second ENI before the assert; a still has the most free then.)
  const before = landed();
  assert.ok(
    before.length >= 1 && before.every((s) => s === 'a'),
    `the ENIs in a (59 free > 49 > 27): ${before.join(', ')}`,
  );
  // A neighbour takes every free address of a.
  n.sim.occupy(a.subnetId, 0);
  const atDrain = n.sim.calls.length;
  const second = await runPods(n, 'second', 22);
  const where = landed();
  for (const line of describeEnis(n.sim, n.instanceId)) t.diagnostic(line);
  t.diagnostic(`ENIs landed in: ${where.join(', ')}`);
  t.diagnostic(`EC2 calls before the drain: ${JSON.stringify(callCounts(n.sim, 0, atDrain))}`);
  const refusals = n.sim.calls.slice(atDrain).filter((x) => !x.ok && x.errorCode);
  t.diagnostic(
    `EC2 calls after the drain: ${JSON.stringify(callCounts(n.sim, atDrain))}; refused: ${refusals.map((x) => `${x.action}!${x.errorCode}`).join(', ') || 'none'}`,
  );
  assert.equal(first.length + second.length, 40, 'every RunPodSandbox succeeded');
  assert.deepEqual(where.slice(0, before.length), before, 'the ENIs of before the drain stay');
  const fresh = where.slice(before.length);
  assert.ok(fresh.length >= 1, `new ENIs were created after the drain: ${where.join(', ')}`);
  assert.ok(!fresh.includes('a'), `no new ENI in the drained subnet: ${fresh.join(', ')}`);
  assert.equal(fresh[0], 'b', 'the next most free subnet (49 > 27)');
  assert.ok(
    refusals.some((x) => x.errorCode === 'InsufficientFreeAddressesInSubnet'),
    'EC2 refused in the drained subnet (the failover was exercised)',
  );
  await n.assertNothingLost();
});
