/**
 * The waits and checks the containerd node harness (containerd-node.ts) runs against a
 * running node: a GC pass after the grace of the last change, and the "nothing lost"
 * check of docs/design.md#9-restore-sources-and-the-nothing-lost-check.
 */
import assert from 'node:assert/strict';
import type { SimCloud } from '../sim/index.js';
import type { IpamdAllocation, IpamdStatus, RunningPod } from './containerd-node-types.js';
import type { CriTestClient } from './cri-client.js';
import { ipIn } from './netns.js';
import { findLosses, type LiveSandbox } from './nothing-lost.js';
import { handOutTimes, lossTimeline } from './nothing-lost-timeline.js';
import { waitFor } from './wait.js';

/** What the checks read of a running node (a ContainerdNode: its ipamd through introspection, its pods, containerd). */
export interface CheckedNode {
  /** ipamd's base environment (ENI_IPAM_GC_GRACE is read from it). */
  env: NodeJS.ProcessEnv;
  /** Pods the harness ran, by sandbox id, with the IP each got at start. */
  pods: Map<string, RunningPod>;
  status(): Promise<IpamdStatus>;
  allocations(): Promise<IpamdAllocation[]>;
  liveSandboxes(): Promise<LiveSandbox[]>;
  waitForGcPass(timeoutMs?: number): Promise<IpamdStatus>;
  /** Path of ipamd's JSON log, read for the timeline a failed check prints. */
  ipamdLog?: string;
}

/** ipamd's duration syntax (number = s, or ms/s/m/h suffix) → ms. */
function parseDurationMs(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) return 60_000;
  const mult = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  return Number(m[1]) * mult;
}

/**
 * Waits (at most `timeoutMs`, polling every 100 ms) for a GC pass that could release and
 * started after the grace (ENI_IPAM_GC_GRACE) of the last change at `lastChangeAt`
 * (epoch ms); returns ipamd's status then.
 */
export async function waitForGcPassAfter(
  n: CheckedNode,
  lastChangeAt: number,
  timeoutMs: number,
): Promise<IpamdStatus> {
  const graceMs = parseDurationMs(n.env['ENI_IPAM_GC_GRACE'] ?? '60s');
  const notBefore = Math.max(Date.now(), lastChangeAt + graceMs + 50);
  const passesBefore = (await n.status()).evidence.passes;
  return waitFor(
    'a GC pass after the grace of the last change',
    async () => {
      const s = await n.status();
      return s.evidence.passes > passesBefore &&
        (s.evidence.lastPassAt ?? 0) >= notBefore &&
        s.evidence.lastPass?.canRelease
        ? s
        : undefined;
    },
    timeoutMs,
    100,
  );
}

/**
 * The "nothing lost" check (see nothing-lost.ts) after a GC pass and releases unfrozen:
 * every live sandbox's IP against ipamd's allocations, the sandbox's netns and the sim's
 * state (`sim`, instance `instanceId`), read through `cri`; then ipamd's assigned count
 * equals the live sandboxes. @throws AssertionError listing every violation.
 */
export async function assertNothingLostOn(
  n: CheckedNode,
  parts: { sim: SimCloud; instanceId: string; cri: CriTestClient },
): Promise<void> {
  const { sim, cri } = parts;
  await n.waitForGcPass();
  // With ENI_IPAM_FAST_RESTART the `ec2-confirm` freeze lasts until EC2's jittered confirm (≤ 10 s by
  // default): wait for the freeze to lift, with a deadline that still catches one that never does.
  const s = await waitFor(
    'releases unfrozen after the GC pass',
    async () => {
      const st = await n.status();
      return st.releasesFrozen ? undefined : st;
    },
    30_000,
    100,
  ).catch(async () => n.status());
  assert.equal(s.releasesFrozen, false, `releases still frozen: ${s.freezeReasons.join('; ')}`);
  const live = await n.liveSandboxes();
  const ipInNetns = new Map<string, string | undefined>();
  for (const sb of live) {
    const ns = await cri.netnsPath(sb.id);
    const out = ns ? await ipIn(ns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']).catch(() => '') : '';
    ipInNetns.set(sb.id, /inet (\d+\.\d+\.\d+\.\d+)\/32/.exec(out)?.[1]);
  }
  const allocations = await n.allocations();
  const ipAtStart = new Map([...n.pods.values()].map((p) => [p.id, p.ip]));
  const losses = findLosses({
    live,
    ipAtStart,
    ipInNetns,
    sim: sim.state,
    calls: sim.calls,
    instanceId: parts.instanceId,
    allocations,
    ...(n.ipamdLog ? { handedOutAt: await handOutTimes(n.ipamdLog) } : {}),
  });
  const timeline = losses.length ? `\n${await lossTimeline(losses, sim.calls, live, n.ipamdLog)}` : '';
  assert.deepEqual(
    losses,
    [],
    `nothing-lost check failed (${live.length} live sandboxes):\n${losses.join('\n')}${timeline}`,
  );
  const after = await n.status();
  assert.equal(after.counts.assigned, live.length, 'ipamd assigned == live sandboxes after one GC pass');
}
