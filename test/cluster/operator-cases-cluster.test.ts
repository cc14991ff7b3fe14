/**
 * Issue 37 item 5 on a real cluster, through the chart, as an operator meets each case (one
 * single-node cluster serves the three in order; each ends with the nothing-lost check):
 *
 * 1. `helm upgrade --set criSocket=<a second, empty containerd's socket>` while young pods
 *    churn (every pod younger than ENI_IPAM_GC_GRACE, set to 600 s for the wrong-runtime
 *    release so that no pod can age into the old rule's sight): ipamd freezes releases naming
 *    the runtime (`/v1/status`, the node condition and its Event), releases nothing (the
 *    simulated EC2's call log), and after `helm upgrade` back to the node's socket it
 *    unfreezes. Before the fix the runtime was judged only on allocations older than the
 *    grace: it trusted the empty runtime for as long as the pods stayed young.
 * 2. ipamd SIGKILLed (as an OOM kill is) after CreateNetworkInterface and before its
 *    AttachNetworkInterface is answered (the simulated EC2 holds every attach unanswered and
 *    unperformed, `NoResponse`): at its next start ipamd settles the ENI, attached or
 *    deleted, within 120 s of the kill (the kubelet's restart back-off included), while the
 *    leaked-ENI sweep could not have touched it (its first run is drawn up to 5 min after a
 *    start, and it takes only ENIs older than 5 min).
 * 3. The pods rule removed from the ClusterRole (`kubectl patch`): once its pod watch ends
 *    (the server closes it after 300 s ±20 %) and is refused, ipamd freezes, and the reason
 *    in `/v1/status`, its log, the node condition and the Event is one line naming the verb,
 *    the resource and the ServiceAccount (no HTTP dump); `helm upgrade --reuse-values` does
 *    not take the rule back (helm 4 applies server-side and `kubectl-patch` owns the rules),
 *    `--force-conflicts` does (docs/troubleshooting.md, docs/upgrade.md), and ipamd unfreezes.
 *
 * Found here: the Node Event was written only when the condition's reason changed, so in 1 it
 * said "startup" (the freeze at start, before `cri`) and in 3 (reason EniLimitReached, which
 * binds before the freeze once case 2 filled the ENIs) there was none; it now follows the
 * frozen sources (test/unit/kube-reporter-freeze-event.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NO_RESPONSE } from '../../sim/index.js';
import { CHART } from '../../kit/helm.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { startEmptyRuntime } from '../../kit/cluster/empty-runtime.js';
import { clusterValues, installEniIpam, NAMESPACE, RELEASE } from '../../kit/cluster/install.js';
import { killIpamd } from '../../kit/cluster/nothing-lost.js';
import { checkNothingLostEverywhere } from '../../kit/cluster/nothing-lost-nodes.js';
import { echoDeployment, introspect, podsOf, waitPodsReady } from '../../kit/cluster/workload.js';
import {
  churnPods,
  ipAllocatable,
  ipamdLogStrings,
  nodeEventMessages,
  upgradeToNewIpamd,
} from '../helpers/cluster-operator.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
const APP = 'field';
const PODS = 10;
/** An evidence pass every 5 s, so a freeze and its end show within seconds of their cause. */
const ENV = { ENI_IPAM_GC_INTERVAL: '5s' };
/** The calls that take an address or an ENI from the node. */
const RELEASES = new Set([
  'UnassignPrivateIpAddresses',
  'UnassignIpv6Addresses',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
]);
/** What the Kubernetes client's raw error dump looks like (or a message escaped twice). */
const DUMP = /HTTP-Code|Unknown API Status Code|Headers:|\\"/;

interface Status {
  releasesFrozen: boolean;
  freezeReasons: string[];
  eniLifecycle: {
    startSettle: { attached: string[]; deleted: string[]; kept: unknown[]; failed: unknown[] } | null;
  } | null;
}

