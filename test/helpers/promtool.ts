/**
 * `promtool check metrics` (Debian's prometheus package) on exposition text: the
 * Prometheus project's own linter of metric names, types, units and HELP. For tests.
 */
import { spawnSync } from 'node:child_process';

/** One finding: the metric it names and promtool's text. */
export interface PromtoolProblem {
  metric: string;
  text: string;
}

/**
 * Runs `promtool check metrics` with `text` on stdin. @returns its exit status and the
 * problems, one per output line (`<metric> <text>`). @throws Error when promtool is not installed.
 */
export function promtoolCheckMetrics(text: string): {
  status: number | null;
  output: string;
  problems: PromtoolProblem[];
} {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  if (r.error)
    throw new Error(
      `promtool check metrics could not run (install Debian's prometheus package: scripts/ensure-deps.sh --containerd): ${r.error.message}`,
    );
  const output = `${r.stdout}${r.stderr}`.trim();
  const problems = output
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const i = l.indexOf(' ');
      return i < 0 ? { metric: l, text: '' } : { metric: l.slice(0, i), text: l.slice(i + 1) };
    });
  return { status: r.status, output, problems };
}
