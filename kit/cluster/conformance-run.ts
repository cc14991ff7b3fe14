/**
 * Runs Kubernetes' e2e suite (`e2e.test`, under the ginkgo CLI for parallel processes)
 * inside a network namespace of the cluster, as hack/ginkgo-e2e.sh runs it:
 * `ginkgo --procs=N --focus=… --skip=… e2e.test -- --kubeconfig=… --provider=skeleton
 * --report-dir=…`. Inside the node's namespace the suite reaches the apiserver on
 * 127.0.0.1:6443 and whatever a spec dials stays in the cluster's own namespaces (a spec
 * that dials an address the cluster does not have goes nowhere, never out of the machine).
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { dump, load } from 'js-yaml';

/** What {@link runE2eSuite} needs. */
export interface E2eRunOptions {
  /** cluster/build.sh's e2e bin dir (e2e.test, ginkgo). */
  e2eBin: string;
  /** kubectl the suite execs (`--kubectl-path`): the cluster's own build. */
  kubectl: string;
  /** Path of the network namespace to run in (e.g. /run/netns/<node>). */
  netns: string;
  /** A kubeconfig whose server is reachable from inside `netns`. */
  kubeconfig: string;
  /** Where the suite writes junit_01.xml. */
  reportDir: string;
  focus: string;
  skip: string;
  /** Ginkgo parallel processes (1: serial). */
  procs: number;
  /** The cluster's schedulable nodes (`--num-nodes`: every Ginkgo process then agrees on it). */
  nodes: number;
  /** Ginkgo's suite timeout (minutes). */
  timeoutMin: number;
  /** The suite's output goes here, and to `echo` when given. */
  logFile: string;
  echo?: NodeJS.WritableStream;
}

/** How the run ended. */
export interface E2eRunResult {
  /** ginkgo's exit code (1 when a spec failed), or -1 when killed by a signal. */
  code: number;
  /** Wall time (ms). */
  ms: number;
}

/**
 * Copies the kubeconfig `from` to `to` with every cluster's server set to `server` (the
 * apiserver as seen from inside the node's namespace).
 * @throws Error when `from` names no cluster server.
 */
export async function kubeconfigFor(from: string, to: string, server: string): Promise<string> {
  const cfg = load(await readFile(from, 'utf8')) as { clusters?: Array<{ cluster?: { server?: string } }> };
  const clusters = (cfg.clusters ?? []).filter((c) => c.cluster?.server);
  if (!clusters.length) throw new Error(`${from} names no cluster server`);
  for (const c of clusters) c.cluster!.server = server;
  await writeFile(to, dump(cfg));
  return to;
}

/** The ginkgo command line of a run (argv, the binary first). */
export function ginkgoArgv(o: E2eRunOptions): string[] {
  return [
    path.join(o.e2eBin, 'ginkgo'),
    `--procs=${o.procs}`,
    '--no-color',
    '--silence-skips',
    `--timeout=${o.timeoutMin}m`,
    `--focus=${o.focus}`,
    `--skip=${o.skip}`,
    path.join(o.e2eBin, 'e2e.test'),
    '--',
    `--kubeconfig=${o.kubeconfig}`,
    '--provider=skeleton',
    `--report-dir=${o.reportDir}`,
    `--kubectl-path=${o.kubectl}`,
    '--dns-domain=cluster.local',
    `--num-nodes=${o.nodes}`,
  ];
}

/**
 * Runs the suite to its end. The process group is killed when `signal` aborts.
 * @throws Error only when nsenter cannot be spawned; a failing suite is a non-zero `code`.
 */
export async function runE2eSuite(o: E2eRunOptions, signal?: AbortSignal): Promise<E2eRunResult> {
  const t0 = Date.now();
  const log = createWriteStream(o.logFile, { flags: 'a' });
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: path.dirname(o.reportDir) };
  delete env['KUBECONFIG'];
  const child = spawn('nsenter', [`--net=${o.netns}`, '--', ...ginkgoArgv(o)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const out = (d: Buffer): void => {
    log.write(d);
    o.echo?.write(d);
  };
  child.stdout.on('data', out);
  child.stderr.on('data', out);
  const kill = (): void => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  };
  signal?.addEventListener('abort', kill, { once: true });
  const code = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c) => resolve(c ?? -1));
  }).finally(() => signal?.removeEventListener('abort', kill));
  await new Promise((r) => log.end(r));
  return { code, ms: Date.now() - t0 };
}
