/**
 * `npm run conformance`: judges eni-ipam with Kubernetes' own network e2e suite (the run
 * itself: conformance.ts). This file is the command line.
 *
 * `--set conformance` is what CI runs (test/cluster/conformance.test.ts).
 *
 * Options: --ip-family ipv4|ipv6|dual, --nodes N, --set all|conformance, --procs N,
 * --out FILE, --timeout MIN, --instance-type T, --dry-run (list what would run; no cluster),
 * --keep-dir.
 * Exit 0: no spec failed; 1: a spec failed or a step failed (one line naming it); 2: bad usage.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { dryRunConformance, runConformance, type ConformanceOptions } from './conformance.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const say = (l: string): void => void process.stderr.write(`eni-ipam conformance: ${l}\n`);

/** The runner's parsed options. */
type Options = Omit<ConformanceOptions, 'say' | 'echo'> & { dryRun: boolean };

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

/** `--dry-run`: the specs the focus selects, one a line. */
async function dryRun(o: Options, runDir: string): Promise<number> {
  const r = await dryRunConformance(o.set, o.family, runDir);
  for (const name of r.selected) process.stdout.write(`${name}\n`);
  say(`${r.selected.length} specs selected (${o.set}, ${o.family}); ${r.leftOut} left out by the runner's skips`);
  return 0;
}

/** Runs the whole thing in `runDir`. @returns the exit code. */
async function main(o: Options, runDir: string, abort: AbortSignal): Promise<number> {
  if (o.dryRun) return dryRun(o, runDir);
  const r = await runConformance({ ...o, say, echo: process.stdout }, runDir, abort);
  process.stdout.write(`\n${r.markdown}\n`);
  return r.code;
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
