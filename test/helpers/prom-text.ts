/**
 * A small reader of the Prometheus text exposition format 0.0.4 (prometheus.io/docs/
 * instrumenting/exposition_formats): one sample per line, `name{label="value",...} value`,
 * `#` lines skipped, label values unescaped (`\\`, `\"`, `\n`). For tests.
 */

/** One sample line. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/g;

/** Parses exposition text. @throws Error naming the first line that is not a sample. */
export function parsePrometheusText(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const v = m[3]!;
    out.push({ name: m[1]!, labels, value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v) });
  }
  return out;
}

/**
 * The value of the sample `name` whose labels include `labels` (others may be present),
 * or undefined when there is none. @throws Error when several samples match.
 */
export function sample(samples: PromSample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const hits = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (hits.length > 1) throw new Error(`${hits.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return hits[0]?.value;
}

/** Sum of the values of every sample `name` whose labels include `labels`. */
export function sumSamples(samples: PromSample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}
