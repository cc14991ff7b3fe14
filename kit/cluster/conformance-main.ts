/**
 * `npm run conformance`: judges eni-ipam with Kubernetes' own network e2e suite.
 *
 * Builds (cached) e2e.test, ginkgo, agnhost and CoreDNS from their Go modules and the
 * images the suite runs (e2e-images.ts); starts the real cluster (cluster.ts) in the IP
 * family asked, imports the images into every node's containerd, installs eni-ipam with
 * helm and CoreDNS as the cluster DNS; runs the focus of conformance-focus.ts under ginkgo
 * in the node's network namespace; parses the JUnit report into the results table
 * (conformance-report.ts), prints it and writes it as markdown; removes the cluster.
 *
 * Options: --ip-family ipv4|ipv6|dual, --nodes N, --set all|conformance, --procs N,
 * --out FILE, --timeout MIN, --instance-type T, --dry-run (list what would run; no cluster),
 * --keep-dir.
 * Exit 0: no spec failed; 1: a spec failed or a step failed (one line naming it); 2: bad usage.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { checkAfterSuite } from './after-suite.js';
import { buildClusterParts } from './binaries.js';
import { startCluster, API_PORT, type ClusterOptions, type TestCluster } from './cluster.js';
import { ginkgoFocus, ginkgoSkip, type ConformanceSet } from './conformance-focus.js';
import { renderRun, summarize } from './conformance-report.js';
import { kubeconfigFor, runE2eSuite } from './conformance-run.js';
import { COREDNS_IMAGE, installCoreDns } from './coredns.js';
import { buildE2eImages, importE2eImages, type NodeContainerd } from './e2e-images.js';
import { installEniIpam } from './install.js';
import type { ClusterIpFamily } from './ip-family.js';
import { parseJunit } from './junit-results.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const E2E_VERSION = 'v1.36.3';
const say = (l: string): void => void process.stderr.write(`eni-ipam conformance: ${l}\n`);

/** The runner's parsed options. */
interface Options {
  family: ClusterIpFamily;
  nodes: number;
  set: ConformanceSet;
  procs: number;
  timeoutMin: number;
  out: string;
  dryRun: boolean;
  keepDir: boolean;
  /** The nodes' EC2 instance type (undefined: the cluster's default). */
  instanceType?: string;
}

/** Parses argv. @throws Error (one line naming the option and what it accepts). */
function parseOptions(argv: string[]): Options {
  const a = yargs(argv)
    .scriptName('npm run conformance --')
    .option('ip-family', { choices: ['ipv4', 'ipv6', 'dual'] as const, default: 'ipv4' as const })
    .option('nodes', { type: 'string', default: '3', describe: 'nodes of the cluster (each its own EC2 instance)' })
    .option('set', { choices: ['all', 'conformance'] as const, default: 'all' as const })
    .option('procs', { type: 'string', default: '4', describe: 'ginkgo parallel processes' })
    .option('timeout', { type: 'string', default: '150', describe: "ginkgo's suite timeout (minutes)" })
    .option('out', { type: 'string', describe: 'markdown results file (default build/conformance/<family>-<set>.md)' })
    .option('dry-run', { type: 'boolean', default: false, describe: 'list what the focus selects; start nothing' })
    .option('instance-type', { type: 'string', describe: "the nodes' EC2 instance type (default: the cluster's)" })
    .option('keep-dir', { type: 'boolean', default: false, describe: "keep the cluster's dir (logs) afterwards" })
    .strict()
    .fail((msg) => {
      throw new Error(msg.replace(/\s*\n\s*/g, ' '));
    })
    .parseSync();
  const int = (flag: string, v: string, lo: number, hi: number): number => {
    if (!/^\d+$/.test(v) || Number(v) < lo || Number(v) > hi)
      throw new Error(`--${flag} "${v}" is invalid: expected a whole number from ${lo} to ${hi}`);
    return Number(v);
  };
  const family = a['ip-family'];
  const set = a.set;
  return {
    family,
    nodes: int('nodes', a.nodes, 1, 16),
    set,
    procs: int('procs', a.procs, 1, 16),
    timeoutMin: int('timeout', a.timeout, 5, 600),
    out: path.resolve(a.out ?? path.join(ROOT, 'build', 'conformance', `${family}-${set}.md`)),
    dryRun: a['dry-run'],
    keepDir: a['keep-dir'],
    ...(a['instance-type'] ? { instanceType: a['instance-type'] } : {}),
  };
}

