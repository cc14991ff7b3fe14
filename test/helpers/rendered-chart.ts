/**
 * The chart as a cluster would get it: `helm template` of charts/eni-ipam with given
 * values, parsed with the `yaml` package into objects. Also finds the image archive
 * `npm run image` built, for the tests that run the rendered DaemonSet.
 *
 * Development override (never used by CI): ENI_IPAM_E2E_MANIFEST names an already
 * rendered manifest file to use instead of running helm.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments, parse as parseYaml, stringify } from 'yaml';

const run = promisify(execFile);

/** Repository root (resolved from dist/test/helpers/). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** The chart directory. */
export const CHART_DIR = path.join(REPO_ROOT, 'charts', 'eni-ipam');

/** A helm binary: $HELM, `helm` on PATH, or one unpacked under node_modules/.cache; undefined if none. */
export function findHelm(): string | undefined {
  const env = process.env['HELM'];
  if (env && existsSync(env)) return env;
  for (const d of (process.env['PATH'] ?? '').split(':')) {
    const p = path.join(d, 'helm');
    if (d && existsSync(p)) return p;
  }
  const cache = path.join(REPO_ROOT, 'node_modules', '.cache');
  if (existsSync(cache)) {
    for (const d of readdirSync(cache)) {
      for (const cand of [path.join(cache, d, 'helm'), path.join(cache, d, 'helm', 'helm')]) {
        try { if (statSync(cand).isFile()) return cand; } catch { /* not here */ }
      }
    }
  }
  return undefined;
}

/** The image archive of `npm run image` ($ENI_IPAM_IMAGE_ARCHIVE, else the newest build/image/*.oci.tar), or undefined. */
export function findImageArchive(): string | undefined {
  const env = process.env['ENI_IPAM_IMAGE_ARCHIVE'];
  if (env) return existsSync(env) ? env : undefined;
  const dir = path.join(REPO_ROOT, 'build', 'image');
  if (!existsSync(dir)) return undefined;
  const tars = readdirSync(dir).filter((f) => f.endsWith('.oci.tar')).map((f) => path.join(dir, f));
  return tars.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
}

/** The chart's default values (values.yaml), parsed. */
export async function chartValues(): Promise<Record<string, unknown>> {
  return parseYaml(await readFile(path.join(CHART_DIR, 'values.yaml'), 'utf8')) as Record<string, unknown>;
}

/**
 * `extraEnv` in the shape the chart's values.yaml declares it: a list of `{name, value}`
 * (Kubernetes EnvVar) or a name → value map.
 */
export async function extraEnvValue(env: Record<string, string>): Promise<unknown> {
  const defaults = (await chartValues())['extraEnv'];
  return Array.isArray(defaults) || defaults === undefined ? Object.entries(env).map(([name, value]) => ({ name, value })) : env;
}

/**
 * Renders the chart with `values` (written to a values file, so types are kept).
 * @returns every rendered object.
 * @throws Error with helm's stderr when rendering fails, or when no helm is found.
 */
export async function helmTemplate(values: Record<string, unknown>, o: { namespace?: string; releaseName?: string } = {}): Promise<unknown[]> {
  const dev = process.env['ENI_IPAM_E2E_MANIFEST'];
  let text: string;
  if (dev) {
    text = await readFile(dev, 'utf8');
  } else {
    const helm = findHelm();
    if (!helm) throw new Error('no helm binary (set HELM, put helm on PATH, or install the chart tooling)');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-helm-'));
    try {
      const vf = path.join(dir, 'values.yaml');
      await writeFile(vf, stringify(values));
      try {
        text = (await run(helm, ['template', o.releaseName ?? 'eni-ipam', CHART_DIR, '--namespace', o.namespace ?? 'kube-system', '-f', vf], { maxBuffer: 1 << 24 })).stdout;
      } catch (e) {
        throw new Error(`helm template failed: ${(e as { stderr?: string }).stderr ?? (e as Error).message}`);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const errors = list.flatMap((d) => d.errors.map((e) => e.message));
  if (errors.length) throw new Error(`rendered manifest does not parse: ${errors.join('; ')}`);
  const objects = list.map((d) => d.toJS() as unknown).filter((x) => x != null);
  if (dev) devApplyExtraEnv(objects, values['extraEnv']);
  return objects;
}

/** Development override only: what the chart's `extraEnv` does, applied to a pre-rendered manifest. */
function devApplyExtraEnv(objects: unknown[], extra: unknown): void {
  const env = Array.isArray(extra) ? extra as Array<{ name: string; value: string }> : Object.entries((extra ?? {}) as Record<string, string>).map(([name, value]) => ({ name, value }));
  for (const o of objects as Array<{ kind?: string; spec?: { template?: { spec?: { containers?: Array<{ env?: unknown[] }> } } } }>) {
    const c = o.kind === 'DaemonSet' ? o.spec?.template?.spec?.containers?.[0] : undefined;
    if (c) c.env = [...(c.env ?? []), ...env];
  }
}
