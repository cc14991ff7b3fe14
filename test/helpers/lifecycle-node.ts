/**
 * A simulated node for the ENI-lifecycle tests (docs/design.md#10-the-warm-pool-at-depth items 3, 4, 6): the node
 * harness (simulated cloud + the real ipamd binary) plus a stand-in CRI runtime kept in
 * step with the test's pods, so ipamd's releases are unfrozen, and short timers. Also
 * the "nothing lost" check for these tests and small EC2 helpers over the real SDK.
 */
import { CreateNetworkInterfaceCommand, CreateTagsCommand, EC2Client } from '@aws-sdk/client-ec2';
import type { AddNetworkReply } from '../../proto/ipam.js';
import type { Eni } from '../../sim/index.js';
import type { CriStandIn } from '../../sim/cri/index.js';
import { ipamdClient, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { eniPodAddresses, findLosses } from '../../kit/nothing-lost.js';
import { waitFor } from '../../kit/wait.js';

export { listParam, prefixAddresses } from '../../kit/nothing-lost.js';

/** Environment giving short timers (overridable per test). */
export const FAST_ENV: NodeJS.ProcessEnv = {
  ENI_IPAM_SHRINK_DELAY: '1s',
  ENI_IPAM_RECONCILE_INTERVAL: '1s',
  ENI_IPAM_GC_INTERVAL: '1s',
  ENI_IPAM_GC_GRACE: '1h',
  ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL: '300ms',
  ENI_IPAM_LEAKED_ENI_SWEEP_JITTER: '0',
  IP_COOLDOWN_PERIOD: '0',
  ENI_IPAM_INSTALL_CNI: 'false',
};

/** A node with its pods. */
export interface LifecycleNode {
  h: NodeHarness;
  cri: CriStandIn;
  client: TestIpamdClient;
  ec2: EC2Client;
  /** Live pods: container id → IP. */
  pods: Map<string, string>;
  /** (Re)starts ipamd (fresh gRPC client); `extra` env on top of FAST_ENV and the node's env. */
  start(extra?: NodeJS.ProcessEnv): Promise<void>;
  /** ADD; the pod becomes live in the stand-in CRI. */
  add(id: string): Promise<AddNetworkReply>;
  /** The pod leaves the CRI, then DEL. */
  del(id: string): Promise<void>;
  status(): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>;
}

/** Creates a node; call `start()` to run ipamd. */
export async function createLifecycleNode(
  p: { instanceType?: string; subnetCidr?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<LifecycleNode> {
  // The CRI stand-in answers no Version (identity unknown), as this node always had it.
  const h = await createNode({
    ...(p.instanceType ? { instanceType: p.instanceType } : {}),
    ...(p.subnetCidr ? { subnetCidr: p.subnetCidr } : {}),
    cri: { identity: null },
    ipamdEnv: { ...FAST_ENV, ...p.env },
  });
  const cri = h.cri!;
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: h.sim.ec2Endpoint,
    credentials: { accessKeyId: 't', secretAccessKey: 't' },
    maxAttempts: 1,
  });
  const n: LifecycleNode = {
    h,
    cri,
    ec2,
    pods: new Map(),
    client: undefined as unknown as TestIpamdClient,
    async start(extra = {}) {
      n.client?.close();
      await h.startIpamd(extra);
      n.client = ipamdClient(h.socket);
    },
    async add(id) {
      const r = await n.client.add(id);
      n.pods.set(id, r.ipv4_addr);
      cri.addPod(id, r.ipv4_addr);
      return r;
    },
    async del(id) {
      cri.removePod(id);
      n.pods.delete(id);
      await n.client.del(id);
    },
    status: () => h.ipamd!.status(),
    async close() {
      n.client?.close();
      ec2.destroy();
      await h.close();
    },
  };
  return n;
}

/** Waits until the first evidence pass has unfrozen releases. */
export async function waitUnfrozen(n: LifecycleNode): Promise<void> {
  await waitFor('releases unfrozen', async () => (await n.status()).releasesFrozen === false, 15_000);
}

/** ENIs of this instance in the simulated EC2 (tagged with its id), any status. */
export function ourEnis(n: LifecycleNode): Eni[] {
  return [...n.h.sim.state.enis.values()].filter(
    (e) => e.tags['node.k8s.amazonaws.com/instance_id'] === n.h.instanceId,
  );
}

/** Our ENIs that are `available` (not attached): leaks unless the sweep takes them. */
export function leakedEnis(n: LifecycleNode): Eni[] {
  return ourEnis(n).filter((e) => e.status === 'available');
}

/** Re-tags ENIs' createdAt as `agoMs` in the past (CreateTags through the SDK): time passing, as EC2 sees it. */
export async function ageEnis(n: LifecycleNode, eniIds: string[], agoMs = 10 * 60_000): Promise<void> {
  if (eniIds.length === 0) return;
  const createdAt = new Date(Date.now() - agoMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  for (const id of eniIds)
    await n.ec2.send(
      new CreateTagsCommand({ Resources: [id], Tags: [{ Key: 'node.k8s.amazonaws.com/createdAt', Value: createdAt }] }),
    );
}

/** Creates an ENI in the node's subnet through the SDK (not attached), with tags and description. */
export async function createEniVia(
  n: LifecycleNode,
  tags: Record<string, string>,
  description = '',
  secondaryCount = 0,
): Promise<string> {
  const out = await n.ec2.send(
    new CreateNetworkInterfaceCommand({
      SubnetId: n.h.subnetId,
      Description: description,
      ...(secondaryCount ? { SecondaryPrivateIpAddressCount: secondaryCount } : {}),
      TagSpecifications: [
        { ResourceType: 'network-interface', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) },
      ],
    }),
  );
  return out.NetworkInterface!.NetworkInterfaceId!;
}

/**
 * The "nothing lost" check of these tests. Rules (one line per violation): those of
 * {@link findLosses} (each live pod's IP is a secondary IP of an ENI attached to the
 * instance; no IP twice; no Unassign/Detach/Delete touching a live pod's IP or ENI;
 * ipamd's allocations are exactly the live pods), plus: no `available` ENI of ours is
 * left (after the sweep), and no IP is on two ENIs.
 */
export async function nothingLost(n: LifecycleNode): Promise<string[]> {
  const d = n.h.ipamd!;
  const allocations = (await (await fetch(`http://127.0.0.1:${d.introspectionPort}/v1/allocations`)).json()) as Array<{
    containerID: string;
    ipv4: string;
  }>;
  const live = [...n.cri.sandboxes.values()].map((s) => ({
    id: s.id,
    ip: s.ip ?? '',
    podName: s.name,
    podNamespace: s.namespace,
    createdAtMs: s.createdAtMs,
  }));
  const bad = findLosses({
    live,
    ipAtStart: new Map(live.map((s) => [s.id, s.ip])),
    sim: n.h.sim.state,
    calls: n.h.sim.calls,
    instanceId: n.h.instanceId,
    allocations,
  });
  // Every grow has an ENI of ours 'available' for a moment (created, not yet attached), and
  // a loaded machine stretches that moment: judge leaks once it has passed, or after 15 s.
  await waitFor('no ENI of ours between create and attach', () => leakedEnis(n).length === 0, 15_000, 100).catch(
    () => undefined,
  );
  for (const e of leakedEnis(n)) bad.push(`leaked ENI ${e.networkInterfaceId} (available, ours)`);
  const seen = new Map<string, string>();
  for (const e of n.h.sim.state.enis.values()) {
    for (const ip of eniPodAddresses(e)) {
      if (seen.has(ip)) bad.push(`IP ${ip} is on ${seen.get(ip)} and ${e.networkInterfaceId}`);
      seen.set(ip, e.networkInterfaceId);
    }
  }
  return bad;
}

/** Resolves when a call of `action` is in flight in the sim (arrived, not answered yet). */
export async function waitInFlight(n: LifecycleNode, action: string, timeoutMs = 20_000): Promise<void> {
  await waitFor(
    `${action} in flight`,
    () => n.h.sim.calls.some((c) => c.action === action && c.durationMs === undefined),
    timeoutMs,
    10,
  );
}