/** Every node's containerd as ctr reaches it, the first node first. */
function nodeContainerds(c: TestCluster): NodeContainerd[] {
  const ctr = path.join(c.bins.containerd, 'ctr');
  return c.nodes.map((n) => ({ socket: n.procs.criSocket, ctr }));
}

/** Starts the cluster and gets it ready for the suite: eni-ipam, the images, CoreDNS. */
async function prepareCluster(o: Options, images: Awaited<ReturnType<typeof buildE2eImages>>): Promise<TestCluster> {
  say(`starting a ${o.family} cluster of ${o.nodes} node(s)`);
  const opts: ClusterOptions = {
    ipFamily: o.family,
    keepDir: o.keepDir,
    nodes: o.nodes,
    ...(o.instanceType ? { instanceType: o.instanceType } : {}),
  };
  const c = await startCluster(opts);
  try {
    const names = (await c.kubectl.run(['get', 'nodes', '-o', 'name'])).split('\n').filter(Boolean);
    if (names.length !== o.nodes)
      throw new Error(`asked for ${o.nodes} node(s); the cluster registered ${names.length}`);
    say(`importing the e2e images into ${c.nodes.length} node(s)' containerd`);
    await Promise.all(nodeContainerds(c).map((ctd) => importE2eImages(ctd, images.built)));
    say('installing eni-ipam (helm) and CoreDNS');
    // An IPv6 or dual-stack node runs as on EKS: the chart's ipFamily, prefix delegation on
    // (as test/cluster/ip-family-cluster.test.ts installs it).
    const values = o.family === 'ipv4' ? {} : { ipFamily: o.family, env: { ENABLE_PREFIX_DELEGATION: 'true' } };
    await installEniIpam(c, { wait: true, values });
    await installCoreDns(c, { image: COREDNS_IMAGE });
    return c;
  } catch (e) {
    await c.close().catch(() => undefined);
    throw e;
  }
}

