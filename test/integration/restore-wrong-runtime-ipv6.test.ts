/**
 * The restore scenarios of restore-wrong-runtime.test.ts in IPv6 mode (issue #31 item 5),
 * through real containerd: ENABLE_IPv6=true, ENABLE_IPv4=false, prefix delegation, a VPC
 * with an IPv6 /56; each pod has a /128 from the node's /80 on eth0 and an egress IPv4
 * from 169.254.172.0/22 on v4if0 (outage-bench.ts `family: 'ipv6'`, outage-v6.ts).
 * ipamd is restarted with CRI_RUNTIME_ENDPOINT pointing at a second, healthy, empty
 * containerd and no Kubernetes source (MY_NODE_NAME unset):
 *
 * 1. the checkpoints intact;
 * 2. the IPv6 checkpoint and the IPv4 one deleted (the wired /128s are quarantined "owner
 *    unknown" until a trusted runtime names their pods: ipamd/restore/v6-evidence.ts);
 * 3. ipamd killed with SIGKILL during a burst of 4 ADDs, restarted.
 *
 * Each asserts that no live pod's /128 or egress IPv4 was released (ipamd's log) and the
 * /80 never unassigned, that no address is on two pods (new pods got fresh ones), that
 * releases are frozen naming the wrong runtime; then the configuration is fixed and the
 * IPv6 nothing-lost check runs (every live pod keeps its /128, read in its netns and from
 * containerd, and ipamd holds exactly the live pods' addresses, none quarantined); last,
 * the DEL of every pod succeeds and frees every address. One node serves all three.
 * Needs root and `scripts/ensure-deps.sh --containerd`; run under
 * `flock /tmp/eni-ipam-containerd.lock`.
 */
import { after, before, test, type TestContext } from 'node:test';
import { checkSafety, figureLine, OutageBench } from '../helpers/outage-bench.js';
import { killDuringBurst, rerunPods } from '../helpers/outage-burst.js';
import { deleteAllV6 } from '../helpers/outage-v6.js';

let bench: OutageBench;
before(async () => {
  bench = await OutageBench.create({ family: 'ipv6', livePods: 6 });
});
after(async () => {
  await bench?.close();
});

/**
 * From the restart against the wrong runtime (no Kubernetes source) on: the damage window
 * and 2 new pods, the safety checks, the fix and the nothing-lost check, the DEL of every
 * pod. `retried` runs first after the restart (kubelet's retry of failed sandboxes).
 */
async function wrongRuntimeThenFix(
  t: TestContext,
  scenario: string,
  o: { deleteCheckpoint?: boolean; retried?: string[] } = {},
): Promise<void> {
  await bench.restart(
    { CRI_RUNTIME_ENDPOINT: bench.wrong.endpoint, MY_NODE_NAME: undefined },
    { deleteCheckpoint: !!o.deleteCheckpoint },
  );
  const retryFailed = await rerunPods(bench, o.retried ?? []);
  const f = await bench.observe(scenario, 2);
  f.failedNewPods.push(...retryFailed);
  t.diagnostic(`FIGURES ${figureLine(f)}`);
  checkSafety(f, [`runtime at ${bench.wrong.endpoint}`]);
  await bench.recover();
  await deleteAllV6(bench.n);
}

test('IPv6 1. wrong but reachable runtime (empty), checkpoints intact → no live /128 released or reused, frozen naming the runtime; DEL frees all', async (t) => {
  await bench.prepare();
  await wrongRuntimeThenFix(t, 'v6-1');
});

test('IPv6 2. wrong runtime, IPv6 and IPv4 checkpoints deleted → no live /128 released or reused, frozen; after the fix each pod owns its /128 again and its DEL frees it', async (t) => {
  await bench.prepare();
  await wrongRuntimeThenFix(t, 'v6-2', { deleteCheckpoint: true });
});

test('IPv6 3. kill -9 during a burst of 4 ADDs, restarted against the wrong runtime → no live /128 released or reused, frozen; DEL frees all', async (t) => {
  await bench.prepare();
  const burst = await killDuringBurst(bench, { prefix: 'v6-burst', count: 4, maxKillAfter: 2 });
  t.diagnostic(
    `killed after ipamd assigned ${burst.assignedAtKill} of the 4 burst ADDs; ${burst.failed.length} RunPodSandbox failed`,
  );
  await wrongRuntimeThenFix(t, 'v6-3', { retried: burst.failed });
});
