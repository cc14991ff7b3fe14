/**
 * Loads ipamd from its one-file CommonJS bundle, dist/ipamd/ipamd.bundle.cjs (written by
 * scripts/bundle-ipamd.mjs), through the V8 code cache beside it. Loading ipamd's ~500 ES
 * modules one by one (resolve, stat, read, compile each) was most of a restart's time on
 * a 2 vCPU node; one file compiled from a code cache skips the resolution and the parse
 * (figures: bench/ipamd-rss, docs/design.md#16-footprint-and-latency).
 *
 * The cache is made at build time (`npm run build` with this machine's node, the image
 * build with the image's), by a node started with the entrypoint's V8 flags
 * (v8-flags.ts IPAMD_NODE_FLAGS: V8 rejects a cache made under other flags) and a fixed
 * `--random-seed` (which V8 leaves out of the cache's flag check; with it the cache's
 * bytes are the same on every build, so the image stays reproducible). Its file name
 * carries the bundle's source hash and the V8 version (loader/code-cache.ts
 * `codeCachePath`). ipamd never writes it: a missing, stale or rejected cache only costs
 * the normal compile, and the start-up log line says which it was.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Script } from 'node:vm';
import {
  codeCachePath,
  compileWithCodeCache,
  runCompiled,
  writeCodeCache,
  type CodeCacheState,
} from '../loader/code-cache.js';
import type { ModulesLoaded } from './ipamd-main.js';

/** Where the build writes the bundle: beside this module. */
export const IPAMD_BUNDLE_PATH = fileURLToPath(new URL('./ipamd.bundle.cjs', import.meta.url));

/** The bundle's first line: `// eni-ipamd bundle <sha256 of the rest, first 16 hex digits>`. */
export const BUNDLE_HEADER = /^\/\/ eni-ipamd bundle ([0-9a-f]{16})\n/;

/** A bundle read from disk: its code (header line removed) and that code's hash. */
export interface IpamdBundle {
  file: string;
  source: string;
  sourceHash: string;
}

/** What the bundle exports (its entry is ipamd-main.ts). */
interface BundleExports {
  runIpamd: (loaded?: ModulesLoaded) => Promise<void>;
}

/**
 * Reads the bundle.
 * @returns undefined when `file` does not exist (a build without it: plain `tsc`).
 * @throws Error when the file cannot be read or lacks the header (not a bundle this build wrote).
 */
export function readIpamdBundle(file: string = IPAMD_BUNDLE_PATH): IpamdBundle | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  const m = BUNDLE_HEADER.exec(text);
  if (!m) throw new Error(`${file}: no "// eni-ipamd bundle <hash>" first line; rebuild it (npm run build)`);
  return { file, source: text.slice(m[0].length), sourceHash: m[1]! };
}

/** The code cache file of bundle `b` (beside it) for this process's V8. */
export function ipamdCodeCachePath(b: IpamdBundle): string {
  return codeCachePath(b.file, b.sourceHash);
}

/**
 * Compiles bundle `b` with its code cache and evaluates its top level (nothing starts).
 * @returns its `runIpamd`, how it was loaded, and the compiled script (to make a cache from).
 * @throws whatever the bundle's top level throws (a broken build), or Error when it lacks runIpamd.
 */
export function loadIpamdBundle(b: IpamdBundle): {
  runIpamd: BundleExports['runIpamd'];
  loaded: ModulesLoaded;
  script: Script;
} {
  const codeCacheFile = ipamdCodeCachePath(b);
  const { script, state } = compileWithCodeCache(b.source, b.file, codeCacheFile);
  const module = { exports: {} as BundleExports };
  runCompiled(script, {
    exports: module.exports,
    require: createRequire(b.file),
    module,
    filename: b.file,
    dirname: path.dirname(b.file),
  });
  if (typeof module.exports.runIpamd !== 'function')
    throw new Error(`${b.file} does not export runIpamd; rebuild it (npm run build)`);
  return { runIpamd: module.exports.runIpamd, loaded: { from: 'bundle', codeCache: state, codeCacheFile }, script };
}

/**
 * Runs ipamd: from the bundle when the build wrote one, else from the ES modules.
 * @returns once ipamd serves (ipamd-main.ts `runIpamd` exits the process on a failed start).
 */
export async function startIpamd(bundleFile: string = IPAMD_BUNDLE_PATH): Promise<void> {
  const b = readIpamdBundle(bundleFile);
  if (!b) {
    const m = await import('./ipamd-main.js');
    return m.runIpamd({ from: 'modules', codeCache: 'off' });
  }
  const { runIpamd, loaded } = loadIpamdBundle(b);
  return runIpamd(loaded);
}

/**
 * Build step (scripts/bundle-ipamd.mjs runs it in a node with the flags the cache is for):
 * evaluates the bundle and, unless its cache was accepted, writes one from what the
 * evaluation compiled, removing the bundle's older caches.
 * @returns the cache's state before this call ('accepted': it was there and valid) and its file.
 * @throws Error when the bundle is missing or the cache cannot be written.
 */
export function produceIpamdCodeCache(bundleFile: string = IPAMD_BUNDLE_PATH): { state: CodeCacheState; file: string } {
  const b = readIpamdBundle(bundleFile);
  if (!b) throw new Error(`${bundleFile} does not exist: run npm run build`);
  const { loaded, script } = loadIpamdBundle(b);
  const file = loaded.codeCacheFile!;
  if (loaded.codeCache !== 'accepted' && !writeCodeCache(file, script.createCachedData(), b.file))
    throw new Error(`cannot write the code cache ${file}`);
  return { state: loaded.codeCache, file };
}
