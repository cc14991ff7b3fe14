/**
 * What the test API server (apiserver.ts) holds before any test uses it, as on an EKS
 * node before ipamd starts: the chart's ServiceAccount, ClusterRole and binding
 * (rendered by the real helm from charts/eni-ipam, applied as rendered) and, when asked,
 * the chart's ENIConfig CRD. ipamd then reaches the server only with a token of that
 * ServiceAccount (TokenRequest, `kubectl create token`), so RBAC is enforced: a verb the
 * ClusterRole lacks answers 403 and fails the test.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderChart } from '../helm.js';
import { waitFor } from '../wait.js';
import { clusterBinaries } from './binaries.js';
import { kubectlRunner, type Kubectl } from './kubectl.js';
import { kubeconfigYaml } from './pki.js';
import type { ApiServerInfo } from './apiserver.js';

/** Namespace of the chart's ServiceAccounts (the release namespace of helm.ts renderChart). */
export const IPAMD_NAMESPACE = 'kube-system';

/**
 * ipamd's identities on the test server, one per ClusterRole the chart renders:
 * `ipamd` with the default values, `ipamd-taint` with `taintWhenExhausted: true` (adds
 * `patch` on nodes), `ipamd-readonly` with `rbac.nodeEventsAndStatus: false` (no Events, no
 * node status).
 */
export const IPAMD_IDENTITIES: Record<string, Record<string, unknown>> = {
  ipamd: {},
  'ipamd-taint': { fullnameOverride: 'eni-ipam-taint', taintWhenExhausted: true },
  'ipamd-readonly': { fullnameOverride: 'eni-ipam-readonly', rbac: { create: true, nodeEventsAndStatus: false } },
};

/** An admin kubectl for `s`. */
export async function adminKubectl(s: ApiServerInfo): Promise<Kubectl> {
  return kubectlRunner(await clusterBinaries(), s.adminKubeconfig);
}

/** The ENIConfig CRD as the chart renders it (`eniConfig.createCrd`). */
export async function eniConfigCrd(): Promise<Record<string, unknown>> {
  const crd = (await renderChart({ eniConfig: { createCrd: true } })).find(
    (o) => o['kind'] === 'CustomResourceDefinition',
  );
  if (!crd) throw new Error('the chart rendered no CustomResourceDefinition with eniConfig.createCrd');
  return crd;
}

/** Applies the chart's ENIConfig CRD and waits until it is Established. @throws Error with kubectl's stderr. */
export async function applyEniConfigCrd(k: Kubectl): Promise<void> {
  await k.apply([await eniConfigCrd()]);
  await k.run(['wait', '--for=condition=Established', '--timeout=60s', 'crd/eniconfigs.crd.k8s.amazonaws.com']);
  // Established is not yet served: for a moment after it, a LIST answers 429 (the storage is
  // still initializing) and a watch 500. Wait until a list answers.
  await waitFor(
    'ENIConfigs listable',
    async () => (await k.try(['get', '--raw', '/apis/crd.k8s.amazonaws.com/v1alpha1/eniconfigs'])).code === 0,
    60_000,
    200,
  );
}

/**
 * Applies the chart's ServiceAccount, ClusterRole and ClusterRoleBinding (and the owner Leases' Role and RoleBinding) for each of
 * {@link IPAMD_IDENTITIES} and writes `<s.dir>/<identity>.kubeconfig` with a 24 h
 * ServiceAccount token. @returns identity → kubeconfig path. @throws Error with kubectl's or helm's stderr.
 */
export async function applyIpamdIdentities(s: ApiServerInfo, k: Kubectl): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [id, values] of Object.entries(IPAMD_IDENTITIES)) {
    const objs = (await renderChart(values)).filter((o) =>
      ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(String(o['kind'])),
    );
    if (objs.length !== 5) throw new Error(`the chart rendered ${objs.length} RBAC objects for ${id}, not 5`);
    await k.apply(objs);
    const sa = objs.find((o) => o['kind'] === 'ServiceAccount') as { metadata: { name: string } };
    const token = (await k.run(['-n', IPAMD_NAMESPACE, 'create', 'token', sa.metadata.name, '--duration=24h'])).trim();
    out[id] = path.join(s.dir, `${id}.kubeconfig`);
    const user = `system:serviceaccount:${IPAMD_NAMESPACE}:${sa.metadata.name}`;
    await writeFile(out[id]!, kubeconfigYaml(s.url, s.caCert, user, token), { mode: 0o600 });
  }
  return out;
}
