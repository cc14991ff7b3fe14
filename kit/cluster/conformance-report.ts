/**
 * The results table of one `npm run conformance` run, as markdown for docs/conformance.md
 * and the terminal: counts (selected, passed, failed, skipped with reasons, minutes), each
 * failure with the first line of its message, each skip grouped by its reason. Pure.
 */
import { classifySpec, type ConformanceSet, type SkipRule } from './conformance-focus.js';
import type { ClusterIpFamily } from './ip-family.js';
import type { JunitReport, SpecResult } from './junit-results.js';

/** The run the table describes. */
export interface RunFacts {
  set: ConformanceSet;
  family: ClusterIpFamily;
  nodes: number;
  procs: number;
  /** Wall time of the ginkgo run (ms). */
  ginkgoMs: number;
  /** Wall time of the whole run, cluster start to report (ms). */
  totalMs: number;
  /** `YYYY-MM-DD`. */
  date: string;
  /** e2e.test's version, e.g. v1.36.3. */
  e2eVersion: string;
  /** One line per image that could not be built. */
  imageFailures: string[];
  /** The nothing-lost check after the suite (kit/cluster/after-suite.ts); undefined: not run. */
  afterSuite?: { pods: number; problems: string[] };
}

/** The counts of a run. */
export interface RunCounts {
  selected: number;
  passed: number;
  failed: number;
  skippedBySpec: number;
  leftOut: number;
  /** Selected but never started (the run was interrupted or a suite node failed). */
  notRun: number;
}

/** A run sorted into its rows. */
export interface RunSummary {
  counts: RunCounts;
  failed: SpecResult[];
  /** reason → spec names (skipped by the spec itself at run time). */
  skippedBySpec: Map<string, string[]>;
  /** The runner's rule (by its reason) → the rule and the spec names. */
  leftOut: Map<string, { rule: SkipRule; names: string[] }>;
  notRun: string[];
}

const FAIL_STATES = new Set(['failed', 'panicked', 'timedout', 'interrupted', 'aborted']);

/** Sorts every spec of `report` into the summary's rows (specs outside the focus are dropped). */
export function summarize(report: JunitReport, set: ConformanceSet, family: ClusterIpFamily): RunSummary {
  const s: RunSummary = {
    counts: { selected: 0, passed: 0, failed: 0, skippedBySpec: 0, leftOut: 0, notRun: 0 },
    failed: [],
    skippedBySpec: new Map(),
    leftOut: new Map(),
    notRun: [],
  };
  const add = <K>(m: Map<K, string[]>, k: K, v: string): void => void m.set(k, [...(m.get(k) ?? []), v]);
  for (const spec of report.specs) {
    const sel = classifySpec(spec.name, set, family);
    if (sel.kind === 'unfocused') continue;
    if (sel.kind === 'left-out') {
      s.counts.leftOut++;
      const e = s.leftOut.get(sel.rule.reason) ?? { rule: sel.rule, names: [] };
      e.names.push(spec.name);
      s.leftOut.set(sel.rule.reason, e);
      continue;
    }
    s.counts.selected++;
    if (spec.state === 'passed') s.counts.passed++;
    else if (FAIL_STATES.has(spec.state)) {
      s.counts.failed++;
      s.failed.push(spec);
    } else if (spec.skipReason !== undefined) {
      s.counts.skippedBySpec++;
      add(s.skippedBySpec, spec.skipReason, spec.name);
    } else {
      s.counts.notRun++;
      s.notRun.push(spec.name);
    }
  }
  return s;
}

const cell = (t: string): string =>
  t
    .replace(/\|/g, '\\|')
    .replace(/\s*\n\s*/g, ' ')
    .trim();
const min = (ms: number): string => (ms / 60_000).toFixed(1);

/** The first line of a failure that says what failed (Ginkgo puts the location first). */
function failureLine(f: SpecResult): string {
  const lines = (f.failure ?? f.state).split('\n').map((l) => l.trim());
  return (
    lines.find((l) => l && !/^\[(FAILED|TIMEDOUT|PANICKED|INTERRUPTED)\]$/.test(l) && !/^\S+\.go:\d+/.test(l)) ??
    f.state
  );
}

/** The markdown of one run: a heading, the counts table, then the failures and skips. */
export function renderRun(s: RunSummary, f: RunFacts): string {
  const c = s.counts;
  const nodes = `${f.nodes} node${f.nodes === 1 ? '' : 's'}`;
  const out = [
    `### ${f.family}, ${nodes}, set \`${f.set}\` (${f.date}, e2e.test ${f.e2eVersion})`,
    '',
    '| specs | count |',
    '|---|---|',
    `| selected (the focus, less the runner's skips) | ${c.selected} |`,
    `| passed | ${c.passed} |`,
    `| failed | ${c.failed} |`,
    `| skipped by the spec itself | ${c.skippedBySpec} |`,
    ...(c.notRun ? [`| not run (interrupted) | ${c.notRun} |`] : []),
    `| left out by the runner | ${c.leftOut} |`,
    `| minutes: ginkgo (${f.procs} procs) / whole run | ${min(f.ginkgoMs)} / ${min(f.totalMs)} |`,
    ...(f.afterSuite
      ? [
          `| after the suite, nothing lost (the nodes' ipamds hold exactly the ${f.afterSuite.pods} live pods' IPv4 addresses, each on its ENI in EC2) | ${f.afterSuite.problems.length ? `**no**: ${f.afterSuite.problems.length} problems` : 'yes'} |`,
        ]
      : []),
    '',
  ];
  if (s.failed.length) {
    out.push('Failed:', '', '| spec | state | first line |', '|---|---|---|');
    for (const x of s.failed) out.push(`| ${cell(x.name)} | ${x.state} | ${cell(failureLine(x)).slice(0, 300)} |`);
    out.push('');
  }
  if (s.skippedBySpec.size) {
    out.push('Skipped by the spec itself:', '', '| reason | specs |', '|---|---|');
    for (const [why, names] of s.skippedBySpec) out.push(`| ${cell(why)} | ${names.map(cell).join('<br>')} |`);
    out.push('');
  }
  if (s.leftOut.size) {
    out.push('Left out by the runner:', '', '| reason | fair | specs |', '|---|---|---|');
    for (const { rule: r, names } of s.leftOut.values())
      out.push(`| ${cell(r.reason)} | ${r.fair ? 'yes' : 'no'} | ${names.length}: ${names.map(cell).join('<br>')} |`);
    out.push('');
  }
  if (s.notRun.length) out.push('Not run:', '', ...s.notRun.map((n) => `- ${n}`), '');
  if (f.afterSuite?.problems.length)
    out.push('Lost after the suite:', '', ...f.afterSuite.problems.map((l) => `- ${cell(l)}`), '');
  if (f.imageFailures.length)
    out.push('Images that could not be built:', '', ...f.imageFailures.map((l) => `- ${l}`), '');
  return out.join('\n');
}
