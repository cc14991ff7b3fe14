/**
 * What the multi-node cluster tests share: echo Deployments spread over the nodes (or pinned to
 * one), the pods grouped by node, TCP from one pod's own network namespace to another's
 * address, the EC2 release calls of one instance, and ipamd's status on a node.
 */
import assert from 'node:assert/strict';
import type { ClusterNode, TestCluster } from '../../kit/cluster/cluster.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import { echoDeployment, introspect, podNetns, tcpAsk, type KubePod } from '../../kit/cluster/workload.js';
import type { IpamdStatus } from '../../kit/containerd-node-types.js';
import { listParam, RELEASE_ACTIONS } from '../../kit/nothing-lost.js';

/**
 * A Deployment `name` of `replicas` echo pods spread over the nodes (a topology spread
 * preference on the node name, maxSkew 1), or all on node `pin` (a nodeSelector).
 */
export function spreadDeployment(c: TestCluster, name: string, replicas: number, pin?: string): object {
  return echoDeployment(
    c,
    name,
    replicas,
    pin
      ? { nodeSelector: { 'kubernetes.io/hostname': pin } }
      : {
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              // A preference: pods still schedule when a drained, joining or full node skews the spread.
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: { app: name } },
            },
          ],
        },
  );
}

/** The live pods of `app` by node name. */
export function byNode(pods: KubePod[]): Map<string, KubePod[]> {
  const out = new Map<string, KubePod[]>();
  for (const p of pods.filter((x) => !x.deleting && x.node)) out.set(p.node!, [...(out.get(p.node!) ?? []), p]);
  return out;
}

/** The node named `name`. @throws AssertionError when the cluster has none. */
export function nodeNamed(c: TestCluster, name: string): ClusterNode {
  const n = c.nodes.find((x) => x.name === name);
  assert.ok(n, `no node ${name}`);
  return n;
}

/**
 * From pod `from`'s own network namespace (on its node), asks `host` on the echo port:
 * the first line answered (`<pod name> ping`), or '' when nothing answered within 5 s.
 */
export async function askFromPod(c: TestCluster, from: KubePod, host: string, port = ECHO_PORT): Promise<string> {
  const ns = (await podNetns(c, 'default', nodeNamed(c, from.node!))).get(from.name);
  assert.ok(ns, `${from.name} has a sandbox network namespace on ${from.node}`);
  return tcpAsk(ns, host, port).catch(() => '');
}

/** The EC2 release calls (unassign, detach, delete) since call `from` that concern `instanceId`'s ENIs or addresses. */
export function releaseCallsOf(c: TestCluster, instanceId: string, from = 0): string[] {
  return c.sim.calls
    .slice(from)
    .filter((x) => (RELEASE_ACTIONS as readonly string[]).includes(x.action) && x.instanceId === instanceId)
    .map(
      (x) =>
        `${x.action} ${x.params['NetworkInterfaceId'] ?? x.params['AttachmentId'] ?? ''} ${listParam(x.params, 'PrivateIpAddress').join(',')}`,
    );
}

/** ipamd's `/v1/status` on `node` (counts: total, assigned, cooling, available, …). */
export const statusOn = (c: TestCluster, node: ClusterNode): Promise<IpamdStatus> =>
  introspect<IpamdStatus>(c, '/v1/status', node);
