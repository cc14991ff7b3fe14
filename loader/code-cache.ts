/**
 * V8 code cache for the one-file bundles of the CNI plugin (cni-plugin/cached-main.ts) and
 * ipamd (ipamd/bundle-loader.ts); Node 20 has no `module.enableCompileCache`, which came
 * in 22.1. The bundled CommonJS source is compiled with `vm.Script` and
 * `cachedData` read from a cache file, so V8 deserializes the functions compiled by an
 * earlier run instead of parsing and compiling them again (bench/cni-plugin-startup.ts
 * has the figures). Node API: https://nodejs.org/docs/latest-v20.x/api/vm.html
 * (`new vm.Script(code, { cachedData })`, `script.cachedDataRejected`,
 * `script.createCachedData()`).
 *
 * Validity: V8 itself rejects a cache made by another V8 version or other flags, or
 * that is corrupt; it only checks the *length* of the source, so the cache file name
 * carries a hash of the source (16 hex digits, computed at build time) and the V8 version. A missing,
 * unreadable or rejected cache only costs the normal compile; producing one is atomic
 * (temp file in the same directory + rename), so concurrent plugin runs are safe, and
 * silently skipped when the directory is not writable. A bundle whose source calls
 * `import()` must not be run from a cache on Node 20: code compiled from cached data has
 * no dynamic-import callback there (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING), so the
 * bundlers compile `import()` to `require()`.
 */
import { readFileSync, readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';

/** What happened to the cache in this run. */
export type CodeCacheState = 'off' | 'missing' | 'accepted' | 'rejected';

/** Caches larger than this (bytes) are ignored as garbage (the plugin's is ~200 KiB, ipamd's ~1.4 MiB). */
const MAX_CACHE_BYTES = 32 * 1024 * 1024;

/** Suffix of every cache file (used to find stale ones). */
const SUFFIX = '.v8cache';

/**
 * Path of the cache file of `pluginFile`, next to it: `<dir>/.<base>.<sourceHash>.<v8>.v8cache`
 * (hidden, so CNI bin dir listings stay clean). `sourceHash` identifies the bundled
 * source (hex, from the build); `v8Version` defaults to this process's V8.
 */
export function codeCachePath(pluginFile: string, sourceHash: string, v8Version: string = process.versions.v8): string {
  return path.join(
    path.dirname(pluginFile),
    `.${path.basename(pluginFile)}.${sourceHash}.${v8Version.replace(/[^0-9A-Za-z.-]/g, '_')}${SUFFIX}`,
  );
}

/** The CommonJS module context the bundled source runs in. */
export interface CjsContext {
  exports: unknown;
  require: NodeJS.Require;
  module: unknown;
  filename: string;
  dirname: string;
}

/** Options of {@link runWithCodeCache}. */
export interface CodeCacheOptions {
  /** The bundled CommonJS source (no shebang). */
  source: string;
  /** The plugin file: file name for stack traces, and whose stale cache files are removed. */
  filename: string;
  /** Cache file (see {@link codeCachePath}); undefined disables the cache. */
  cacheFile: string | undefined;
  /** Write the cache at process exit when it was missing or rejected (the plugin does so on ADD, its hot path). */
  produce: boolean;
}

/** Reads the cache file, or undefined when it is missing, unreadable or too large. */
function readCache(file: string): Buffer | undefined {
  try {
    const b = readFileSync(file);
    return b.length > 0 && b.length <= MAX_CACHE_BYTES ? b : undefined;
  } catch {
    return undefined;
  }
}

/** Cache files of `pluginFile` for any source hash (16 hex digits) and V8 version. */
function cacheFilePattern(pluginFile: string): RegExp {
  const base = path.basename(pluginFile).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^\\.${base}\\.[0-9a-f]{16}\\.[0-9A-Za-z._-]+\\${SUFFIX}$`);
}

/**
 * Writes `data` to `file` atomically; when `pluginFile` is given, also removes the other
 * cache files of that plugin (older builds or V8 versions) in the same directory.
 * Never throws.
 * @returns true when the cache file was written.
 */
export function writeCodeCache(file: string, data: Buffer, pluginFile?: string): boolean {
  const tmp = `${file}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, data, { mode: 0o644 });
    renameSync(tmp, file);
  } catch {
    try {
      unlinkSync(tmp);
    } catch {
      /* never created */
    }
    return false;
  }
  if (!pluginFile) return true;
  const dir = path.dirname(file);
  const mine = cacheFilePattern(pluginFile);
  try {
    for (const f of readdirSync(dir)) {
      if (f !== path.basename(file) && mine.test(f)) {
        try {
          unlinkSync(path.join(dir, f));
        } catch {
          /* raced with another run */
        }
      }
    }
  } catch {
    /* unreadable dir: stale files stay */
  }
  return true;
}

/** A compiled bundle: the script and its cache's state. */
export interface CompiledWithCache {
  script: vm.Script;
  state: CodeCacheState;
}

/**
 * Compiles `source` as a CommonJS module body (wrapped like Node's loader does) with the
 * code cache in `cacheFile` (none when undefined); `filename` names it in stack traces.
 * @throws SyntaxError for a broken build.
 */
export function compileWithCodeCache(
  source: string,
  filename: string,
  cacheFile: string | undefined,
): CompiledWithCache {
  const cachedData = cacheFile ? readCache(cacheFile) : undefined;
  const wrapped = `(function (exports, require, module, __filename, __dirname) { ${source}\n})`;
  const script = new vm.Script(wrapped, { filename, ...(cachedData ? { cachedData } : {}) });
  const state: CodeCacheState = !cacheFile
    ? 'off'
    : !cachedData
      ? 'missing'
      : script.cachedDataRejected
        ? 'rejected'
        : 'accepted';
  return { script, state };
}

/** Runs a script of {@link compileWithCodeCache} in `ctx` (the module body's top level). */
export function runCompiled(script: vm.Script, ctx: CjsContext): void {
  const fn = script.runInThisContext() as (e: unknown, r: NodeJS.Require, m: unknown, f: string, d: string) => void;
  fn.call(ctx.exports, ctx.exports, ctx.require, ctx.module, ctx.filename, ctx.dirname);
}

/**
 * Compiles `o.source` with the code cache ({@link compileWithCodeCache}) and runs it in
 * `ctx`. When `o.produce` and the cache was missing or rejected, the cache is written at
 * process exit (after the run compiled the functions it needed, so they are in it).
 * @returns the cache state of this run.
 * @throws whatever the module body throws synchronously (e.g. a SyntaxError for a broken build).
 */
export function runWithCodeCache(o: CodeCacheOptions, ctx: CjsContext): CodeCacheState {
  const { script, state } = compileWithCodeCache(o.source, o.filename, o.cacheFile);
  if (o.cacheFile && o.produce && (state === 'missing' || state === 'rejected')) {
    const file = o.cacheFile;
    process.once('exit', () => {
      writeCodeCache(file, script.createCachedData(), o.filename);
    });
  }
  runCompiled(script, ctx);
  return state;
}
