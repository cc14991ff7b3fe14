#!/usr/bin/env node
/**
 * `npm run image`: builds the eni-ipam container image as an OCI archive, with no Docker
 * engine and no image registry — Debian packages (mmdebstrap) and the npm registry only.
 *
 *   build/image/eni-ipam-<version>.oci.tar    the archive (`ctr -n k8s.io images import` loads
 *                                             it as docker.io/library/eni-ipam:<version>)
 *   build/image/eni-ipam-<version>.json       what was built: name, digest, size, Node version
 *   build/image/eni-ipam-<version>.contents   the built image's content list (the lock's format;
 *                                             `npm run release` makes the SBOM from it)
 *   build/image/eni-ipam-<version>.sbom-meta.json  what the SBOM adds to the list: the Node
 *                                             runtime's license, each Debian package's license
 *                                             and `.deb` SHA-256 (scripts/image/debian-meta.mjs)
 *
 * Four layers, bottom first: the Debian root filesystem (scripts/image/debian-rootfs.mjs),
 * the Node runtime (/usr/local), the production node_modules, the app (/app minus
 * node_modules). The staged tree is the one the Dockerfile copies (scripts/image/stage.mjs).
 * The result is checked against image/contents-<arch>.lock (scripts/image/contents.mjs).
 *
 * The build is skipped when the archive exists and nothing it is made of changed (a hash of
 * dist/{ipamd,cni-plugin,netfacts,proto,cli}, proto/, config/, package*.json, image/, scripts/image/).
 *
 * CLI: node scripts/image/build.mjs [--update-lock] [--refresh] [--debian-drift fail|warn] [--lock FILE]
 *        [--packages-file FILE] [--node-pin FILE]
 *   --update-lock       rewrite the content list instead of failing on a difference
 *   --refresh           rebuild everything, the Debian root filesystem too, even when cached
 *   --debian-drift M    what a difference confined to Debian (the mirror published a point or
 *                       security release since the lock was written) does: `fail` (the default, and
 *                       `npm run release`'s) or `warn` (build, and print which
 *                       packages moved: the tests and `npm run cluster` build so)
 *   --lock F            the content list to check against (default image/contents-<arch>.lock)
 *   --packages-file F   Debian package list (default image/debian-packages.txt)
 *   --node-pin F        Node runtime pin (default image/node-runtime.json; to try another version)
 * Every failure is one line on stderr (`eni-ipam image: …`) and exit status 1.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD_DIR, ImageBuildError, ROOT, sha256, sourceDateEpoch } from './common.mjs';
import { checkContents, contentList, npmPackages } from './contents.mjs';
import { buildDebianRootfs } from './debian-rootfs.mjs';
import { nodeLicenseId } from './node-runtime.mjs';
import { packLayer, writeOciArchive } from './oci.mjs';
import { stage } from './stage.mjs';

/** Debian/OCI architecture names by Node's process.arch. */
const ARCHES = { x64: 'amd64', arm64: 'arm64' };

/** The image's entrypoint, working dir and environment (the Dockerfile states the same). */
export const IMAGE_CONFIG = {
  entrypoint: ['/app/bin/ipamd'],
  workingDir: '/app',
  env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
};

/** Files and dirs (repository-relative) the image is made of, for the up-to-date check. */
const INPUTS = ['dist/ipamd', 'dist/cni-plugin', 'dist/netfacts', 'dist/proto', 'dist/cli', 'proto', 'config', 'package.json', 'package-lock.json', 'image', 'scripts/image'];

/**
 * Hash of every input file's path, mode and contents (plus the options and timestamp).
 * @param {string[]} extra more things the result depends on
 * @returns {string} hex SHA-256
 */
function inputsKey(extra) {
  const parts = [...extra];
  const walk = (rel) => {
    const abs = path.join(ROOT, rel);
    if (!existsSync(abs)) { parts.push(`${rel}:missing`); return; }
    const st = statSync(abs);
    if (st.isDirectory()) { for (const e of readdirSync(abs).sort()) walk(path.join(rel, e)); return; }
    if (/\.map$/.test(rel)) return;
    parts.push(`${rel}:${st.mode}`, readFileSync(abs));
  };
  for (const i of INPUTS) walk(i);
  return sha256(...parts);
}

/**
 * Builds the image.
 * @param {{ updateLock?: boolean, refresh?: boolean, packagesFile?: string, nodePinFile?: string,
 *   debianDrift?: 'fail' | 'warn', lockFile?: string, log?: (line: string) => void }} o
 *   debianDrift: see the CLI's --debian-drift (default 'fail'); lockFile: see --lock
 * @returns {Promise<{ archive: string, contents: string, sbomMeta: string, name: string, tag: string, manifestDigest: string, sizeBytes: number,
 *   node: string, seconds: number, inputs: string, upToDate: boolean, cached: { debian: boolean, node: boolean },
 *   drift?: string }>} drift: the Debian packages that moved (with 'warn'), said once per build
 *   and again on every up-to-date run
 * @throws ImageBuildError (one line) on any failure
 */
