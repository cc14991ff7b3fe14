/**
 * A started Kubernetes API stand-in for one test, with a kubeconfig for it in a temporary
 * directory; both are stopped and removed after the test.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStandIn } from '../../sim/kube/index.js';

/** The stand-in (`api`), its kubeconfig path and the temporary directory holding it (`dir`). */
export interface KubeStandInEnv {
  api: KubeApiStandIn;
  dir: string;
  kubeconfig: string;
}

/**
 * Starts a {@link KubeApiStandIn} and writes its kubeconfig to `<tmp>/<prefix>XXXXXX/kubeconfig`.
 * @param prefix temporary directory prefix, e.g. `eni-ipam-kubectl-`.
 */
export async function startKubeStandIn(
  t: { after(fn: () => Promise<void> | void): void },
  prefix: string,
): Promise<KubeStandInEnv> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const api = new KubeApiStandIn();
  await api.start();
  t.after(() => api.stop());
  const kubeconfig = join(dir, 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  return { api, dir, kubeconfig };
}