describe('operator cases of issue 37 on a real cluster', { skip, timeout: 45 * 60_000 }, () => {
  let c: TestCluster;
  let base: Record<string, unknown>;
  before(async () => {
    c = await startCluster();
    base = await clusterValues(c, { env: ENV });
    await installEniIpam(c, { wait: true, values: { env: ENV } });
    await c.kubectl.apply([echoDeployment(c, APP, PODS)]);
    await waitPodsReady(c, APP, PODS);
  });
  after(async () => {
    await c?.close();
  });

  const status = (): Promise<Status> => introspect<Status>(c, '/v1/status');

  it(
    'criSocket set to a second, empty containerd while young pods churn: frozen naming it, nothing released; set back: unfrozen, nothing lost',
    { timeout: 20 * 60_000 },
    async (t) => {
      const empty = await startEmptyRuntime(c.bins, c.nodes[0]!);
      try {
        // Young pods: every one replaced now.
        await c.kubectl.run(['-n', 'default', 'rollout', 'restart', 'deployment', APP]);
        await waitFor(
          'every pod replaced',
          async () => {
            const pods = await podsOf(c, APP);
            return pods.length === PODS && pods.every((p) => p.ready && !p.deleting);
          },
          300_000,
          1000,
        );
        const ch = churnPods(c, APP);
        let deleted = 0;
        try {
          const wrong = { ...base, criSocket: empty.nodeSocket, env: { ...ENV, ENI_IPAM_GC_GRACE: '600s' } };
          const seen = await upgradeToNewIpamd(c, wrong);
          const from = c.sim.calls.length;
          const reason = await waitFor(
            'releases frozen naming the empty runtime',
            async () => {
              const s = await status();
              return s.releasesFrozen ? s.freezeReasons.find((r) => r.includes(empty.nodeSocket)) : undefined;
            },
            90_000,
            1000,
          );
          const frozenAfterMs = Date.now() - seen;
          assert.match(
            reason,
            /^cri: suspect: runtime at unix:\/\/\S+ \(.+\) answered with 0 sandboxes and knows 0 of the \d+ pods/,
          );
          const cond = await waitFor(
            'the node condition ReleasesFrozen naming the runtime',
            async () => {
              const x = await ipAllocatable(c);
              return x?.reason === 'ReleasesFrozen' && x.message.includes(empty.nodeSocket) ? x : undefined;
            },
            60_000,
            1000,
          );
          assert.ok(!cond.message.includes('\n'));
          await waitFor(
            'a ReleasesFrozen Event naming the runtime',
            async () => (await nodeEventMessages(c, 'ReleasesFrozen')).some((m) => m.includes(empty.nodeSocket)),
            60_000,
            1000,
          );
          // Pods keep coming and going against the wrong runtime for a while: still frozen, nothing released.
          const churnedFrom = Date.now();
          await waitFor(
            '15 s of churn while frozen',
            async () => Date.now() - churnedFrom >= 15_000 && (await status()).releasesFrozen,
            60_000,
            1000,
          );
          const released = c.sim.calls
            .slice(from)
            .filter((r) => RELEASES.has(r.action))
            .map((r) => `${r.action} ${JSON.stringify(r.params)}`);
          assert.deepEqual(released, [], 'nothing released while the runtime is the wrong one');
          t.diagnostic(`frozen ${frozenAfterMs} ms after the new ipamd pod appeared: ${reason}`);
        } finally {
          deleted = await ch.stop();
        }
        t.diagnostic(`${deleted} pods deleted (and replaced) during the case`);
        await upgradeToNewIpamd(c, base);
        await waitFor(
          'releases unfrozen',
          async () => {
            const s = await status();
            return !s.releasesFrozen && s.freezeReasons.length === 0;
          },
          120_000,
          1000,
        );
        await waitFor(
          'the node condition no longer ReleasesFrozen',
          async () => (await ipAllocatable(c))?.reason === 'IPsAvailable',
          60_000,
          1000,
        );
        await waitPodsReady(c, APP, PODS);
        await checkNothingLostEverywhere(c);
      } finally {
        await empty.stop();
      }
    },
  );

  it(
    'ipamd SIGKILLed between CreateNetworkInterface and AttachNetworkInterface: its next start settles the ENI; nothing lost',
    { timeout: 20 * 60_000 },
    async (t) => {
      const attached = [...c.sim.state.enis.values()].filter((e) => e.attachment?.instanceId === c.node.instanceId);
      assert.ok(attached.length < 4, `room for one more ENI on the m5.xlarge (${attached.length} attached)`);
      // More pods than the attached ENIs address (14 each): the pool must create an ENI.
      const replicas = attached.length * 14 + 2;
      const from = c.sim.calls.length;
      let eniId: string;
      let killedAt: number;
      // Every attach is held open, unanswered and not performed, until ipamd is gone.
      c.sim.faults.injectError({ action: 'AttachNetworkInterface', code: NO_RESPONSE, count: 1000 });
      try {
        await c.kubectl.run(['-n', 'default', 'scale', 'deployment', APP, `--replicas=${replicas}`]);
        const held = await waitFor(
          'ipamd created an ENI and its attach is held',
          () => c.sim.calls.slice(from).find((r) => r.action === 'AttachNetworkInterface'),
          180_000,
          50,
        );
        await killIpamd(c);
        killedAt = Date.now();
        eniId = held.params['NetworkInterfaceId']!;
      } finally {
        c.sim.faults.configure({ reset: true });
      }
      const created = c.sim.calls.slice(from).filter((r) => r.action === 'CreateNetworkInterface' && r.ok);
      assert.ok(created.length >= 1, 'ipamd created the ENI');
      const eni = c.sim.state.enis.get(eniId);
      assert.equal(eni?.status, 'available', `${eniId} created, never attached`);
      assert.equal(eni.tags['node.k8s.amazonaws.com/instance_id'], c.node.instanceId);
      const outcome = await waitFor(
        `${eniId} attached to this instance or deleted`,
        () => {
          const e = c.sim.state.enis.get(eniId);
          if (!e) return 'deleted';
          return e.attachment?.instanceId === c.node.instanceId && e.status === 'in-use' ? 'attached' : undefined;
        },
        120_000,
        200,
      );
      const settledMs = Date.now() - killedAt;
      const settle = await waitFor(
        "the restarted ipamd's start-up settle report",
        async () => (await status()).eniLifecycle?.startSettle ?? undefined,
        60_000,
        1000,
      );
      assert.ok(
        settle[outcome].includes(eniId),
        `the start-up settle (not the sweep) ${outcome} ${eniId}: ${JSON.stringify(settle)}`,
      );
      t.diagnostic(`${eniId} ${outcome} by the start-up settle ${settledMs} ms after the kill`);
      await waitPodsReady(c, APP, replicas, 420_000);
      await checkNothingLostEverywhere(c);
    },
  );

  it(
    'the pods rule removed from the ClusterRole: frozen with one readable line; --force-conflicts restores it and unfreezes',
    { timeout: 20 * 60_000 },
    async (t) => {
      const user = `system:serviceaccount:${NAMESPACE}:${RELEASE}`;
      const canListPods = async () =>
        (await c.kubectl.try(['auth', 'can-i', 'list', 'pods', '--as', user])).stdout.trim() === 'yes';
      const role = await c.kubectl.json<{ rules: Array<{ resources?: string[] }> }>(['get', 'clusterrole', RELEASE]);
      const i = role.rules.findIndex((r) => r.resources?.includes('pods'));
      assert.ok(i >= 0, 'the chart grants pods');
      await c.kubectl.run([
        'patch',
        'clusterrole',
        RELEASE,
        '--type=json',
        '-p',
        JSON.stringify([{ op: 'remove', path: `/rules/${i}` }]),
      ]);
      assert.equal(await canListPods(), false);
      const patchedAt = Date.now();
      const refusal = `pods is forbidden: User "${user}" cannot (list|watch) resource "pods" in API group "" at the cluster scope`;
      const one = new RegExp(
        `^kube: Kubernetes pods unreadable: (list|watch) pods \\(spec\\.nodeName=${c.nodeName}\\): HTTP 403 Forbidden: ${refusal}$`,
      );
      const reason = await waitFor(
        'releases frozen: the pods refused',
        async () => (await status()).freezeReasons.find((r) => r.startsWith('kube: ')),
        420_000,
        2000,
      );
      t.diagnostic(`frozen ${Date.now() - patchedAt} ms after the patch: ${reason}`);
      assert.match(reason, one);
      const cond = await waitFor(
        // Its reason is ReleasesFrozen, or what binds first (EniLimitReached after case 2's
        // scale-up), the freeze then named after it in the message.
        'the node condition naming the refusal',
        async () => {
          const x = await ipAllocatable(c);
          return x?.message.includes('is forbidden') ? x : undefined;
        },
        60_000,
        1000,
      );
      assert.match(cond.message, new RegExp(refusal));
      assert.doesNotMatch(cond.message, DUMP);
      const ev = await waitFor(
        'a Node Event naming the refusal',
        async () => (await nodeEventMessages(c)).find((m) => m.includes('is forbidden')),
        60_000,
        1000,
      );
      assert.match(ev, new RegExp(refusal));
      assert.doesNotMatch(ev, DUMP);
      assert.ok(!ev.includes('\n') && !cond.message.includes('\n'), 'one line');
      const logged = await ipamdLogStrings(c);
      const lines = logged.filter((s) => s.includes('403'));
      assert.ok(
        lines.some((s) => new RegExp(refusal).test(s)),
        `the log names the refusal:\n${lines.slice(0, 5).join('\n')}`,
      );
      for (const s of lines) assert.doesNotMatch(s, DUMP, `no HTTP dump in the log: ${s}`);

      // What docs/troubleshooting.md says: helm 4 does not take back fields kubectl-patch now owns...
      const plain = await c.kubectl.helm(['upgrade', RELEASE, CHART, '-n', NAMESPACE, '--reuse-values']);
      t.diagnostic(`helm upgrade --reuse-values: exit ${plain.code}: ${plain.stderr.trim().split('\n').pop() ?? ''}`);
      assert.equal(await canListPods(), false, 'without --force-conflicts the rule stays removed');
      // ...and --force-conflicts does.
      const forced = await c.kubectl.helm([
        'upgrade',
        RELEASE,
        CHART,
        '-n',
        NAMESPACE,
        '--reuse-values',
        '--force-conflicts',
      ]);
      assert.equal(forced.code, 0, forced.stderr);
      assert.equal(await canListPods(), true, 'the rule is back');
      const restoredAt = Date.now();
      await waitFor(
        'releases unfrozen',
        async () => {
          const s = await status();
          return !s.releasesFrozen && s.freezeReasons.length === 0;
        },
        120_000,
        1000,
      );
      t.diagnostic(`unfrozen ${Date.now() - restoredAt} ms after the role was restored`);
      await waitFor(
        'the node condition without the freeze',
        async () => {
          const x = await ipAllocatable(c);
          return !!x && x.reason !== 'ReleasesFrozen' && !x.message.includes('releases frozen');
        },
        60_000,
        1000,
      );
      await checkNothingLostEverywhere(c);
    },
  );
});