export async function buildImage(o = {}) {
  const t0 = Date.now();
  const log = o.log ?? (() => {});
  const debArch = ARCHES[/** @type {keyof typeof ARCHES} */ (process.arch)];
  if (!debArch) throw new ImageBuildError(`cannot build on CPU architecture '${process.arch}' (accepted: ${Object.keys(ARCHES).join(', ')})`);
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const epoch = await sourceDateEpoch();
  const baseEpoch = await sourceDateEpoch(['image/debian-packages.txt']) || epoch;
  const summary = path.join(BUILD_DIR, `eni-ipam-${version}.json`);
  const inputs = inputsKey([String(epoch), String(baseEpoch), process.arch, o.packagesFile ? readFileSync(o.packagesFile) : '', o.nodePinFile ? readFileSync(o.nodePinFile) : '']);
  if (!o.updateLock && !o.refresh && existsSync(summary)) {
    const prev = JSON.parse(readFileSync(summary, 'utf8'));
    if (prev.inputs === inputs && existsSync(prev.archive) && statSync(prev.archive).size === prev.sizeBytes && prev.contents && existsSync(prev.contents) && prev.sbomMeta && existsSync(prev.sbomMeta)) {
      // Built before, maybe with Debian drift allowed or against another lock: the check is not an
      // input of the image, so it runs again here with this run's lock and mode.
      const lock = checkContents({ debArch, text: readFileSync(prev.contents, 'utf8'), update: false, newFile: path.join(BUILD_DIR, `contents-${debArch}.lock.new`), debianDrift: o.debianDrift ?? 'fail', ...(o.lockFile ? { file: o.lockFile } : {}) });
      const { drift: _, ...rest } = prev;
      return { ...rest, ...(lock.drift ? { drift: lock.drift } : {}), upToDate: true, seconds: Math.round((Date.now() - t0) / 100) / 10 };
    }
  }
  const work = path.join(BUILD_DIR, 'work');
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    return await build(o, { t0, log, debArch, version, epoch, baseEpoch, summary, inputs, work });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** buildImage's steps after the up-to-date check; `work` is a scratch dir the caller removes. */
async function build(o, { t0, log, debArch, version, epoch, baseEpoch, summary, inputs, work }) {

  // Both fetch over the network; wait for both (no child left running) and report the first failure.
  const [d, s] = await Promise.allSettled([
    buildDebianRootfs({ packagesFile: o.packagesFile, debArch, epoch: baseEpoch, refresh: o.refresh, log }),
    stage({ arch: process.arch, pinFile: o.nodePinFile, log }),
  ]);
  if (d.status === 'rejected') throw d.reason;
  if (s.status === 'rejected') throw s.reason;
  const debian = d.value;
  const staged = s.value;
  log(`layers (SOURCE_DATE_EPOCH=${epoch})`);
  const dir = staged.dir;
  const nodeLayer = await packLayer({ dir, paths: ['./usr'], out: path.join(work, 'node.tar'), epoch });
  const depsLayer = await packLayer({ dir, paths: ['./app/node_modules'], out: path.join(work, 'deps.tar'), epoch });
  const appLayer = await packLayer({ dir, paths: ['./app'], exclude: ['./app/node_modules'], out: path.join(work, 'app.tar'), epoch });

  const text = await contentList({
    node: staged.node.pin, debs: debian.packages, npm: npmPackages(path.join(dir, 'app')),
    layers: [debian.tar, nodeLayer, depsLayer, appLayer],
  });
  const lock = checkContents({
    debArch, text, update: o.updateLock ?? false, newFile: path.join(BUILD_DIR, `contents-${debArch}.lock.new`),
    debianDrift: o.debianDrift ?? 'fail', ...(o.lockFile ? { file: o.lockFile } : {}),
  });
  if (lock.changed) log(`rewrote ${path.relative(ROOT, lock.file)}`);

  const tag = version;
  const name = `docker.io/library/eni-ipam:${tag}`;
  const archive = path.join(BUILD_DIR, `eni-ipam-${version}.oci.tar`);
  const contents = path.join(BUILD_DIR, `eni-ipam-${version}.contents`);
  const sbomMeta = path.join(BUILD_DIR, `eni-ipam-${version}.sbom-meta.json`);
  writeFileSync(contents, text);
  const nodeLicense = nodeLicenseId(readFileSync(path.join(dir, 'usr', 'local', 'share', 'doc', 'node', 'LICENSE'), 'utf8'));
  writeFileSync(sbomMeta, `${JSON.stringify({ node: { license: nodeLicense, licenseFile: '/usr/local/share/doc/node/LICENSE' }, debs: JSON.parse(readFileSync(debian.meta, 'utf8')) }, null, 1)}\n`);
  log('OCI archive (umoci)');
  // Written beside and renamed over: a reader (another lane's cluster importing it) never finds
  // the archive missing or half written while it is rebuilt.
  const archiveTmp = `${archive}.tmp-${process.pid}`;
  rmSync(archiveTmp, { force: true });
  const { manifestDigest } = await writeOciArchive({
    layoutDir: path.join(work, 'layout'), out: archiveTmp, tag, name, epoch, arch: debArch,
    layers: [
      { tar: debian.tar, createdBy: `mmdebstrap --variant=essential --include=${debian.packages.length} packages (image/debian-packages.txt)` },
      { tar: nodeLayer, createdBy: `node runtime ${staged.node.pin.spec} -> /usr/local/bin/node` },
      { tar: depsLayer, createdBy: 'npm ci --omit=dev -> /app/node_modules' },
      { tar: appLayer, createdBy: 'eni-ipam dist, proto, config, bin/ipamd -> /app' },
    ],
    ...IMAGE_CONFIG,
    labels: {
      'org.opencontainers.image.title': 'eni-ipam',
      'org.opencontainers.image.version': version,
      'org.opencontainers.image.licenses': 'Apache-2.0',
      'io.eni-ipam.node-runtime': staged.node.pin.spec,
    },
  });
  renameSync(archiveTmp, archive);
  const result = {
    archive, contents, sbomMeta, name, tag, manifestDigest, sizeBytes: statSync(archive).size, node: staged.node.pin.spec,
    seconds: Math.round((Date.now() - t0) / 100) / 10, inputs, upToDate: false,
    cached: { debian: debian.cached, node: staged.node.cached },
    ...(lock.drift ? { drift: lock.drift } : {}),
  };
  writeFileSync(`${summary}.tmp-${process.pid}`, `${JSON.stringify(result, null, 2)}\n`);
  renameSync(`${summary}.tmp-${process.pid}`, summary);
  return result;
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain && process.env.ENI_IPAM_IMAGE_BUILD_LOCKED !== '1') {
  // One build at a time per checkout (tests of parallel lanes, the cluster and `npm run image`
  // share build/image): run again under flock(1) on build/image/.build.lock; the one that waited
  // finds the image built (a no-op) or builds with its own inputs.
  mkdirSync(BUILD_DIR, { recursive: true });
  const r = spawnSync('flock', [path.join(BUILD_DIR, '.build.lock'), process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, ENI_IPAM_IMAGE_BUILD_LOCKED: '1' },
  });
  if (r.error) { process.stderr.write(`eni-ipam image: flock(1) could not run: ${r.error.message}\n`); process.exit(1); }
  process.exit(r.status ?? 1);
} else if (isMain) {
  const log = (l) => process.stderr.write(`eni-ipam image: ${l}\n`);
  try {
    let values;
    try {
      ({ values } = parseArgs({
        options: {
          'update-lock': { type: 'boolean', default: false },
          refresh: { type: 'boolean', default: false },
          'packages-file': { type: 'string' },
          'node-pin': { type: 'string' },
          'debian-drift': { type: 'string' },
          lock: { type: 'string' },
        },
      }));
    } catch (e) {
      throw new ImageBuildError(/** @type {Error} */ (e).message.split('\n')[0]);
    }
    const drift = values['debian-drift'] ?? 'fail';
    if (drift !== 'fail' && drift !== 'warn') throw new ImageBuildError(`--debian-drift '${drift}' is not one of fail, warn`);
    const r = await buildImage({ updateLock: values['update-lock'], refresh: values.refresh, packagesFile: values['packages-file'] && path.resolve(values['packages-file']), nodePinFile: values['node-pin'] && path.resolve(values['node-pin']), debianDrift: drift, lockFile: values.lock && path.resolve(values.lock), log });
    if (r.drift) log(`warning: ${r.drift}`);
    if (r.upToDate) { log(`${path.relative(process.cwd(), r.archive)} is up to date (${(r.sizeBytes / 1048576).toFixed(1)} MiB, ${r.name}, ${r.manifestDigest})`); process.exit(0); }
    log(`wrote ${path.relative(process.cwd(), r.archive)} (${(r.sizeBytes / 1048576).toFixed(1)} MiB, ${r.name}, ${r.manifestDigest}, node ${r.node}) in ${r.seconds} s`);
  } catch (e) {
    if (!(e instanceof ImageBuildError)) throw e;
    process.stderr.write(`eni-ipam image: ${e.message}\n`);
    process.exit(1);
  }
}
