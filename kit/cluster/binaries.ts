/**
 * The Go-built binaries of the real test cluster: `bash cluster/build.sh` builds them
 * once from the Go module proxy (Kubernetes v1.36.3, etcd v3.6.16, containerd v2.4.2) into
 * a cache outside the clone keyed by each wrapper module's go.mod + go.sum, and prints
 * where they are; a warm call builds nothing and takes milliseconds.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Bin dirs of the three builds. */
export interface ClusterBinaries {
  /** kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl. */
  k8s: string;
  /** etcd. */
  etcd: string;
  /** containerd, containerd-shim-runc-v2, ctr. */
  containerd: string;
}

let cached: Promise<ClusterBinaries> | undefined;

/**
 * Runs `bash cluster/build.sh <parts>` (a no-op for a part whose cache is warm) and returns
 * each part's bin dir by name (`k8s`, `etcd`, `containerd`, `e2e`, `coredns`).
 * @throws Error with the script's one-line reason when a build or a module fetch fails, or
 *   when it printed no existing bin dir for a part asked for.
 */
export async function buildClusterParts(parts: string[]): Promise<Record<string, string>> {
  let out: string;
  try {
    out = (await run('bash', [path.join(ROOT, 'cluster', 'build.sh'), ...parts], { maxBuffer: 1 << 20 })).stdout;
  } catch (e) {
    const err = (e as { stderr?: string }).stderr?.trim().split('\n').pop();
    throw new Error(err || (e as Error).message);
  }
  const dirs: Record<string, string> = Object.fromEntries(
    out
      .split('\n')
      .map((l) => /^(\w+)_bin=(.+)$/.exec(l.trim()))
      .filter((m): m is RegExpExecArray => !!m)
      .map((m) => [m[1]!, m[2]!]),
  );
  for (const k of parts) {
    const d = dirs[k];
    if (!d || !existsSync(d)) throw new Error(`cluster/build.sh printed no bin dir for ${k}`);
  }
  return dirs;
}

/**
 * Runs cluster/build.sh for the three cluster parts (a no-op when the cache is warm) and
 * returns the bin dirs. Memoised per process.
 * @throws Error as {@link buildClusterParts}.
 */
export function clusterBinaries(): Promise<ClusterBinaries> {
  return (cached ??= (async () => {
    const dirs = await buildClusterParts(['etcd', 'containerd', 'k8s']);
    return { k8s: dirs['k8s']!, etcd: dirs['etcd']!, containerd: dirs['containerd']! };
  })());
}

let helper: Promise<string> | undefined;

/**
 * amazon-vpc-cni-k8s's cni-metrics-helper, built from its Go module on first use
 * (`bash cluster/build.sh cni-metrics-helper`, cached like the cluster's parts; not built by
 * a plain `cluster/build.sh`). Memoised per process.
 * @returns the binary's path
 * @throws Error with the script's one-line reason when the build or a module fetch fails.
 */
export function cniMetricsHelperBinary(): Promise<string> {
  return (helper ??= (async () => {
    let out: string;
    try {
      out = (await run('bash', [path.join(ROOT, 'cluster', 'build.sh'), 'cni-metrics-helper'], { maxBuffer: 1 << 20 }))
        .stdout;
    } catch (e) {
      const err = (e as { stderr?: string }).stderr?.trim().split('\n').pop();
      throw new Error(err || (e as Error).message);
    }
    const dir = /^cni_metrics_helper_bin=(.+)$/m.exec(out)?.[1];
    const bin = dir ? path.join(dir, 'cni-metrics-helper') : '';
    if (!bin || !existsSync(bin)) throw new Error('cluster/build.sh printed no bin dir for cni-metrics-helper');
    return bin;
  })());
}
