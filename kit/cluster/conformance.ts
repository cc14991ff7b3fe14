/**
 * One run of Kubernetes' network e2e suite against eni-ipam (`npm run conformance`, and the
 * CI test test/cluster/conformance.test.ts): builds (cached) e2e.test, ginkgo, agnhost and
 * CoreDNS from their Go modules and the images the suite runs (e2e-images.ts); starts the
 * real cluster (cluster.ts, N nodes) in the IP family asked, imports the images into every
 * node's containerd, installs eni-ipam with helm and CoreDNS as the cluster DNS; runs the
 * focus of conformance-focus.ts under ginkgo in the first node's network namespace; parses
 * the JUnit report into the results table (conformance-report.ts), prints it and writes it
 * as markdown; removes the cluster.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { checkAfterSuite } from './after-suite.js';
import { buildClusterParts } from './binaries.js';
import { startCluster, API_PORT, type ClusterOptions, type TestCluster } from './cluster.js';
import { ginkgoFocus, ginkgoSkip, type ConformanceSet } from './conformance-focus.js';
import { renderRun, summarize, type RunSummary } from './conformance-report.js';
import { kubeconfigFor, runE2eSuite } from './conformance-run.js';
import { COREDNS_IMAGE, installCoreDns } from './coredns.js';
import { buildE2eImages, importE2eImages, type E2eImageSet, type NodeContainerd } from './e2e-images.js';
import { installEniIpam } from './install.js';
import type { ClusterIpFamily } from './ip-family.js';
import { parseJunit } from './junit-results.js';

const E2E_VERSION = 'v1.36.3';

/** What to run. */
export interface ConformanceOptions {
  family: ClusterIpFamily;
  /** Nodes of the cluster (each its own EC2 instance). */
  nodes: number;
  set: ConformanceSet;
  /** Ginkgo parallel processes. */
  procs: number;
  /** Ginkgo's suite timeout (minutes). */
  timeoutMin: number;
  /** Where the markdown results table goes. */
  out: string;
  /** Keep the cluster's dir (component logs) afterwards. */
  keepDir: boolean;
  /** The nodes' EC2 instance type (undefined: the cluster's default). */
  instanceType?: string;
  /** Progress lines (one per step). */
  say: (line: string) => void;
  /** The suite's output is copied here (besides `<runDir>/e2e.log`). */
  echo?: NodeJS.WritableStream;
}

/** How a run ended. */
export interface ConformanceResult {
  /** 0: no spec failed, none left unrun, nothing lost; 1 otherwise. */
  code: number;
  summary: RunSummary;
  /** The results table (markdown), as written to `out`. */
  markdown: string;
  /** Problems of the nothing-lost check after the suite (empty: none, or not run). */
  lost: string[];
}

/** Every node's containerd as ctr reaches it, the first node first. */
function nodeContainerds(c: TestCluster): NodeContainerd[] {
  const ctr = path.join(c.bins.containerd, 'ctr');
  return c.nodes.map((n) => ({ socket: n.procs.criSocket, ctr }));
}

