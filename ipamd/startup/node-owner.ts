/**
 * Which DaemonSet owns this node (docs/design.md#one-owner-per-node). A second release of
 * the chart on a node used to be refused only while the first one's ipamd ran: at the
 * first one's next restart (upgrade, OOM, eviction) the stray one won the node and the
 * real one crash-looped. Now the owner is recorded in a coordination.k8s.io/v1 Lease per
 * node, `eni-ipam-node-<node>` in ENI_IPAM_LEASE_NAMESPACE (kube-system; every release
 * meets it there), its `holderIdentity` the owning DaemonSet (`<namespace>/<name>`,
 * ENI_IPAM_DAEMONSET) and its owner reference the Node (the Lease goes with the Node).
 * The Lease is a record, not a leader election: it is not renewed, and it changes hands
 * only when its holder DaemonSet no longer exists (the release was uninstalled).
 *
 * {@link claimNode} reads it: absent, it is created naming us; naming us, we own the node;
 * naming another DaemonSet that exists, we do not; naming one that is gone, it is taken
 * over (an update carrying the resourceVersion read, so two claimants never both win).
 * An API that cannot be read or written gives 'unknown' (ipamd then proceeds as before
 * the record existed, and says so): the record must never stop the only ipamd of a node.
 */
import { createHash } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '../kube/client.js';
import { describeError, httpStatusOf } from '../kube/errors.js';

/** What {@link claimNode} found. */
export type NodeOwnership =
  | { kind: 'mine'; lease: string; took?: string }
  | { kind: 'other'; owner: string; lease: string; since?: string }
  | { kind: 'unknown'; why: string };

const LEASES = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases' } as const;

/** The Lease's name for node `node`: `eni-ipam-node-<node>`, hashed when longer than 253. */
export function ownerLeaseName(node: string): string {
  const name = `eni-ipam-node-${node}`;
  return name.length <= 253
    ? name
    : `eni-ipam-node-${node.slice(0, 200)}-${createHash('sha256').update(node).digest('hex').slice(0, 16)}`;
}

type Lease = {
  metadata?: { resourceVersion?: string };
  spec?: { holderIdentity?: string; acquireTime?: string };
};

/** Options of {@link claimNode}. */
export interface ClaimOptions {
  kc: KubeConfig;
  /** MY_NODE_NAME. */
  node: string;
  /** ENI_IPAM_DAEMONSET, `<namespace>/<name>`. */
  me: string;
  /** ENI_IPAM_LEASE_NAMESPACE. */
  namespace: string;
  /** Deadline of each API call (ms, default 5000). */
  timeoutMs?: number;
}

function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

/** Whether DaemonSet `nsName` (`<namespace>/<name>`) exists: true, false (404), or the error. */
async function daemonSetExists(o: ClaimOptions, nsName: string): Promise<boolean> {
  const [namespace, name] = nsName.split('/');
  if (!namespace || !name) return false;
  const custom = o.kc.makeApiClient(CustomObjectsApi);
  try {
    await bounded(
      custom.getNamespacedCustomObject({ group: 'apps', version: 'v1', namespace, plural: 'daemonsets', name }),
      o.timeoutMs ?? 5000,
      `get DaemonSet ${nsName}`,
    );
    return true;
  } catch (e) {
    if (httpStatusOf(e) === 404) return false;
    throw e;
  }
}

/** The Lease body naming `o.me`, owned by the Node (uid read), at `resourceVersion` when replacing. */
async function leaseBody(o: ClaimOptions, name: string, resourceVersion?: string): Promise<object> {
  const node = await bounded(
    o.kc.makeApiClient(CoreV1Api).readNode({ name: o.node }),
    o.timeoutMs ?? 5000,
    `read Node ${o.node}`,
  );
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace: o.namespace,
      ...(resourceVersion ? { resourceVersion } : {}),
      labels: { 'app.kubernetes.io/managed-by': 'eni-ipamd', 'eni-ipam.io/node': o.node.slice(0, 63) },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: o.node, uid: node.metadata?.uid ?? '' }],
    },
    spec: { holderIdentity: o.me, acquireTime: new Date().toISOString().replace(/Z$/, '000Z') },
  };
}

/**
 * Reads, and where the rules allow writes, the node's owner Lease (see the module
 * docstring). Retries a lost race (409) up to 3 times. Never throws.
 */
export async function claimNode(o: ClaimOptions): Promise<NodeOwnership> {
  const name = ownerLeaseName(o.node);
  const custom = o.kc.makeApiClient(CustomObjectsApi);
  const ms = o.timeoutMs ?? 5000;
  const ref = { ...LEASES, namespace: o.namespace, name };
  try {
    for (let attempt = 1; attempt <= 3; attempt++) {
      let lease: Lease | undefined;
      try {
        lease = (await bounded(custom.getNamespacedCustomObject(ref), ms, `get Lease ${name}`)) as Lease;
      } catch (e) {
        if (httpStatusOf(e) !== 404) throw e;
      }
      const holder = lease?.spec?.holderIdentity;
      if (holder === o.me) return { kind: 'mine', lease: name };
      if (holder && (await daemonSetExists(o, holder)))
        return {
          kind: 'other',
          owner: holder,
          lease: name,
          ...(lease?.spec?.acquireTime ? { since: lease.spec.acquireTime } : {}),
        };
      try {
        if (!lease) {
          const body = await leaseBody(o, name);
          await bounded(
            custom.createNamespacedCustomObject({ ...LEASES, namespace: o.namespace, body }),
            ms,
            `create Lease ${name}`,
          );
        } else {
          const body = await leaseBody(o, name, lease.metadata?.resourceVersion);
          await bounded(custom.replaceNamespacedCustomObject({ ...ref, body }), ms, `update Lease ${name}`);
        }
        return { kind: 'mine', lease: name, ...(holder ? { took: holder } : {}) };
      } catch (e) {
        if (httpStatusOf(e) !== 409) throw e; // another claimant was first: read again
      }
    }
    return { kind: 'unknown', why: `the Lease ${o.namespace}/${name} kept changing under three claims` };
  } catch (e) {
    return { kind: 'unknown', why: `the owner Lease ${o.namespace}/${name}: ${describeError(e)}` };
  }
}
