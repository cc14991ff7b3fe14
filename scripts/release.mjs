#!/usr/bin/env node
/**
 * `npm run release`: the artifacts of one version under build/release/ (git-ignored):
 *
 *   eni-ipam-<version>.oci.tar          the image archive (`npm run image`, copied)
 *   eni-ipam-<chart version>.tgz        the chart (`helm package charts/eni-ipam`)
 *   index.yaml                          a helm repository index of this directory (`helm repo index`)
 *   eni-ipam-<version>.cdx.json         the image's CycloneDX 1.6 SBOM: its Debian packages (licenses,
 *                                       .deb SHA-256), its npm packages and the Node runtime (CPE,
 *                                       license) (scripts/release/sbom.mjs)
 *   SHA256SUMS                          `sha256sum -c SHA256SUMS` checks all of the above
 *
 * How to publish them: README.md "Release artifacts" and docs/install-eks.md.
 *
 * CLI: node scripts/release.mjs [--out DIR] [--chart-url URL] [--lock FILE] [--debian-drift warn]
 *   --out DIR         where to write (default build/release; emptied first)
 *   --chart-url URL   the address the chart repository will be served at (absolute chart URLs
 *                     in index.yaml); without it they are relative to the index
 *   --lock FILE       the image's content list (default image/contents-<arch>.lock)
 *   --debian-drift M  `fail` (the default): an image
 *                     whose Debian packages moved on the mirror since the lock was written is
 *                     not released; the one line names each package and the commands to review
 *                     and accept the move. `warn` releases it anyway, for tests only: what it
 *                     ships is not what the lock pins
 * Every failure is one line on stderr (`eni-ipam release: …`) and exit status 1.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildImage } from './image/build.mjs';
import { ImageBuildError, sourceDateEpoch } from './image/common.mjs';
import { ROOT, packageChart } from './release/chart.mjs';
import { ReleaseError, imageSbom } from './release/sbom.mjs';

/**
 * Writes `SHA256SUMS` in `dir` for the given files (names relative to dir, sorted), in
 * sha256sum's own format, so `cd dir && sha256sum -c SHA256SUMS` verifies them.
 * @param {string} dir
 * @param {string[]} files absolute paths inside dir
 * @returns {string} the file written
 */
export function writeChecksums(dir, files) {
  const lines = files
    .map((f) => path.relative(dir, f))
    .sort()
    .map(
      (rel) =>
        `${createHash('sha256')
          .update(readFileSync(path.join(dir, rel)))
          .digest('hex')}  ${rel}`,
    );
  const out = path.join(dir, 'SHA256SUMS');
  writeFileSync(out, `${lines.join('\n')}\n`);
  return out;
}

/**
 * Makes every release artifact.
 * @param {{ out?: string, chartUrl?: string, lockFile?: string, debianDrift?: 'fail' | 'warn', log?: (line: string) => void }} o
 *   debianDrift: default 'fail' (see the CLI's --debian-drift)
 * @returns {Promise<{ dir: string, files: { name: string, bytes: number }[], sbom: { debs: number, npm: number, debsHashed: number } }>}
 * @throws ReleaseError | ImageBuildError (one line each)
 */
export async function release(o = {}) {
  const log = o.log ?? (() => {});
  const dir = path.resolve(o.out ?? path.join(ROOT, 'build', 'release'));
  if (o.chartUrl !== undefined && !/^https?:\/\/\S+$/.test(o.chartUrl))
    throw new ReleaseError(`--chart-url '${o.chartUrl}' is not an http(s):// address`);
  log('image (npm run image)');
  const image = await buildImage({
    log,
    debianDrift: o.debianDrift ?? 'fail',
    ...(o.lockFile ? { lockFile: o.lockFile } : {}),
  });
  if (image.drift) log(`warning: ${image.drift}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = path.join(dir, path.basename(image.archive));
  copyFileSync(image.archive, archive);
  log('chart (helm package, helm repo index)');
  const chart = await packageChart({ dir, url: o.chartUrl });
  log('SBOM (CycloneDX)');
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const sbom = await imageSbom({
    contents: readFileSync(image.contents, 'utf8'),
    packageLock: JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')),
    version,
    arch: process.arch === 'x64' ? 'amd64' : process.arch,
    manifestDigest: image.manifestDigest,
    epoch: await sourceDateEpoch(),
    meta: JSON.parse(readFileSync(image.sbomMeta, 'utf8')),
  });
  const sbomFile = path.join(dir, `eni-ipam-${version}.cdx.json`);
  writeFileSync(sbomFile, sbom.json);
  const sums = writeChecksums(dir, [archive, chart.tgz, chart.index, sbomFile]);
  const files = [archive, chart.tgz, chart.index, sbomFile, sums].map((f) => ({
    name: path.basename(f),
    bytes: statSync(f).size,
  }));
  return { dir, files, sbom: { debs: sbom.debs, npm: sbom.npm, debsHashed: sbom.debsHashed } };
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const log = (l) => process.stderr.write(`eni-ipam release: ${l}\n`);
  try {
    const { values } = parseArgs({
      options: {
        out: { type: 'string' },
        'chart-url': { type: 'string' },
        lock: { type: 'string' },
        'debian-drift': { type: 'string' },
      },
    });
    const drift = values['debian-drift'] ?? 'fail';
    if (drift !== 'fail' && drift !== 'warn')
      throw new ReleaseError(`--debian-drift '${drift}' is not one of fail, warn`);
    const r = await release({
      out: values.out,
      chartUrl: values['chart-url'],
      debianDrift: drift,
      ...(values.lock ? { lockFile: path.resolve(values.lock) } : {}),
      log,
    });
    for (const f of r.files)
      log(
        `wrote ${path.relative(process.cwd(), path.join(r.dir, f.name))} (${f.bytes >= 1048576 ? `${(f.bytes / 1048576).toFixed(1)} MiB` : `${(f.bytes / 1024).toFixed(1)} KiB`})`,
      );
    log(
      `SBOM: ${r.sbom.debs} Debian packages (${r.sbom.debsHashed} with their .deb's SHA-256), ${r.sbom.npm} npm packages; verify with: cd ${path.relative(process.cwd(), r.dir) || '.'} && sha256sum -c SHA256SUMS`,
    );
  } catch (e) {
    if (!(
      e instanceof ReleaseError ||
      e instanceof ImageBuildError ||
      /** @type {Error} */ (
        e.name === 'TypeError' && /** @type {{ code?: string }} */ (e).code?.startsWith('ERR_PARSE_ARGS')
      )
    ))
      throw e;
    process.stderr.write(`eni-ipam release: ${/** @type {Error} */ (e).message}\n`);
    process.exit(1);
  }
}
