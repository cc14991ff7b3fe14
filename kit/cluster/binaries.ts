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
 * each part's bin dir by the name asked for (`k8s`, `etcd`, `containerd`, `e2e`, `coredns`,
 * `cni-metrics-helper`, `network-policy-agent`, …; the script prints dashes as underscores).
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
  const byPart: Record<string, string> = {};
  for (const k of parts) {
    const d = dirs[k.replace(/-/g, '_')];
    if (!d || !existsSync(d)) throw new Error(`cluster/build.sh printed no bin dir for ${k}`);
    byPart[k] = d;
  }
  return byPart;
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

const optional = new Map<string, Promise<string>>();

/** The bin dir of a part built only when named (memoised per process). @throws as {@link buildClusterParts}. */
function optionalPart(part: string): Promise<string> {
  let p = optional.get(part);
  if (!p) optional.set(part, (p = buildClusterParts([part]).then((d) => d[part]!)));
  return p;
}

/** `file` in `dir`. @throws Error when the build left no such file. */
function inDir(dir: string, file: string, part: string): string {
  const bin = path.join(dir, file);
  if (!existsSync(bin)) throw new Error(`cluster/build.sh ${part} left no ${file} in ${dir}`);
  return bin;
}

/**
 * amazon-vpc-cni-k8s's cni-metrics-helper, built from its Go module on first use
 * (`bash cluster/build.sh cni-metrics-helper`, cached like the cluster's parts; not built by
 * a plain `cluster/build.sh`). Memoised per process.
 * @returns the binary's path
 * @throws Error with the script's one-line reason when the build or a module fetch fails.
 */
export async function cniMetricsHelperBinary(): Promise<string> {
  return inDir(await optionalPart('cni-metrics-helper'), 'cni-metrics-helper', 'cni-metrics-helper');
}

/**
 * amazon-network-policy-controller-k8s v1.1.10 (`bash cluster/build.sh
 * network-policy-controller`, cached like the cluster's parts). Memoised per process.
 * @returns the binary's path
 * @throws Error with the script's one-line reason when the build or a module fetch fails.
 */
export async function networkPolicyControllerBinary(): Promise<string> {
  const part = 'network-policy-controller';
  return inDir(await optionalPart(part), 'network-policy-controller', part);
}

/**
 * aws-network-policy-agent v1.4.1's bin dir (`bash cluster/build.sh network-policy-agent`):
 * `aws-network-policy-agent`, `aws-eks-na-cli`, `aws-eks-na-cli-v6` and the six eBPF objects
 * (`tc.v4ingress.bpf.o`, …) the agent loads from its working directory, so run it there.
 * Memoised per process.
 * @throws Error with the script's one-line reason when the build or a module fetch fails.
 */
export async function networkPolicyAgentDir(): Promise<string> {
  const part = 'network-policy-agent';
  const dir = await optionalPart(part);
  for (const f of ['aws-network-policy-agent', 'aws-eks-na-cli', 'tc.v4ingress.bpf.o', 'v6events.bpf.o'])
    inDir(dir, f, part);
  return dir;
}
