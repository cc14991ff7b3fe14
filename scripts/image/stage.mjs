#!/usr/bin/env node
/**
 * Stages what the image adds on top of Debian, as a directory tree laid out like the
 * image's root (the ONE staging step both image builds use: `npm run image` packs it into
 * OCI layers, the Dockerfile COPYs it):
 *
 *   usr/local/bin/node               the pinned Node runtime (scripts/image/node-runtime.mjs)
 *   usr/local/share/doc/node/LICENSE
 *   app/package.json, app/package-lock.json
 *   app/node_modules/                production dependencies only (npm ci --omit=dev), without
 *                                    type declarations and source maps (*.d.ts, *.map: ~50 MiB
 *                                    Node never loads)
 *   app/dist/{ipamd,cni-plugin,netfacts,loader,proto,cli}/  the built daemon, the static shim, the Node plugin, shared networking facts, the V8 code-cache loader, the operator CLI
 *   app/dist/ipamd/.ipamd.bundle.cjs.*.v8cache       the code cache of ipamd's bundle, made by the image's node
 *   app/proto/                       .proto files ipamd loads at run time
 *   app/config/                      the conflist template and the env example
 *   app/bin/ipamd                    entrypoint: exec /usr/local/bin/node <V8 flags> /app/dist/ipamd/main.js (which loads ipamd.bundle.cjs) "$@"
 *   app/bin/eni-ipam                 the operator CLI (kubectl exec ... -- /app/bin/eni-ipam status)
 *
 * Needs a built tree (`npm run build`). The production node_modules is cached under
 * build/image/cache keyed by package.json + package-lock.json.
 *
 * CLI: `node scripts/image/stage.mjs [--out DIR] [--arch x64|arm64]` (default
 * build/image/stage, this machine's architecture); prints the staged dir.
 */
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BUILD_DIR, ImageBuildError, ROOT, pruneCache, run, sha256, withRetries } from './common.mjs';
import { fetchNodeRuntime, readNodePin } from './node-runtime.mjs';
import { makeIpamdCodeCache } from '../bundle-ipamd.mjs';

/** Default staging dir. */
export const STAGE_DIR = path.join(BUILD_DIR, 'stage');

/** The dist/ subtrees needed at run time: ipamd, the plugin, and the operator CLI (nothing from dist/sim, dist/test...). */
const DIST_DIRS = ['ipamd', 'cni-plugin', 'netfacts', 'loader', 'nodefs', 'proto', 'cli'];

/** Files of npm packages Node never loads at run time: type declarations and source maps. */
const NOT_LOADED = /\.(d\.[cm]?ts|map)$/;

/** The entrypoint script (/app/bin/ipamd). */
const ENTRYPOINT = '#!/bin/sh\n# eni-ipam image entrypoint: ipamd on the image\'s Node runtime.\n# A small resident set (see dist/ipamd/v8-flags.js): glibc malloc gives freed memory back, V8 flags (refused in NODE_OPTIONS).\nexport MALLOC_ARENA_MAX=1 MALLOC_TRIM_THRESHOLD_=65536 MALLOC_MMAP_THRESHOLD_=65536\nexec /usr/local/bin/node --max-semi-space-size=1 --max-old-space-size=128 /app/dist/ipamd/main.js "$@"\n';

/** The operator CLI's wrapper (/app/bin/eni-ipam). */
const CLI_ENTRYPOINT = '#!/bin/sh\n# eni-ipam operator CLI on the image\'s Node runtime.\nexec /usr/local/bin/node /app/dist/cli/main.js "$@"\n';

/**
 * Installs the production dependencies into `<appDir>/node_modules` (from the cache when
 * package.json and package-lock.json are unchanged).
 * @param {string} appDir staged app dir holding package.json and package-lock.json
 * @param {(line: string) => void} [log]
 * @returns {Promise<boolean>} true when taken from the cache
 * @throws ImageBuildError when npm cannot fetch a package
 */
