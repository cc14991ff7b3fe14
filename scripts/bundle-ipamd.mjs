#!/usr/bin/env node
/**
 * Bundles ipamd into ONE CommonJS file, dist/ipamd/ipamd.bundle.cjs (ipamd/bundle-loader.ts
 * loads it with a V8 code cache; dist/ipamd/main.js runs it). Runs
 * last in `npm run build`, after tsc and bundle-vendor (the bundle is made from dist/: the
 * vendor doors are already tree-shaken there).
 *
 * - Entry: dist/ipamd/ipamd-main.js (exports `runIpamd`) and everything it imports,
 *   node_modules included; node built-ins stay `require`s, and so does pino-pretty (loaded
 *   through createRequire for the pretty log format only).
 * - Paths: a module that finds a file relative to itself (`import.meta.url` in ours,
 *   `__dirname`/`__filename` in CommonJS packages: .proto files, the CNI binaries, a
 *   package.json) gets the path of the file it was bundled from, relative to the bundle,
 *   so it finds what it found before, wherever dist/ is installed.
 * - Whitespace and syntax minified, identifiers kept (stack traces keep function names).
 * - First line `// eni-ipamd bundle <hash>`: the sha256 of the rest (16 hex digits), which
 *   names the code cache file.
 * - Code cache: made by a node started with the entrypoint's V8 flags (IPAMD_NODE_FLAGS)
 *   and `--random-seed=1` (the same bytes on every build; V8 does not check that flag when
 *   it loads a cache), which evaluates the bundle's top level; then a node with the
 *   entrypoint's flags alone must accept it, or the build fails. Older caches are removed.
 *
 * CLI: `node scripts/bundle-ipamd.mjs`. Prints the sizes. Exported for the image build:
 * `bundleIpamd(options)`, `makeIpamdCodeCache(options)` (the image's node makes its own).
 */
import { createHash } from 'node:crypto';
import { readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
/** Where `npm run build` writes the bundle. */
export const IPAMD_BUNDLE = path.join(root, 'dist', 'ipamd', 'ipamd.bundle.cjs');

/** A module's own path as the bundle computes it at run time (relative to the bundle's dir). */
function relFromBundle(bundleDir, p) {
  return JSON.stringify(path.relative(bundleDir, p).split(path.sep).join('/'));
}

/**
 * esbuild plugin: rewrites each module's `import.meta.url` (ES modules) and `__dirname` /
 * `__filename` (CommonJS modules under node_modules) to the location of the file it was
 * bundled from, computed from the bundle's own `__dirname` at run time.
 */
function ownPathsPlugin(bundleDir) {
  return {
    name: 'own-paths',
    setup(b) {
      b.onLoad({ filter: /\.(c|m)?js$/ }, async (a) => {
        let src = await readFile(a.path, 'utf8');
        const file = relFromBundle(bundleDir, a.path);
        if (src.includes('import.meta.url')) src = src.replaceAll('import.meta.url', `__eniIpamdFileUrl(${file})`);
        if (a.path.includes(`${path.sep}node_modules${path.sep}`)) {
          const dir = relFromBundle(bundleDir, path.dirname(a.path));
          src = src
            .replace(/(?<![.\w$])__dirname\b/g, `__eniIpamdPath(${dir})`)
            .replace(/(?<![.\w$])__filename\b/g, `__eniIpamdPath(${file})`);
        }
        return { contents: src, loader: 'js' };
      });
    },
  };
}

const BANNER = [
  'const __eniIpamdPath = (rel) => require("node:path").join(__dirname, rel);',
  'const __eniIpamdFileUrl = (rel) => require("node:url").pathToFileURL(__eniIpamdPath(rel)).href;',
].join('\n');

/**
 * Bundles ipamd.
 * @param {{ outfile?: string }} [o] default dist/ipamd/ipamd.bundle.cjs (its directory must
 *   be dist/ipamd: the paths are computed relative to it)
 * @returns {Promise<{ outfile: string, bytes: number, sourceHash: string, inputs: number }>}
 * @throws the esbuild error when bundling fails
 */
export async function bundleIpamd(o = {}) {
  const outfile = path.resolve(o.outfile ?? IPAMD_BUNDLE);
  const bundleDir = path.dirname(outfile);
  const r = await build({
    entryPoints: [path.join(root, 'dist', 'ipamd', 'ipamd-main.js')],
    bundle: true,
    write: false,
    outfile,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // `import()` as `require()`: code compiled from a V8 code cache has no dynamic-import
    // callback in Node 20 (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING); the SDK imports node: built-ins so.
    supported: { 'dynamic-import': false },
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    logLevel: 'warning',
    // @kubernetes/client-node's zod copy compares with -0 on purpose.
    logOverride: { 'equals-negative-zero': 'silent' },
    metafile: true,
    external: ['pino-pretty'],
    banner: { js: BANNER },
    plugins: [ownPathsPlugin(bundleDir)],
  });
  const source = r.outputFiles[0].text;
  const sourceHash = createHash('sha256').update(source).digest('hex').slice(0, 16);
  const tmp = `${outfile}.tmp-${process.pid}`;
  await writeFile(tmp, `// eni-ipamd bundle ${sourceHash}\n${source}`, { mode: 0o644 });
  await rename(tmp, outfile);
  return { outfile, bytes: (await stat(outfile)).size, sourceHash, inputs: Object.keys(r.metafile.inputs).length };
}

/** The seed the cache-making node runs with (see the file comment). */
const CACHE_RANDOM_SEED = '--random-seed=1';

/**
 * Makes the bundle's code cache with `node` (default this one) under the entrypoint's V8
 * flags, then checks that a node with those flags alone accepts it.
 * @param {{ node?: string, bundle?: string, flags?: string[] }} [o] `bundle` defaults to
 *   dist/ipamd/ipamd.bundle.cjs; its dir's bundle-loader.js does the work; `flags` default to
 *   IPAMD_NODE_FLAGS of that dir's v8-flags.js
 * @returns {Promise<{ file: string, bytes: number }>} the cache file
 * @throws Error when a node run fails or the check does not accept the cache
 */
export async function makeIpamdCodeCache(o = {}) {
  const bundle = path.resolve(o.bundle ?? IPAMD_BUNDLE);
  const dir = path.dirname(bundle);
  const flags = o.flags ?? (await import(pathToFileURL(path.join(dir, 'v8-flags.js')).href)).IPAMD_NODE_FLAGS;
  const script = `import(${JSON.stringify(pathToFileURL(path.join(dir, 'bundle-loader.js')).href)}).then((m) => {
    process.stdout.write(JSON.stringify(m.produceIpamdCodeCache(${JSON.stringify(bundle)})));
    process.exit(0);
  });`;
  const run = (extra) =>
    JSON.parse(
      execFileSync(o.node ?? process.execPath, [...flags, ...extra, '--input-type=module', '-e', script], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
  const made = run([CACHE_RANDOM_SEED]);
  const check = made.state === 'accepted' ? made : run([]);
  if (check.state !== 'accepted')
    throw new Error(`bundle-ipamd: ${o.node ?? 'node'} did not accept the code cache it made (${check.state})`);
  return { file: check.file, bytes: (await stat(check.file)).size };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const b = await bundleIpamd();
  const c = await makeIpamdCodeCache();
  console.log(
    `bundle-ipamd: wrote ${path.relative(root, b.outfile)} (${Math.round(b.bytes / 1024)} KiB, ${b.inputs} modules) and its code cache ${path.basename(c.file)} (${Math.round(c.bytes / 1024)} KiB)`,
  );
}
