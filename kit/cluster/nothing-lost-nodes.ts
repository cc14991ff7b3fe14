/**
 * The nothing-lost check on every node of a multi-node cluster, and across them: each node's
 * READY sandboxes (its own CRI), its ipamd's allocations, its instance's ENIs in EC2 and the
 * EC2 call log go through the one rule set of kit/nothing-lost.ts (`findLosses`: each live pod
 * keeps its IP on its eth0, on an ENI attached to its node's instance, never unassigned,
 * detached or deleted after the pod started, and ipamd holds exactly the live pods); across
 * the VPC, no address is held by two live pods or by two nodes' ipamds.
 */
import { CriTestClient } from '../cri-client.js';
import { findLosses, type LiveSandbox } from '../nothing-lost.js';
import { ipIn } from '../netns.js';
import { waitFor } from '../wait.js';
import type { ClusterNode, TestCluster } from './cluster.js';
import { allocations } from './workload.js';

/** One node's READY sandboxes with the IPv4 on each one's eth0. */
async function liveOn(node: ClusterNode): Promise<{ live: LiveSandbox[]; inNetns: Map<string, string | undefined> }> {
  const cri = new CriTestClient(node.procs.criSocket, 30_000);
  try {
    const live = await cri.liveSandboxes();
    const inNetns = new Map<string, string | undefined>();
    for (const s of live) {
      const ns = await cri.netnsPath(s.id);
      const out = ns ? await ipIn(ns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']).catch(() => '') : '';
      inNetns.set(s.id, /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out)?.[1]);
    }
    return { live, inNetns };
  } finally {
    cri.close();
  }
}

/** Every violation on every live node and across them, one line each (empty: nothing lost). */
export async function findLossesEverywhere(c: TestCluster, nodes: ClusterNode[]): Promise<string[]> {
  const bad: string[] = [];
  const podAt = new Map<string, string>();
  const heldBy = new Map<string, string>();
  for (const n of nodes) {
    const { live, inNetns } = await liveOn(n);
    const allocs = await allocations(c, n);
    for (const line of findLosses({
      live,
      ipAtStart: new Map(),
      ipInNetns: inNetns,
      sim: c.sim.state,
      calls: c.sim.calls,
      instanceId: n.instanceId,
      allocations: allocs,
    }))
      bad.push(`${n.name}: ${line}`);
    for (const s of live) {
      const other = podAt.get(s.ip);
      if (other) bad.push(`IP ${s.ip} is held by live pods on two nodes: ${other} and ${n.name}/${s.podName}`);
      podAt.set(s.ip, `${n.name}/${s.podName}`);
    }
    for (const a of allocs) {
      const other = heldBy.get(a.ipv4);
      if (other && other !== n.name) bad.push(`ipamd on ${other} and on ${n.name} both hold ${a.ipv4}`);
      heldBy.set(a.ipv4, n.name);
    }
  }
  return bad;
}

/**
 * Waits (≤ `timeoutMs`, default 3 min: leaked allocations are released after the GC grace)
 * until nothing is lost on `nodes` (default every node not closed) and across them.
 * @throws Error listing what is still wrong.
 */
export async function checkNothingLostEverywhere(
  c: TestCluster,
  nodes: ClusterNode[] = c.nodes.filter((n) => !n.closed),
  timeoutMs = 180_000,
): Promise<void> {
  let last: string[] = [];
  await waitFor(
    'nothing lost on every node',
    async () => {
      last = await findLossesEverywhere(c, nodes);
      return last.length === 0;
    },
    timeoutMs,
    2000,
  ).catch(() => {
    throw new Error(`nothing-lost check failed on ${nodes.map((n) => n.name).join(', ')}:\n  ${last.join('\n  ')}`);
  });
}
