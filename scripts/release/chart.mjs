/**
 * The chart half of `npm run release`: `helm package` of charts/eni-ipam and `helm repo
 * index` over the release directory, with the real helm (node_modules/.tools/helm, installed
 * by scripts/ensure-helm.sh), so the directory can be served as a static chart repository.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReleaseError } from './sbom.mjs';

/** The repository root. */
export const ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** The helm binary scripts/ensure-helm.sh installs. */
export const HELM = path.join(ROOT, 'node_modules', '.tools', 'helm');

/**
 * Runs helm with its cache and config kept out of $HOME.
 * @param {string[]} args
 * @returns {Promise<string>} stdout
 * @throws ReleaseError naming the command and helm's first error line
 */
export function helm(args) {
  if (!existsSync(HELM)) throw new ReleaseError(`${HELM} is missing: run bash scripts/ensure-helm.sh`);
  const home = '/tmp/eni-ipam-helm';
  const env = {
    ...process.env,
    HELM_CACHE_HOME: `${home}/cache`,
    HELM_CONFIG_HOME: `${home}/config`,
    HELM_DATA_HOME: `${home}/data`,
  };
  return new Promise((resolve, reject) => {
    execFile(HELM, args, { env, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const why = `${stderr}`.split('\n').find((l) => l.trim()) ?? `exit status ${err.code}`;
      reject(new ReleaseError(`helm ${args[0]} failed: ${why}`));
    });
  });
}

/**
 * Packages the chart into `dir` and (re)writes `dir/index.yaml` for it.
 * @param {{ dir: string, chartDir?: string, url?: string }} o dir: the release directory;
 *   url: the address the directory will be served at (index.yaml's chart URLs are relative
 *   without it, which helm resolves against the repository's address)
 * @returns {Promise<{ tgz: string, index: string }>} absolute paths
 * @throws ReleaseError when helm fails (lint-level chart errors included)
 */
export async function packageChart(o) {
  const chartDir = o.chartDir ?? path.join(ROOT, 'charts', 'eni-ipam');
  const out = await helm(['package', chartDir, '--destination', o.dir]);
  const m = /saved it to: (.+\.tgz)/.exec(out);
  if (!m) throw new ReleaseError(`helm package printed no archive path: ${out.trim()}`);
  await helm(['repo', 'index', o.dir, ...(o.url ? ['--url', o.url] : [])]);
  return { tgz: m[1].trim(), index: path.join(o.dir, 'index.yaml') };
}
