/**
 * Pieces of the custom-networking scenarios through real containerd
 * (test/integration/custom-networking-containerd*.test.ts): a node in 10.0.0.0/24 of a VPC
 * 10.0.0.0/16 with the secondary block 100.64.0.0/16 and pod subnets in it, ipamd with
 * AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true selecting its ENIConfig by the zone label (as
 * upstream's ENI_CONFIG_LABEL_DEF=topology.kubernetes.io/zone), and views of the simulated
 * EC2 state (ENIs of the instance, the EC2 calls by action).
 */
import ipaddr from 'ipaddr.js';
import type { SimCloud, Eni } from '../../sim/index.js';
import { createContainerdNode, type ContainerdNode, type RunningPod } from '../../kit/containerd-node.js';
import { waitFor } from '../../kit/wait.js';

/** The label kubelet sets to the node's zone; the ENIConfig selector of these scenarios. */
export const ZONE_LABEL = 'topology.kubernetes.io/zone';
/** The two security groups of the ENIConfigs. */
export const POD_GROUPS = ['sg-0aaaaaaaaaaaaaaa1', 'sg-0bbbbbbbbbbbbbbb2'];
/** EC2 actions that change the cloud. */
export const MUTATIONS = [
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
  'ModifyNetworkInterfaceAttribute',
  'CreateTags',
];

/** Options of {@link customNetNode}. */
export interface CustomNetOptions {
  /** EC2 instance type (default m5.xlarge: 4 ENIs × 15 IPv4, 3 × 14 pod IPs with the primary ENI closed). */
  instanceType?: string;
  /** Pod subnets in 100.64.0.0/16 (default one, 100.64.0.0/19). */
  podSubnets?: string[];
  /** Node annotations (e.g. the ENIConfig annotation, which wins over the zone label). */
  annotations?: Record<string, string>;
  /** More ipamd environment. */
  ipamdEnv?: NodeJS.ProcessEnv;
}

/**
 * Builds the node with ipamd not started (the test creates the ENIConfig first, with the
 * pod subnets' ids). The node carries the zone label; ipamd selects by it.
 * @returns the node and its zone.
 */
export async function customNetNode(o: CustomNetOptions = {}): Promise<{ n: ContainerdNode; zone: string }> {
  const zone = 'us-west-2a';
  const n = await createContainerdNode({
    instanceType: o.instanceType ?? 'm5.xlarge',
    startIpamd: false,
    vpc: {
      vpcCidrs: ['100.64.0.0/16'],
      extraSubnets: (o.podSubnets ?? ['100.64.0.0/19']).map((cidr) => ({ cidr, availabilityZone: zone })),
    },
    kube: { labels: { [ZONE_LABEL]: zone }, ...(o.annotations ? { annotations: o.annotations } : {}) },
    ipamdEnv: {
      AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'true',
      ENI_CONFIG_LABEL_DEF: ZONE_LABEL,
      ENI_IPAM_ADD_WAIT_TIMEOUT: '5s',
      ...o.ipamdEnv,
    },
  });
  return { n, zone };
}

/** Waits until ipamd's ENIConfig selection is in `state` (and, if given, points at `subnetId`); returns it. */
export async function waitForSelection(
  n: ContainerdNode,
  state: 'ok' | 'missing' | 'invalid',
  subnetId?: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<any> {
  return waitFor(
    `ENIConfig selection ${state}${subnetId ? ` on ${subnetId}` : ''}`,
    async () => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const s = (await n.status()) as any;
      const sel = s.eniConfig;
      return sel?.state === state && (!subnetId || sel.subnetIds?.includes(subnetId)) ? sel : undefined;
    },
    20_000,
    100,
  );
}

/**
 * Waits until the first pod ENI's 14 IPs (m5.xlarge) are available in ipamd's pool, so the
 * ENI counts these tests assert do not depend on whether the first pods arrive before it.
 * (It was found here that an ADD waiting while that ENI was being created made the pool
 * create one more ENI for it; `growNeed` in ipamd/pool/grow.ts fixed that.)
 */
export async function waitForFirstEni(n: ContainerdNode, ips = 14): Promise<void> {
  await waitFor(
    `${ips} IPs available in the pool`,
    async () => (await n.status()).counts.available >= ips,
    20_000,
    100,
  );
}

/** The instance's attached ENIs in the simulated EC2 state, by device index. */
export function instanceEnis(sim: SimCloud, instanceId: string): Eni[] {
  return [...sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === instanceId)
    .sort((a, b) => a.attachment!.deviceIndex - b.attachment!.deviceIndex);
}

/** One line per ENI: id, device, subnet (id and CIDR), groups, address and prefix counts. */
export function describeEnis(sim: SimCloud, instanceId: string): string[] {
  return instanceEnis(sim, instanceId).map((e) => {
    const cidr = sim.state.subnets.get(e.subnetId)?.cidr ?? '?';
    return `${e.networkInterfaceId} device ${e.attachment!.deviceIndex} subnet ${e.subnetId} (${cidr}) groups ${e.securityGroupIds.join(',')} secondary IPs ${e.secondaryIps.length} prefixes ${e.ipv4Prefixes.join(',') || '-'}`;
  });
}

/** EC2 calls (ok ones) of `sim.calls` from index `from` up to `to` (exclusive), counted by action. */
export function callCounts(sim: SimCloud, from = 0, to = sim.calls.length): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of sim.calls.slice(from, to)) if (c.ok) out[c.action] = (out[c.action] ?? 0) + 1;
  return out;
}

/** Mutating EC2 calls (ok or not) since index `from`. */
export function mutationsSince(sim: SimCloud, from: number): string[] {
  return sim.calls
    .slice(from)
    .filter((c) => MUTATIONS.includes(c.action))
    .map((c) => `${c.action} ${JSON.stringify(c.params)}`);
}

/** Runs `count` pods named `<prefix>-<i>` through the CRI, `parallel` at a time; returns them in order. */
export async function runPods(n: ContainerdNode, prefix: string, count: number, parallel = 3): Promise<RunningPod[]> {
  const out: RunningPod[] = new Array(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) out[i] = await n.runPod(`${prefix}-${i}`);
  };
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
  return out;
}

/** Whether IPv4 `ip` is inside `cidr` (e.g. `100.64.0.0/19`). */
export const inCidr = (ip: string, cidr: string): boolean => ipaddr.IPv4.parse(ip).match(ipaddr.IPv4.parseCIDR(cidr));

/**
 * Waits until the instance's ENI count has not changed for 1.5 s and ipamd's status counts
 * the same ENIs (the pool reached its warm target). @returns that count (primary included).
 */
export async function waitForStableEnis(n: ContainerdNode): Promise<number> {
  let last = -1;
  let since = Date.now();
  return waitFor(
    'the ENI count to settle (the same in EC2 and ipamd for 1.5 s)',
    async () => {
      const count = instanceEnis(n.sim, n.instanceId).length;
      const st = await n.status();
      if (count !== last || st.counts.enis !== count) {
        last = count;
        since = Date.now();
      } else if (Date.now() - since >= 1500) return count;
      return undefined;
    },
    30_000,
    100,
  );
}