/** Starts the cluster and gets it ready for the suite: the images on every node, eni-ipam, CoreDNS. */
async function prepareCluster(o: ConformanceOptions, images: E2eImageSet): Promise<TestCluster> {
  o.say(`starting a ${o.family} cluster of ${o.nodes} node(s)`);
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
    o.say(`importing the e2e images into the containerd of ${c.nodes.length} node(s)`);
    await Promise.all(nodeContainerds(c).map((ctd) => importE2eImages(ctd, images.built)));
    o.say('installing eni-ipam (helm) and CoreDNS');
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

/**
 * Runs the whole thing, its files (e2e.log, junit_01.xml, kubeconfig) in `runDir`.
 * @throws Error naming the step that failed (build, cluster, install, a suite that wrote no
 *   report, or `interrupted` when `abort` fired); the cluster is removed in every case.
 */
export async function runConformance(
  o: ConformanceOptions,
  runDir: string,
  abort: AbortSignal,
): Promise<ConformanceResult> {
  const t0 = Date.now();
  o.say('building e2e.test, ginkgo, agnhost and CoreDNS (cluster/build.sh e2e coredns; cached)');
  const bins = await buildClusterParts(['e2e', 'coredns']);
  o.say('building the e2e images (cached)');
  const images = await buildE2eImages({ e2eBin: bins['e2e']!, corednsBin: bins['coredns']! });
  for (const l of images.failed) o.say(l);
  const c = await prepareCluster(o, images);
  try {
    if (abort.aborted) throw new Error('interrupted');
    const kubeconfig = await kubeconfigFor(
      c.kubeconfig,
      path.join(runDir, 'kubeconfig'),
      `https://127.0.0.1:${API_PORT}`,
    );
    o.say(`running e2e.test ${E2E_VERSION} (ginkgo, ${o.procs} procs); output in ${runDir}/e2e.log`);
    const r = await runE2eSuite(
      {
        e2eBin: bins['e2e']!,
        kubectl: path.join(c.bins.k8s, 'kubectl'),
        netns: c.nodeNetns.path,
        kubeconfig,
        reportDir: runDir,
        focus: ginkgoFocus(o.set, o.family),
        skip: ginkgoSkip(),
        procs: o.procs,
        nodes: o.nodes,
        timeoutMin: o.timeoutMin,
        logFile: path.join(runDir, 'e2e.log'),
        ...(o.echo ? { echo: o.echo } : {}),
      },
      abort,
    );
    if (abort.aborted) throw new Error('interrupted');
    const junit = path.join(runDir, 'junit_01.xml');
    if (!existsSync(junit)) throw new Error(`ginkgo exited ${r.code} and wrote no ${junit} (see ${runDir}/e2e.log)`);
    const summary = summarize(parseJunit(readFileSync(junit, 'utf8')), o.set, o.family);
    // ipamd's /v1/allocations are its IPv4 datastore's: an IPv6 cluster's pods are not in it.
    const afterSuite = o.family === 'ipv6' ? undefined : await checkAfterSuite(c);
    const markdown = renderRun(summary, {
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
    await mkdir(path.dirname(o.out), { recursive: true });
    await writeFile(o.out, `${markdown}\n`);
    o.say(`results: ${o.out} (junit: ${junit})`);
    const lost = afterSuite?.problems ?? [];
    const bad = summary.counts.failed > 0 || summary.counts.notRun > 0 || lost.length > 0;
    return { code: bad ? 1 : 0, summary, markdown, lost };
  } finally {
    o.say('removing the cluster');
    await c.close();
  }
}

/**
 * Ginkgo's dry run of the focus of `set` and `family` (no cluster).
 * @returns the names of the specs it selects, and how many the runner's skips leave out.
 * @throws Error when e2e.test cannot be built or writes no report.
 */
export async function dryRunConformance(
  set: ConformanceSet,
  family: ClusterIpFamily,
  runDir: string,
): Promise<{ selected: string[]; leftOut: number }> {
  const e2eBin = (await buildClusterParts(['e2e']))['e2e']!;
  const r = spawnSync(
    path.join(e2eBin, 'e2e.test'),
    [
      '--ginkgo.dry-run',
      `--ginkgo.focus=${ginkgoFocus(set, family)}`,
      `--ginkgo.skip=${ginkgoSkip()}`,
      '--ginkgo.no-color',
      `--report-dir=${runDir}`,
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const junit = path.join(runDir, 'junit_01.xml');
  if (!existsSync(junit))
    throw new Error(`e2e.test --ginkgo.dry-run exited ${r.status}: ${(r.stderr || r.stdout).trim().split('\n').pop()}`);
  const report = parseJunit(readFileSync(junit, 'utf8'));
  const s = summarize(report, set, family);
  return { selected: report.specs.filter((x) => x.state === 'passed').map((x) => x.name), leftOut: s.counts.leftOut };
}
