/**
 * Where ipamd's Kubernetes pod source gets its API server and credentials:
 * an explicit kubeconfig path if given; else in-cluster (the pod's service account:
 * KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount/token,
 * https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/); else the
 * KUBECONFIG variable or ~/.kube/config. Loaded with @kubernetes/client-node's KubeConfig.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from './client.js';

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * A KubeConfig that reports the HTTP agent of each fetch-based request (the library's
 * Watch), so a watch that hangs before its response can be torn down by destroying
 * that agent's sockets (Watch offers no abort until the response arrives).
 */
export class AgentTrackingKubeConfig extends KubeConfig {
  /** Called with the agent of each request built through applyToFetchOptions. */
  onAgent?: (agent: unknown) => void;

  override async applyToFetchOptions(
    opts: Parameters<KubeConfig['applyToFetchOptions']>[0],
  ): ReturnType<KubeConfig['applyToFetchOptions']> {
    const r = await super.applyToFetchOptions(opts);
    this.onAgent?.(r.agent);
    return r;
  }
}

/** Describes which configuration was loaded, for logs. */
export type KubeConfigSource = 'kubeconfig-path' | 'in-cluster' | 'KUBECONFIG' | 'home';

/**
 * Loads the configuration as described in the module comment.
 * @throws Error when no source is available or the file cannot be parsed.
 */
export function loadKubeConfig(kubeconfigPath?: string): { kc: AgentTrackingKubeConfig; source: KubeConfigSource } {
  const kc = new AgentTrackingKubeConfig();
  if (kubeconfigPath) {
    kc.loadFromFile(kubeconfigPath);
    return { kc, source: 'kubeconfig-path' };
  }
  if (process.env.KUBERNETES_SERVICE_HOST && process.env.KUBERNETES_SERVICE_PORT && existsSync(SERVICE_ACCOUNT_TOKEN)) {
    kc.loadFromCluster();
    return { kc, source: 'in-cluster' };
  }
  if (process.env.KUBECONFIG) {
    kc.loadFromDefault();
    return { kc, source: 'KUBECONFIG' };
  }
  const home = join(homedir(), '.kube', 'config');
  if (existsSync(home)) {
    kc.loadFromFile(home);
    return { kc, source: 'home' };
  }
  throw new Error(
    'no Kubernetes API configuration: no kubeconfig path given, not in a cluster, no KUBECONFIG, no ~/.kube/config',
  );
}
