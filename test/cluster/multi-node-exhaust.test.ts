/**
 * Three nodes scaling 0→150 pods in one subnet too small for them (a /25: 123 addresses for
 * the instances' and ENIs' primaries and every pod): the ipamds compete for the subnet through
 * the real EC2 calls of the simulated cloud. No ADD fails for want of an address while the
 * subnet can still serve its node (EC2's InsufficientFreeAddressesInSubnet is the word that it
 * cannot; the chart's ENI_IPAM_ADD_WAIT_FOR_ENI_TIMEOUT keeps ADDs waiting for an ENI still on
 * its way); once it is empty, every address it gave went to a pod or an ENI's primary, the
 * pods that could get one run, the rest wait, nothing is lost on any node, and the EC2 calls
 * each node made are reported.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { installEniIpam } from '../../kit/cluster/install.js';
import { checkNothingLostEverywhere } from '../../kit/cluster/nothing-lost-nodes.js';
import { podsOf } from '../../kit/cluster/workload.js';
import { byNode, spreadDeployment } from '../helpers/multi-node.js';

// Off by default (ENI_IPAM_TEST_EXHAUST=1 runs it; issue #38 item 5 is open): it passed twice
// alone (load 16–53) and failed once in a clean-clone CI run beside other work (load 30–50,
// 2026-12-07): 5 ADDs failed after waiting 23–26 s, past their own 10 s while an ENI was being
// created, 24 s before the subnet was empty (the wait ends when no creation is in flight, and
// a creation that served others first left them without an address).
const skip =
  process.getuid?.() !== 0
    ? 'needs root (network and mount namespaces)'
    : process.env['ENI_IPAM_TEST_EXHAUST'] !== '1'
      ? 'known to fail under heavy load (see the comment above); ENI_IPAM_TEST_EXHAUST=1 runs it'
      : false;
const PODS = 150;

/** Each failed sandbox creation the kubelets reported (FailedCreatePodSandBox Events): when (ms) and why. */
async function sandboxFailures(c: TestCluster): Promise<Array<{ at: number; message: string }>> {
  const l = await c.kubectl.json<{
    items: Array<{
      reason: string;
      message?: string;
      eventTime?: string;
      firstTimestamp?: string;
      lastTimestamp?: string;
    }>;
  }>(['-n', 'default', 'get', 'events']);
  return l.items
    .filter((e) => e.reason === 'FailedCreatePodSandBox')
    .map((e) => ({
      at: Date.parse(e.firstTimestamp ?? e.eventTime ?? e.lastTimestamp ?? ''),
      message: e.message ?? '',
    }))
    .filter((f) => Number.isFinite(f.at));
}

describe('three nodes scale 0→150 in a subnet that runs out', { skip, timeout: 30 * 60_000 }, () => {
  let c: TestCluster;
  before(async () => {
    c = await startCluster({ nodes: 3, subnetCidr: '10.0.0.0/25' });
    await installEniIpam(c, { wait: true });
  });
  after(async () => {
    await c?.close();
  });

  it('no ADD fails for want of an address while the subnet can serve its node; then every address serves a pod or an ENI', async (t) => {
    const subnet = c.sim.state.subnets.get(c.node.subnetId)!;
    const from = c.sim.calls.length;
    let emptyAt: number | undefined;
    const watch = setInterval(() => {
      if (emptyAt === undefined && subnet.addresses.freeCount() === 0) emptyAt = Date.now();
    }, 100);
    try {
      await c.kubectl.apply([spreadDeployment(c, 'many', PODS)]);
      // Steady: the subnet empty, and the running pods stop changing for 20 s.
      let last = -1;
      let since = Date.now();
      await waitFor(
        'the subnet empty and the running pods steady',
        async () => {
          const running = (await podsOf(c, 'many')).filter((p) => p.phase === 'Running' && p.ready).length;
          if (running !== last) [last, since] = [running, Date.now()];
          return emptyAt !== undefined && Date.now() - since > 20_000;
        },
        900_000,
        1000,
      );
    } finally {
      clearInterval(watch);
    }
    const failures = await sandboxFailures(c);
    // Event times have a resolution of one second. Before the subnet is empty, an ADD may fail for
    // want of an address only on EC2's word that the subnet cannot hold what the node needs (a
    // node whose ENIs are full needs a new ENI: its primary and one secondary IP, so a last free
    // address can only go to a node with a free slot); a refill that timed out is a failure.
    const early = failures.filter((f) => f.at < Math.floor(emptyAt! / 1000) * 1000 - 1000);
    const noIp = early.filter((f) => /cannot assign an IP|RESOURCE_EXHAUSTED|no free IP/.test(f.message));
    const line = (f: { at: number; message: string }) => `${new Date(f.at).toISOString()} ${f.message.slice(-300)}`;
    assert.deepEqual(
      [...new Set(noIp.filter((f) => !f.message.includes('InsufficientFreeAddressesInSubnet')).map(line))].slice(0, 5),
      [],
      `ADDs failed for want of an address before the subnet ran out at ${new Date(emptyAt!).toISOString()}, without EC2 saying the subnet was full`,
    );
    const other = early.filter((f) => !noIp.includes(f));
    if (other.length)
      t.diagnostic(
        `other sandbox failures before the subnet ran out (kubelet retried them): ${[...new Set(other.map(line))].slice(0, 3).join(' | ')}`,
      );
    const pods = await podsOf(c, 'many');
    const running = pods.filter((p) => p.phase === 'Running' && p.ready);
    const enis = [...c.sim.state.enis.values()].filter((e) => e.subnetId === subnet.subnetId);
    const held = enis.reduce((n, e) => n + e.secondaryIps.length, 0);
    const assigned = new Set(running.map((p) => p.ip));
    // Every secondary IP the nodes hold serves a running pod, but for the warm IPs a node keeps
    // for pods that are not scheduled on it (at most one ENI's worth on each node).
    assert.ok(running.length > 0 && running.length <= held, `${running.length} running, ${held} secondary IPs held`);
    const idle = enis.flatMap((e) => e.secondaryIps).filter((ip) => !assigned.has(ip));
    const perNode = new Map<string, number>();
    for (const n of c.nodes)
      perNode.set(
        n.name,
        c.sim.calls.slice(from).filter((x) => x.instanceId === n.instanceId && x.action !== 'DescribeNetworkInterfaces')
          .length,
      );
    t.diagnostic(
      `subnet empty after ${((emptyAt! - c.sim.calls[from]!.at) / 1000).toFixed(1)} s; ${running.length} of ${PODS} pods running (${[...byNode(running)].map(([n, p]) => `${n}:${p.length}`).join(' ')}), ` +
        `${enis.length} ENIs, ${held} secondary IPs, ${idle.length} held idle; ${failures.length} sandbox failures, ${noIp.length} for want of an address before the subnet ran out (each on EC2's word that it was full)`,
    );
    t.diagnostic(
      `EC2 calls per node after the scale-up began (all but describes): ${[...perNode].map(([n, k]) => `${n}=${k}`).join(' ')}`,
    );
    await checkNothingLostEverywhere(c);
  });
});