async function installProductionDeps(appDir, log) {
  const key = sha256(readFileSync(path.join(appDir, 'package.json')), readFileSync(path.join(appDir, 'package-lock.json'))).slice(0, 16);
  const cached = path.join(BUILD_DIR, 'cache', `node_modules-${key}`);
  const hit = existsSync(cached);
  if (!hit) {
    log?.('npm ci --omit=dev');
    const tmp = `${cached}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    cpSync(path.join(appDir, 'package.json'), path.join(tmp, 'package.json'));
    cpSync(path.join(appDir, 'package-lock.json'), path.join(tmp, 'package-lock.json'));
    try {
      await withRetries('npm ci --omit=dev', () => run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'],
        { cwd: tmp, what: 'fetch the npm production dependencies (npm ci --omit=dev, package-lock.json)' }), { log });
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
    rmSync(path.join(tmp, 'package.json'));
    rmSync(path.join(tmp, 'package-lock.json'));
    renameSync(tmp, cached);
    pruneCache(path.dirname(cached), 'node_modules-', path.basename(cached));
  }
  cpSync(path.join(cached, 'node_modules'), path.join(appDir, 'node_modules'), { recursive: true, verbatimSymlinks: true, filter: (src) => !NOT_LOADED.test(src) });
  return hit;
}

/**
 * Stages the image's own files (see the file comment for the layout).
 * @param {{ out?: string, arch: string, pinFile?: string, log?: (line: string) => void }} o
 *   out: staging dir, emptied first (default build/image/stage); arch: process.arch spelling;
 *   pinFile: Node runtime pin (default image/node-runtime.json)
 * @returns {Promise<{ dir: string, node: Awaited<ReturnType<typeof fetchNodeRuntime>> }>}
 * @throws ImageBuildError when the tree is not built, or a package cannot be fetched
 */
export async function stage(o) {
  const dir = o.out ?? STAGE_DIR;
  for (const d of DIST_DIRS) {
    if (!existsSync(path.join(ROOT, 'dist', d))) throw new ImageBuildError(`dist/${d} is missing: build first (npm run build)`);
  }
  if (!existsSync(path.join(ROOT, 'dist', 'cni-plugin', 'eni-ipam'))) {
    throw new ImageBuildError('dist/cni-plugin/eni-ipam (the static shim) is missing: build first (npm run build; needs gcc and libc6-dev)');
  }
  const node = await fetchNodeRuntime({ arch: o.arch, pin: readNodePin(o.arch, o.pinFile), log: o.log });
  rmSync(dir, { recursive: true, force: true });
  const app = path.join(dir, 'app');
  mkdirSync(path.join(dir, 'usr', 'local', 'bin'), { recursive: true });
  mkdirSync(path.join(dir, 'usr', 'local', 'share', 'doc', 'node'), { recursive: true });
  cpSync(node.node, path.join(dir, 'usr', 'local', 'bin', 'node'));
  chmodSync(path.join(dir, 'usr', 'local', 'bin', 'node'), 0o755);
  cpSync(node.license, path.join(dir, 'usr', 'local', 'share', 'doc', 'node', 'LICENSE'));

  mkdirSync(path.join(app, 'bin'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(ROOT, f), path.join(app, f));
  await installProductionDeps(app, o.log);
  for (const d of DIST_DIRS) {
    // V8 code caches are made for one node binary: the host's are left out (the plugin makes its own on the node).
    cpSync(path.join(ROOT, 'dist', d), path.join(app, 'dist', d), { recursive: true, filter: (src) => !/\.(map|v8cache)$/.test(src) });
  }
  // ipamd's code cache, made by the image's node (same bytes on every build: scripts/bundle-ipamd.mjs).
  if (o.arch === process.arch) {
    const c = await makeIpamdCodeCache({ node: node.node, bundle: path.join(app, 'dist', 'ipamd', 'ipamd.bundle.cjs') });
    o.log?.(`ipamd code cache ${path.basename(c.file)} (${Math.round(c.bytes / 1024)} KiB)`);
  } else {
    o.log?.(`no ipamd code cache: the image's node (${o.arch}) does not run here; ipamd compiles its bundle at start`);
  }
  // Compiled modules are data to node: 0644 whatever npm did to the package's bin targets in
  // this checkout (npm chmods them +x when they exist at install time), so the lock is stable.
  for (const f of readdirSync(path.join(app, 'dist'), { recursive: true, withFileTypes: true })) {
    if (f.isFile() && f.name.endsWith('.js')) chmodSync(path.join(f.parentPath ?? f.path, f.name), 0o644);
  }
  cpSync(path.join(ROOT, 'proto'), path.join(app, 'proto'), { recursive: true, filter: (src) => !/\.ts$/.test(src) });
  cpSync(path.join(ROOT, 'config'), path.join(app, 'config'), { recursive: true });
  writeFileSync(path.join(app, 'bin', 'ipamd'), ENTRYPOINT, { mode: 0o755 });
  chmodSync(path.join(app, 'bin', 'ipamd'), 0o755);
  writeFileSync(path.join(app, 'bin', 'eni-ipam'), CLI_ENTRYPOINT, { mode: 0o755 });
  chmodSync(path.join(app, 'bin', 'eni-ipam'), 0o755);
  if (readdirSync(path.join(app, 'node_modules')).length === 0) throw new ImageBuildError('npm ci --omit=dev installed nothing');
  return { dir, node };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string' }, arch: { type: 'string', default: process.arch } } });
  try {
    const r = await stage({ out: values.out && path.resolve(values.out), arch: values.arch, log: (l) => process.stderr.write(`eni-ipam image: ${l}\n`) });
    process.stdout.write(`${r.dir}\n`);
  } catch (e) {
    if (!(e instanceof ImageBuildError)) throw e;
    process.stderr.write(`eni-ipam image: ${e.message}\n`);
    process.exit(1);
  }
}
