/**
 * The figures of an outage-bench scenario (outage-bench.ts) and the safety assertions
 * over them (docs/design.md#13-evidence-before-trust item 7).
 */
import assert from 'node:assert/strict';
import type { LiveSandbox } from '../../kit/nothing-lost.js';

/** What a scenario observed after its restart. */
export interface OutageFigures {
  scenario: string;
  /** Every Unassign/Detach/Delete EC2 received since the restart. */
  releaseCalls: string[];
  /** Those of them that took a live pod's IP or the ENI holding one (after the pod was created). */
  liveReleaseCalls: string[];
  /** Live pods whose IP or ENI those calls took. */
  livePodsHit: number;
  /** IPs held by more than one live sandbox: `ip: pod, pod`. */
  duplicateIps: string[];
  /** New pods started after the restart, and those whose RunPodSandbox failed (with the error). */
  newPods: string[];
  failedNewPods: string[];
  /** ipamd's `releasesFrozen` and `freezeReasons` at the end, and every reason seen during the window. */
  frozen: boolean;
  reasons: string[];
  reasonsSeen: string[];
}

/** IPs held by more than one sandbox, as `ip: podA, podB`. */
export function duplicateIps(live: LiveSandbox[]): string[] {
  const byIp = new Map<string, string[]>();
  for (const s of live) byIp.set(s.ip, [...(byIp.get(s.ip) ?? []), s.podName]);
  return [...byIp].filter(([, pods]) => pods.length > 1).map(([ip, pods]) => `${ip}: ${pods.join(', ')}`);
}

/**
 * The safety assertions of docs/design.md#13-evidence-before-trust item 7, all checked before failing so the message
 * lists every one that does not hold: no release call took a live pod's IP or ENI, no IP
 * is on two live sandboxes, every new pod started (an ADD refused at wiring because its IP
 * still routes to a live pod's veth was handed a live IP all the same), and, unless `suspect` is undefined, releases are frozen and
 * each entry of `suspect` (what names a lying source: the wrong runtime's endpoint; or
 * several strings that must be in the same reason, e.g. "Kubernetes" and the node name)
 * is in a freeze reason.
 * @throws AssertionError listing the failures and the figures.
 */
export function checkSafety(f: OutageFigures, suspect: Array<string | string[]> | undefined): void {
  const problems: string[] = [];
  if (f.liveReleaseCalls.length)
    problems.push(
      `${f.liveReleaseCalls.length} EC2 release call(s) took live pods' IPs/ENIs:\n    ${f.liveReleaseCalls.join('\n    ')}`,
    );
  if (f.duplicateIps.length)
    problems.push(`${f.duplicateIps.length} IP(s) on two live sandboxes: ${f.duplicateIps.join('; ')}`);
  // A new pod refused at wiring (its IP still routed to a live pod's veth) was handed a live IP all the same.
  if (f.failedNewPods.length)
    problems.push(`${f.failedNewPods.length} new pod(s) did not start: ${f.failedNewPods.join('; ')}`);
  if (suspect !== undefined) {
    if (!f.frozen)
      problems.push(`releases are not frozen (reasons seen during the window: ${JSON.stringify(f.reasonsSeen)})`);
    for (const names of f.frozen ? suspect : []) {
      const all = typeof names === 'string' ? [names] : names;
      if (!f.reasons.some((r) => all.every((x) => r.includes(x))))
        problems.push(
          `no freeze reason names the suspect source (${all.map((x) => `"${x}"`).join(' and ')}): ${JSON.stringify(f.reasons)}`,
        );
    }
  }
  assert.deepEqual(problems, [], `scenario ${f.scenario}:\n  ${problems.join('\n  ')}\nfigures: ${figureLine(f)}`);
}

/** One JSON line of the figures for the report (counts, reasons; the call lists are in the failure message). */
export function figureLine(f: OutageFigures): string {
  return JSON.stringify({
    scenario: f.scenario,
    releaseCalls: f.releaseCalls.length,
    liveReleaseCalls: f.liveReleaseCalls.length,
    livePodsHit: f.livePodsHit,
    duplicateIps: f.duplicateIps.length,
    newPods: f.newPods.length,
    failedNewPods: f.failedNewPods,
    frozen: f.frozen,
    reasons: f.reasons,
    reasonsSeen: f.reasonsSeen,
  });
}
