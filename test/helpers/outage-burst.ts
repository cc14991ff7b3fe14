/**
 * The kill -9 mid-burst step of the outage scenarios (restore-wrong-runtime*.test.ts): a
 * burst of ADDs through the right runtime, ipamd killed with SIGKILL once it has assigned
 * some of them, and after the restart the kubelet's retry of the sandboxes that failed.
 */
import { ipamdLog } from './restore-logs.js';
import { V6_ASSIGNED_MSG } from './outage-v6.js';
import type { OutageBench } from './outage-bench.js';
import { waitFor } from '../../kit/wait.js';

/** What {@link killDuringBurst} saw. */
export interface Burst {
  /** ADDs of the burst ipamd had assigned when it was killed. */
  assignedAtKill: number;
  /** Pods whose RunPodSandbox failed (ipamd died under them). */
  failed: string[];
}

/**
 * Runs `count` pods `<prefix>-<i>` at once and kills ipamd (SIGKILL) once it has assigned a
 * random 1..`maxKillAfter` of them (the others are in flight or not yet sent); waits for
 * every RunPodSandbox to settle. ipamd's log counts the assignments ("assigned IP" with the
 * pod's name; in IPv6 mode "assigned IPv6" lines since the burst began).
 * @throws Error when ipamd assigns fewer within 30 s.
 */
export async function killDuringBurst(
  bench: OutageBench,
  o: { prefix: string; count: number; maxKillAfter: number },
): Promise<Burst> {
  const { n } = bench;
  const v6 = bench.family === 'ipv6';
  const count = async (): Promise<number> =>
    v6
      ? (await ipamdLog(n.ipamdLog, V6_ASSIGNED_MSG)).length
      : (await ipamdLog(n.ipamdLog, 'assigned IP')).filter((l) =>
          (l as { podName?: string | null }).podName?.startsWith(`${o.prefix}-`),
        ).length;
  const before = v6 ? await count() : 0;
  const killAfter = 1 + Math.floor(Math.random() * o.maxKillAfter);
  const names = Array.from({ length: o.count }, (_, i) => `${o.prefix}-${i}`);
  const settled = Promise.allSettled(names.map((name) => n.runPod(name)));
  await waitFor(
    `ipamd to assign ${killAfter} ADDs of the burst`,
    async () => (await count()) - before >= killAfter,
    30_000,
    2,
  );
  await n.killIpamd();
  const assignedAtKill = (await count()) - before;
  const failed = (await settled)
    .map((r, i) => (r.status === 'rejected' ? names[i]! : undefined))
    .filter((x): x is string => !!x);
  return { assignedAtKill, failed };
}

/** Runs the pods `names` again (kubelet's retry, through the right runtime); returns `name: error` for each that failed. */
export async function rerunPods(bench: OutageBench, names: string[]): Promise<string[]> {
  const failed: string[] = [];
  for (const name of names)
    await bench.n.runPod(name).catch((e: Error) => failed.push(`${name}: ${e.message.split('\n')[0]}`));
  return failed;
}
