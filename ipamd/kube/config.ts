/**
 * Where ipamd's Kubernetes pod source gets its API server and credentials:
 * an explicit kubeconfig path if given; else in-cluster (the pod's service account:
 * KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount/token,
 * https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/); else the
 * KUBECONFIG variable or ~/.kube/config. Loaded with @kubernetes/client-node's KubeConfig.
 */
import { existsSync, readFileSync } from 'node:fs';
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

/** The `sub` claim of a JWT (a ServiceAccount token's: `system:serviceaccount:<ns>:<name>`), or undefined. */
function jwtSubject(token: string): string | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const sub = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sub?: unknown }).sub;
    return typeof sub === 'string' && sub ? sub : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Who `kc` calls the API server as, for error lines (errors.ts `describeApiCall`): the
 * subject of its bearer token (in-cluster: the pod's ServiceAccount token file), e.g.
 * `system:serviceaccount:kube-system:eni-ipam`, else the kubeconfig user's name; undefined
 * when there is no user. Never throws (the token is only decoded, never verified).
 */
export function kubeIdentity(kc: KubeConfig): string | undefined {
  const u = kc.getCurrentUser();
  if (!u) return undefined;
  let token = u.token;
  const file = (u.authProvider as { config?: { tokenFile?: unknown } } | undefined)?.config?.tokenFile;
  if (!token && typeof file === 'string') {
    try {
      token = readFileSync(file, 'utf8').trim();
    } catch {
      /* unreadable: the user's name */
    }
  }
  return (token && jwtSubject(token)) || u.name || undefined;
}
