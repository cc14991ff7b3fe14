/**
 * kubectl (built with the cluster, so no version skew) and helm (scripts/ensure-helm.sh)
 * against the test cluster with one kubeconfig.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { HELM } from '../helm.js';
import type { ClusterBinaries } from './binaries.js';

/** What one command printed and its exit code. */
export interface CmdResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** kubectl and helm bound to one kubeconfig. */
export interface Kubectl {
  kubeconfig: string;
  /** `kubectl <args>`; @returns stdout. @throws Error with kubectl's stderr on a non-zero exit. */
  run(args: string[], input?: string): Promise<string>;
  /** `kubectl <args>` without throwing. */
  try(args: string[], input?: string): Promise<CmdResult>;
  /** `kubectl <args> -o json`, parsed. @throws as run(). */
  json<T = Record<string, unknown>>(args: string[]): Promise<T>;
  /** `kubectl apply -f -` of `objects` (JSON, one List). @throws as run(). */
  apply(objects: object[], extra?: string[]): Promise<string>;
  /** `helm <args> --kubeconfig …` without throwing. */
  helm(args: string[]): Promise<CmdResult>;
}

/** Runs `argv` to completion, `input` on stdin. Never throws for a non-zero exit. */
export function exec(argv: string[], env: NodeJS.ProcessEnv, input?: string): Promise<CmdResult> {
  return new Promise((resolve) => {
    const p = spawn(argv[0]!, argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', (e) => resolve({ code: 127, stdout, stderr: `${stderr}${e.message}` }));
    p.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    p.stdin.on('error', () => undefined);
    p.stdin.end(input ?? '');
  });
}

/** A {@link Kubectl} for `kubeconfig`. */
export function kubectlRunner(bins: ClusterBinaries, kubeconfig: string): Kubectl {
  const kubectl = path.join(bins.k8s, 'kubectl');
  const env = { ...process.env, KUBECONFIG: kubeconfig };
  const helmEnv = {
    ...env,
    HELM_CACHE_HOME: '/tmp/eni-ipam-helm/cache',
    HELM_CONFIG_HOME: '/tmp/eni-ipam-helm/config',
    HELM_DATA_HOME: '/tmp/eni-ipam-helm/data',
  };
  const k: Kubectl = {
    kubeconfig,
    try: (args, input) => exec([kubectl, ...args], env, input),
    async run(args, input) {
      const r = await exec([kubectl, ...args], env, input);
      if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
      return r.stdout;
    },
    async json<T>(args: string[]) {
      return JSON.parse(await k.run([...args, '-o', 'json'])) as T;
    },
    apply: (objects, extra = []) =>
      k.run(['apply', ...extra, '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects })),
    helm: (args) => exec([HELM, ...args, '--kubeconfig', kubeconfig], helmEnv),
  };
  return k;
}
