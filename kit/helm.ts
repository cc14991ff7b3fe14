/**
 * Runs the real helm binary (node_modules/.tools/helm, installed by
 * scripts/ensure-helm.sh) on charts/eni-ipam, and parses what it renders with `yaml`.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));

/** The helm binary. */
export const HELM = `${root}node_modules/.tools/helm`;
/** The chart directory. */
export const CHART = `${root}charts/eni-ipam`;

/** What one helm run printed and its exit code (0 on success). */
export interface HelmRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `helm <args>`; never throws for a non-zero exit (see `code`). @throws Error when helm is not installed. */
export async function helm(args: string[]): Promise<HelmRun> {
  if (!existsSync(HELM))
    throw new Error(`${HELM} is missing: run bash scripts/ensure-helm.sh (or scripts/ensure-deps.sh)`);
  try {
    const r = await run(HELM, args, {
      maxBuffer: 16 << 20,
      env: {
        ...process.env,
        HELM_CACHE_HOME: '/tmp/eni-ipam-helm/cache',
        HELM_CONFIG_HOME: '/tmp/eni-ipam-helm/config',
        HELM_DATA_HOME: '/tmp/eni-ipam-helm/data',
      },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === 'number' ? x.code : 1, stdout: x.stdout ?? '', stderr: x.stderr ?? String(e) };
  }
}

/**
 * `helm template <release> charts/eni-ipam -n <namespace> -f <values file>...` with
 * `values` passed as one JSON values file. @returns the rendered objects.
 * @throws Error with helm's stderr when rendering fails.
 */
export async function renderChart(
  values: Record<string, unknown> = {},
  extraArgs: string[] = [],
): Promise<Record<string, unknown>[]> {
  const { writeFile, mkdtemp, rm } = await import('node:fs/promises');
  const dir = await mkdtemp('/tmp/eni-ipam-values-');
  try {
    await writeFile(`${dir}/values.json`, JSON.stringify(values));
    const r = await helm([
      'template',
      'eni',
      CHART,
      '--namespace',
      'kube-system',
      '-f',
      `${dir}/values.json`,
      ...extraArgs,
    ]);
    if (r.code !== 0) throw new Error(`helm template failed (${r.code}): ${r.stderr.trim()}`);
    return parseAllDocuments(r.stdout)
      .map((d) => {
        if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors[0]!.message}`);
        return d.toJS() as Record<string, unknown>;
      })
      .filter((o) => o !== null);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
