/**
 * The nothing-lost check after Kubernetes' e2e suite
 * (docs/design.md#9-restore-sources-and-the-nothing-lost-check, on a whole cluster): once
 * the suite's namespaces are gone, the nodes' ipamds together hold exactly the IPv4 addresses of the pods still
 * running, each for its own pod, each on the ENI EC2 (the simulated cloud's state) has it
 * on, and no address twice. After a hundred specs that made and removed pods, Services and
 * namespaces, a leak, a double assignment or an address EC2 no longer has shows here.
 */
import { eniPodAddresses } from '../nothing-lost.js';
import { waitFor } from '../wait.js';
import type { TestCluster } from './cluster.js';
import type { IpamdAllocation } from '../containerd-node-types.js';
import { allocations } from './workload.js';

/** Namespaces the cluster has of its own; every other one is a spec's. */
const SYSTEM_NAMESPACES = new Set(['default', 'kube-system', 'kube-public', 'kube-node-lease']);

interface PodItem {
  metadata: { namespace: string; name: string; uid: string; deletionTimestamp?: string };
  spec: { hostNetwork?: boolean };
  status: { podIP?: string; podIPs?: Array<{ ip: string }> };
}

/** What the check saw. */
export interface AfterSuiteResult {
  /** Pods with an IPv4 address of their own (not hostNetwork) left running. */
  pods: number;
  /** One line per difference; empty when nothing is lost. */
  problems: string[];
}

/**
 * Waits (≤ 5 min) for the suite's namespaces to go, then (≤ 3 min) for ipamd's allocations
 * to settle on the live pods, and compares them with the pods and with EC2.
 * @throws Error only when kubectl or ipamd's introspection cannot be read at all.
 */
export async function checkAfterSuite(c: TestCluster): Promise<AfterSuiteResult> {
  const problems: string[] = [];
  await waitFor(
    "the e2e specs' namespaces gone",
    async () => {
      const ns = await c.kubectl.json<{ items: Array<{ metadata: { name: string } }> }>(['get', 'namespaces']);
      return ns.items.every((n) => SYSTEM_NAMESPACES.has(n.metadata.name));
    },
    300_000,
    2000,
  ).catch((e: Error) => problems.push(e.message));
  const livePods = async (): Promise<Array<{ id: string; ip: string; uid: string }>> => {
    const l = await c.kubectl.json<{ items: PodItem[] }>(['get', 'pods', '-A']);
    return l.items
      .filter((p) => !p.spec.hostNetwork && !p.metadata.deletionTimestamp)
      .flatMap((p) => {
        const ip = (p.status.podIPs ?? []).map((x) => x.ip).find((x) => x.includes('.'));
        return ip ? [{ id: `${p.metadata.namespace}/${p.metadata.name}`, ip, uid: p.metadata.uid }] : [];
      });
  };
  let pods = await livePods();
  const settled = await waitFor(
    'ipamd to hold exactly the live pods',
    async () => {
      pods = await livePods();
      const byIp = new Map(pods.map((p) => [p.ip, p]));
      const a = await allAllocations(c);
      return a.length === pods.length && a.every((x) => byIp.get(x.ipv4)?.uid === x.pod?.uid) ? a : undefined;
    },
    180_000,
    2000,
  ).catch(async (e: Error) => {
    const a = await allAllocations(c);
    problems.push(
      `${e.message}: allocations ${a.map((x) => `${x.ipv4}:${x.pod?.namespace}/${x.pod?.name}`).join(' ')}; pods ${pods.map((p) => `${p.ip}:${p.id}`).join(' ')}`,
    );
    return a;
  });
  const ips = pods.map((p) => p.ip);
  if (new Set(ips).size !== ips.length) problems.push(`an IPv4 address is held twice: ${ips.sort().join(' ')}`);
  const eniOf = new Map<string, string>();
  for (const e of c.sim.state.enis.values()) for (const ip of eniPodAddresses(e)) eniOf.set(ip, e.networkInterfaceId);
  for (const a of settled)
    if (eniOf.get(a.ipv4) !== a.eniId)
      problems.push(`ipamd has ${a.ipv4} on ${a.eniId}; EC2 has it on ${eniOf.get(a.ipv4) ?? 'no ENI'}`);
  return { pods: pods.length, problems };
}

/** Every node's ipamd allocations, the first node's first. */
async function allAllocations(c: TestCluster): Promise<IpamdAllocation[]> {
  return (await Promise.all(c.nodes.map((n) => allocations(c, n)))).flat();
}
