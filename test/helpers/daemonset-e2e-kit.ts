/**
 * Shared steps of the DaemonSet end-to-end tests (daemonset-e2e.test.ts and
 * daemonset-takeover.test.ts): chart rendering for a node, bounded fan-out, the
 * "nothing lost" pass and the shim's DEL spool.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { ipIn } from '../../kit/netns.js';
import { type DsNode } from './containerd-ds-node.js';
import { findDaemonSet, type K8sDaemonSet } from './daemonset-pod.js';
import { findLosses } from '../../kit/nothing-lost.js';
import { HELM, renderChart } from '../../kit/helm.js';
import { waitFor } from '../../kit/wait.js';

/** Pods started by the end-to-end test. */
export const PODS = 20;
/** Port of the pods' echo server. */
export const ECHO_PORT = 8080;

/** Skip reason for the DaemonSet tests (no helm binary), or false. */
export const skip = !existsSync(HELM) ? 'no helm binary: bash scripts/ensure-helm.sh' : false;

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Renders the chart for node `n`: the image under test, the simulated cloud and short loops via extraEnv. */
export async function render(n: DsNode): Promise<K8sDaemonSet> {
  const ref = n.imageRef;
  const colon = ref.lastIndexOf(':');
  const values = {
    image: { repository: ref.slice(0, colon), tag: ref.slice(colon + 1), pullPolicy: 'Never' },
    extraEnv: Object.entries({
      ...n.cloudEnv,
      ENI_IPAM_POOL_INTERVAL: '200ms',
      ENI_IPAM_GC_INTERVAL: '1s',
      ENI_IPAM_GC_GRACE: '2s',
    }).map(([name, value]) => ({ name, value })),
  };
  return findDaemonSet(await renderChart(values));
}

/** One "nothing lost" pass: every live pod kept its IP (CRI and eth0), no IP twice, EC2 agrees, ipamd holds exactly the live pods. */
export async function nothingLost(
  n: DsNode,
  ipAtStart: Map<string, string>,
): Promise<{ live: number; assigned: number }> {
  const before = (await n.status()).evidence.passes;
  const since = Date.now() + 2050; // ENI_IPAM_GC_GRACE after the last change
  let last: Awaited<ReturnType<DsNode['status']>> | undefined;
  await waitFor(
    'a GC pass after the grace',
    async () => {
      const s = (last = await n.status());
      return s.evidence.passes > before && (s.evidence.lastPassAt ?? 0) >= since && s.evidence.lastPass?.canRelease;
    },
    30_000,
    200,
  ).catch((e: Error) => {
    throw new Error(
      `${e.message}; releases frozen: ${JSON.stringify(last?.freezeReasons ?? null)}; last pass: ${JSON.stringify(last?.evidence.lastPass ?? null)}`,
    );
  });
  const live = await n.cri.liveSandboxes();
  const ipInNetns = new Map<string, string | undefined>();
  for (const sb of live) {
    const ns = await n.cri.netnsPath(sb.id);
    const out = ns ? await ipIn(ns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']).catch(() => '') : '';
    ipInNetns.set(sb.id, /inet (\d+\.\d+\.\d+\.\d+)\/32/.exec(out)?.[1]);
  }
  const allocations = await n.allocations();
  const losses = findLosses({
    live,
    ipAtStart,
    ipInNetns,
    sim: n.sim.state,
    calls: n.sim.calls,
    instanceId: n.instanceId,
    allocations,
  });
  assert.deepEqual(losses, [], `nothing-lost check (${live.length} live):\n${losses.join('\n')}`);
  const s = await n.status();
  assert.equal(s.counts.assigned, live.length, 'assigned == live after one GC pass');
  return { live: live.length, assigned: s.counts.assigned };
}

/** Spool entries (files, not temp files) the shim left in the run dir. */
export function spooled(n: DsNode): string[] {
  const dir = n.host('/run/eni-ipam/del-spool');
  return existsSync(dir) ? readdirSync(dir).filter((f) => !f.startsWith('.')) : [];
}