/** Runs the whole thing in `runDir`. @returns the exit code. */
async function main(o: Options, runDir: string, abort: AbortSignal): Promise<number> {
  const t0 = Date.now();
  const focus = ginkgoFocus(o.set, o.family);
  const skip = ginkgoSkip();
  say('building e2e.test, ginkgo, agnhost and CoreDNS (cluster/build.sh e2e coredns; cached)');
  const bins = await buildClusterParts(['e2e', 'coredns']);
  if (o.dryRun) return dryRun(o, bins['e2e']!, runDir, focus, skip);
  say('building the e2e images (cached)');
  const images = await buildE2eImages({ e2eBin: bins['e2e']!, corednsBin: bins['coredns']! });
  for (const l of images.failed) say(l);
  const c = await prepareCluster(o, images);
  try {
    if (abort.aborted) throw new Error('interrupted');
    const kubeconfig = await kubeconfigFor(
      c.kubeconfig,
      path.join(runDir, 'kubeconfig'),
      `https://127.0.0.1:${API_PORT}`,
    );
    say(`running e2e.test ${E2E_VERSION} (ginkgo, ${o.procs} procs); output in ${runDir}/e2e.log`);
    const r = await runE2eSuite(
      {
        e2eBin: bins['e2e']!,
        kubectl: path.join(c.bins.k8s, 'kubectl'),
        netns: c.nodeNetns.path,
        kubeconfig,
        reportDir: runDir,
        focus,
        skip,
        procs: o.procs,
        nodes: o.nodes,
        timeoutMin: o.timeoutMin,
        logFile: path.join(runDir, 'e2e.log'),
        echo: process.stdout,
      },
      abort,
    );
    if (abort.aborted) throw new Error('interrupted');
    const junit = path.join(runDir, 'junit_01.xml');
    if (!existsSync(junit)) throw new Error(`ginkgo exited ${r.code} and wrote no ${junit} (see ${runDir}/e2e.log)`);
    const summary = summarize(parseJunit(readFileSync(junit, 'utf8')), o.set, o.family);
    // ipamd's /v1/allocations are its IPv4 datastore's: an IPv6 cluster's pods are not in it.
    const afterSuite = o.family === 'ipv6' ? undefined : await checkAfterSuite(c);
    const md = renderRun(summary, {
      set: o.set,
      family: o.family,
      nodes: o.nodes,
      procs: o.procs,
      ginkgoMs: r.ms,
      totalMs: Date.now() - t0,
      date: new Date().toISOString().slice(0, 10),
      e2eVersion: E2E_VERSION,
      imageFailures: images.failed,
      ...(afterSuite ? { afterSuite } : {}),
    });
    await writeFile(o.out, `${md}\n`);
    process.stdout.write(`\n${md}\n`);
    say(`results: ${o.out} (junit: ${junit})`);
    const lost = afterSuite?.problems.length ?? 0;
    return summary.counts.failed > 0 || summary.counts.notRun > 0 || lost > 0 ? 1 : 0;
  } finally {
    say('removing the cluster');
    await c.close();
  }
}

/** `--dry-run`: Ginkgo's dry run of the focus (no cluster): the specs it selects, one a line. */
async function dryRun(o: Options, e2eBin: string, runDir: string, focus: string, skip: string): Promise<number> {
  const { spawnSync } = await import('node:child_process');
  const r = spawnSync(
    path.join(e2eBin, 'e2e.test'),
    [
      '--ginkgo.dry-run',
      `--ginkgo.focus=${focus}`,
      `--ginkgo.skip=${skip}`,
      '--ginkgo.no-color',
      `--report-dir=${runDir}`,
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const junit = path.join(runDir, 'junit_01.xml');
  if (!existsSync(junit))
    throw new Error(`e2e.test --ginkgo.dry-run exited ${r.status}: ${(r.stderr || r.stdout).trim().split('\n').pop()}`);
  const s = summarize(parseJunit(readFileSync(junit, 'utf8')), o.set, o.family);
  const ran = parseJunit(readFileSync(junit, 'utf8')).specs.filter((x) => x.state === 'passed');
  for (const x of ran) process.stdout.write(`${x.name}\n`);
  say(`${ran.length} specs selected (${o.set}, ${o.family}); ${s.counts.leftOut} left out by the runner's skips`);
  return 0;
}

const run = async (): Promise<number> => {
  let o: Options;
  try {
    o = parseOptions(hideBin(process.argv));
  } catch (e) {
    say((e as Error).message.split('\n')[0]!);
    return 2;
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const runDir = path.join(path.dirname(o.out), `${o.family}-${o.set}-${stamp}`);
  await mkdir(runDir, { recursive: true });
  const abort = new AbortController();
  const onSignal = (): void => {
    say('interrupted: stopping the suite and removing the cluster');
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await main(o, runDir, abort.signal);
  } catch (e) {
    // One line on the terminal; the whole message (logs' tails) beside the run's files.
    const msg = (e as Error).message;
    const details = path.join(runDir, 'error.txt');
    await writeFile(details, `${msg}\n`).catch(() => undefined);
    say(`failed: ${msg.split('\n')[0]}${msg.includes('\n') ? ` (details: ${details})` : ''}`);
    return 1;
  }
};

run().then(
  (code) => process.exit(code),
  (e: Error) => {
    say(`failed: ${e.message.split('\n')[0]}`);
    process.exit(1);
  },
);
