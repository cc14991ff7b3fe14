/**
 * Writes a kubeconfig file (https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/)
 * for the stand-in: one cluster at a plain-HTTP URL with `insecure-skip-tls-verify: true`
 * (@kubernetes/client-node refuses http:// servers without it), one user with a dummy
 * bearer token (the stand-in accepts any), one context, selected as current.
 */
import { writeFile } from 'node:fs/promises';

/** Name used for the cluster, user and context entries. */
export const STANDIN_CONTEXT = 'eni-ipam-standin';

/** The kubeconfig YAML text for `server` (e.g. http://127.0.0.1:6443). */
export function kubeconfigYaml(server: string): string {
  const n = STANDIN_CONTEXT;
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: ${n}`,
    '  cluster:',
    `    server: ${JSON.stringify(server)}`,
    '    insecure-skip-tls-verify: true',
    'users:',
    `- name: ${n}`,
    '  user:',
    '    token: standin-token',
    'contexts:',
    `- name: ${n}`,
    '  context:',
    `    cluster: ${n}`,
    `    user: ${n}`,
    `current-context: ${n}`,
    'preferences: {}',
    '',
  ].join('\n');
}

/** Writes the kubeconfig for `server` to `path` (mode 0600, as kubectl writes them). */
export async function writeKubeconfigFile(path: string, server: string): Promise<void> {
  await writeFile(path, kubeconfigYaml(server), { mode: 0o600 });
}
