/**
 * RBAC refusals as an operator reads them (issue 37; docs/troubleshooting.md), on the run's
 * real kube-apiserver: the real ipamd on the simulated cloud, as a ServiceAccount the
 * server refuses. Its pod list is refused: the freeze reason is one line naming the verb,
 * the resource and the user (no "HTTP-Code"/"Unknown API Status Code!" dump), and so is its
 * log. Its node condition cannot be written: ipamd says so where it can (`/v1/status`
 * `nodeCondition`, `eni_ipam_node_condition_synced` 0, one log line naming what grants the
 * verb), since the condition on the Node stays as it was.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { adminKubectl } from '../../kit/cluster/apiserver-setup.js';
import { kubeconfigYaml } from '../../kit/cluster/pki.js';
import { uniqueName } from '../../kit/cluster/apiserver-objects.js';
import { createNode } from '../../kit/node-harness.js';
import { waitFor } from '../../kit/wait.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';

const DUMP = /HTTP-Code|Unknown API Status Code|Headers:|\\"/;

/** ipamd on its own simulated node, as `kubeconfig`, with MY_NODE_NAME `nodeName`; its status and metrics. */
async function ipamdAs(t: { after(fn: () => Promise<void> | void): void }, nodeName: string, kubeconfig: string) {
  const h = await createNode({ ipamdEnv: { DISABLE_METRICS: 'false', METRICS_BIND_ADDRESS: '127.0.0.1:0' } });
  t.after(() => h.close());
  const d = await h.startIpamd({
    MY_NODE_NAME: nodeName,
    KUBECONFIG: kubeconfig,
    ENI_IPAM_INSTALL_CNI: 'false',
    CRI_RUNTIME_ENDPOINT: `unix://${path.join(h.dir, 'no-cri.sock')}`,
  });
  const log = () => readFile(path.join(h.dir, 'ipamd.log'), 'utf8').catch(() => '');
  const metric = async (name: string) => {
    const text = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
    return new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];
  };
  return { h, d, log, metric };
}

test('a ServiceAccount the API server refuses: one readable line in the freeze reason, the log and /v1/status', async (t) => {
  const env = await realKubeEnv(t, { prefix: 'rbac' });
  const k = await adminKubectl(env.server);
  // A ServiceAccount no role is bound to: every call is refused (as after the ClusterRoleBinding is deleted).
  const sa = uniqueName('norole');
  await k.run(['-n', 'default', 'create', 'serviceaccount', sa]);
  t.after(() => k.try(['-n', 'default', 'delete', 'serviceaccount', sa]).then(() => undefined));
  const token = (await k.run(['-n', 'default', 'create', 'token', sa])).trim();
  const kubeconfig = path.join(env.dir, `${sa}.kubeconfig`);
  const user = `system:serviceaccount:default:${sa}`;
  await writeFile(kubeconfig, kubeconfigYaml(env.server.url, env.server.caCert, user, token), { mode: 0o600 });
  const { d, log, metric } = await ipamdAs(t, env.nodeName, kubeconfig);

  const reason = await waitFor(
    'the Kubernetes freeze reason',
    async () => ((await d.status()).freezeReasons as string[]).find((r) => r.startsWith('kube: ')),
    60_000,
  );
  assert.equal(
    reason,
    `kube: Kubernetes pods unreadable: list pods (spec.nodeName=${env.nodeName}): HTTP 403 Forbidden: pods is forbidden: User "${user}" cannot list resource "pods" in API group "" at the cluster scope`,
  );
  const condition = await waitFor(
    'ipamd reports it cannot keep its node condition',
    async () => {
      const c = (await d.status()).nodeCondition as { synced: boolean; error?: string } | null;
      return c && !c.synced && c.error?.includes('HTTP 403') ? c : undefined;
    },
    60_000,
  );
  assert.match(
    condition.error!,
    new RegExp(
      `^get nodes/${env.nodeName}: HTTP 403 Forbidden: nodes "${env.nodeName}" is forbidden: User "${user}" cannot get resource "nodes"`,
    ),
  );
  assert.match(condition.error!, /check that the ClusterRole and its ClusterRoleBinding exist and bind/);
  assert.equal(await metric('eni_ipam_node_condition_synced'), '0');
  const lines = (await log()).split('\n').filter((l) => /403/.test(l));
  assert.ok(lines.length > 0, 'the refusals are logged');
  for (const l of lines) assert.doesNotMatch(JSON.parse(l).err ?? '', DUMP, l);
});

test("the chart's read-only ClusterRole (rbac.nodeEventsAndStatus=false): pods are read; the condition says it cannot be written", async (t) => {
  const env = await realKubeEnv(t, { prefix: 'rbacro' });
  const { d, metric } = await ipamdAs(t, env.nodeName, env.kubeconfig('ipamd-readonly'));
  const condition = await waitFor(
    'the refused status patch',
    async () => {
      const c = (await d.status()).nodeCondition as { synced: boolean; error?: string } | null;
      return c && !c.synced && c.error?.includes('patch') ? c : undefined;
    },
    60_000,
  );
  assert.match(
    condition.error!,
    new RegExp(
      `^patch nodes/${env.nodeName}/status: HTTP 403 Forbidden: .*cannot patch resource "nodes/status".*; the chart's ClusterRole grants patch nodes/status with rbac.nodeEventsAndStatus=true`,
    ),
  );
  assert.doesNotMatch(condition.error!, DUMP);
  assert.equal(await metric('eni_ipam_node_condition_synced'), '0');
  assert.ok(!((await d.status()).freezeReasons as string[]).some((r) => r.startsWith('kube: ')), 'pods are read');
});
