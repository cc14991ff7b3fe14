#!/usr/bin/env node
/**
 * Bundles the CNI plugin into ONE CommonJS file, dist/cni-plugin/eni-ipam.cjs
 * (`#!/usr/bin/env node`, mode 0755, node20, minified). Runs after tsc in `npm run build`.
 * First refreshes cni-plugin/generated/ipam-codec.ts (the static codec the plugin uses,
 * scripts/gen-ipam-codec.mjs) and ipam-descriptor.ts (scripts/gen-ipam-descriptor.mjs)
 * from proto/ipam.proto when they are stale.
 *
 * Two stages (what won in bench/cni-plugin-startup.ts):
 * 1. the inner bundle: cni-plugin/main.ts and everything it imports (protobufjs/minimal
 *    under the generated codec, zod/mini; gRPC is spoken over node:http2 by
 *    cni-plugin/grpc-http2.ts);
 * 2. the outer file: cni-plugin/cached-main.ts with the inner bundle embedded as a
 *    string, run through a V8 code cache kept next to the plugin file
 *    (loader/code-cache.ts). With `--no-code-cache` the inner bundle is written as
 *    is (what the bench compares against).
 *
 * 3. the native shim, dist/cni-plugin/eni-ipam (cni-plugin/shim/*.c, gcc -O2, linked
 *    statically when libc.a is installed so it runs on any Linux host, with the CNI
 *    versions of cni-plugin/versions.ts compiled in): the binary installed as the CNI
 *    plugin; it forwards to ipamd's exec socket and answers on its own when ipamd
 *    cannot take the call (it needs no Node.js).
 *
 * CLI: `node scripts/bundle-plugin.mjs [--no-code-cache] [--outfile PATH]`. Prints the
 * output sizes; exits non-zero on any esbuild or gcc error. The shim is built only
 * without --outfile. Exported for the benchmarks: `bundlePlugin(options)`, `buildShim(options)`.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { CODEC_PATH, writeIpamCodec } from './gen-ipam-codec.mjs';
import { DESCRIPTOR_PATH, writeIpamDescriptor } from './gen-ipam-descriptor.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
/** Where `npm run build` writes the plugin. */
export const DEFAULT_OUTFILE = `${root}dist/cni-plugin/eni-ipam.cjs`;
const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));

/** esbuild plugin: resolves `./ipamd-client.js` (imported by the verb handlers) to `file`. */
function replaceIpamdClient(file) {
  return {
    name: 'replace-ipamd-client',
    setup(b) {
      b.onResolve({ filter: /^\.\/ipamd-client\.js$/ }, () => ({ path: file }));
    },
  };
}

/**
 * Builds the plugin.
 * @param {object} [o]
 * @param {string} [o.outfile] output path (default dist/cni-plugin/eni-ipam.cjs); its directory is created.
 * @param {boolean} [o.codeCache] wrap in the V8 code-cache loader (default true).
 * @param {string} [o.ipamdClient] absolute path of a module to use instead of
 *   cni-plugin/ipamd-client.ts (same exports), for benchmarking other transports.
 * @returns {Promise<{ outfile: string, bytes: number, innerBytes: number, sourceHash: string }>}
 * @throws the esbuild error when bundling fails.
 */
export async function bundlePlugin(o = {}) {
  const outfile = path.resolve(o.outfile ?? DEFAULT_OUTFILE);
  const codeCache = o.codeCache ?? true;
  const inner = await build({
    entryPoints: [`${root}cni-plugin/main.ts`],
    bundle: true,
    write: false,
    outfile,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // `import()` as `require()`: code run from a V8 code cache cannot import() on Node 20 (loader/code-cache.ts).
    supported: { 'dynamic-import': false },
    minify: true,
    legalComments: 'eof',
    logLevel: 'warning',
    plugins: o.ipamdClient ? [replaceIpamdClient(path.resolve(o.ipamdClient))] : [],
    // `import.meta.url` (used by proto/ipam.ts for IPAM_PROTO_PATH) has no CJS equivalent:
    // point it at the plugin file itself so module evaluation cannot throw.
    banner: { js: 'const __eniIpamImportMetaUrl = require("url").pathToFileURL(__filename).href;' },
    define: {
      'import.meta.url': '__eniIpamImportMetaUrl',
      'process.env.ENI_IPAM_BUILD_VERSION': JSON.stringify(version),
    },
  });
  const innerSource = inner.outputFiles[0].text;
  const sourceHash = createHash('sha256').update(innerSource).digest('hex').slice(0, 16);
  let text;
  if (!codeCache) {
    text = `#!/usr/bin/env node\n${innerSource}`;
  } else {
    const outer = await build({
      entryPoints: [`${root}cni-plugin/cached-main.ts`],
      bundle: true,
      write: false,
      outfile,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      minify: true,
      legalComments: 'none',
      logLevel: 'warning',
      banner: { js: '#!/usr/bin/env node' },
      define: {
        __ENI_IPAM_PLUGIN_SOURCE__: JSON.stringify(innerSource),
        __ENI_IPAM_PLUGIN_SOURCE_HASH__: JSON.stringify(sourceHash),
      },
    });
    text = outer.outputFiles[0].text;
  }
  mkdirSync(path.dirname(outfile), { recursive: true });
  writeFileSync(outfile, text);
  chmodSync(outfile, 0o755);
  return { outfile, bytes: statSync(outfile).size, innerBytes: Buffer.byteLength(innerSource), sourceHash };
}

/**
 * The CNI versions of cni-plugin/versions.ts (SUPPORTED_VERSIONS, LATEST_VERSION), read
 * from its source so the shim's VERSION answer comes from the same one list.
 * @returns {{ supported: string[], latest: string }}
 * @throws Error when versions.ts no longer has the two constants in the expected shape.
 */
export function cniVersions() {
  const src = readFileSync(`${root}cni-plugin/versions.ts`, 'utf8');
  const list = /SUPPORTED_VERSIONS:[^=]*=\s*\[([^\]]*)\]/.exec(src);
  const latest = /LATEST_VERSION\s*=\s*'([0-9.]+)'/.exec(src);
  const supported = list ? [...list[1].matchAll(/'([0-9.]+)'/g)].map((m) => m[1]) : [];
  if (!latest || supported.length === 0)
    throw new Error('bundle-plugin: cannot read SUPPORTED_VERSIONS / LATEST_VERSION from cni-plugin/versions.ts');
  return { supported, latest: latest[1] };
}

/** Where `npm run build` writes the shim (beside the Node plugin it falls back to). */
export const DEFAULT_SHIM_OUTFILE = `${root}dist/cni-plugin/eni-ipam`;

/**
 * Compiles the native shim with gcc (static when the C library's libc.a is installed),
 * and ipamd's netlink wiring helper (cni-plugin/netlink) beside it as `eni-ipam-netlink` and
 * its spawn helper (ipamd/cni-exec/spawn) as `eni-ipam-spawn`, and the DaemonSet's probe
 * (ipamd/probe) as `eni-ipam-probe`.
 * @param {object} [o]
 * @param {string} [o.outfile] output path (default dist/cni-plugin/eni-ipam), written via temp file + rename.
 * @returns {{ outfile: string, bytes: number, static: boolean }}
 * @throws Error with gcc's message when it fails or is missing (scripts/ensure-deps.sh installs it).
 */
export function buildShim(o = {}) {
  const outfile = path.resolve(o.outfile ?? DEFAULT_SHIM_OUTFILE);
  mkdirSync(path.dirname(outfile), { recursive: true });
  let libcA = '';
  try {
    libcA = execFileSync('gcc', ['-print-file-name=libc.a'], { encoding: 'utf8' }).trim();
  } catch (e) {
    throw new Error(
      `bundle-plugin: gcc is needed to build the CNI shim (bash scripts/ensure-deps.sh installs gcc and libc6-dev): ${e.message}`,
    );
  }
  const isStatic = libcA.startsWith('/') && existsSync(libcA);
  const v = cniVersions();
  const defines = [
    `-DENI_IPAM_VERSIONS=${JSON.stringify(v.supported.map((x) => JSON.stringify(x)).join(','))}`,
    `-DENI_IPAM_LATEST_VERSION=${JSON.stringify(v.latest)}`,
  ];
  const flags = isStatic ? ['-static'] : [];
  buildC(`${root}cni-plugin/shim`, outfile, [...defines, ...flags]);
  // ipamd's rtnetlink wiring helper (cni-plugin/netlink), beside the shim.
  buildC(`${root}cni-plugin/netlink`, path.join(path.dirname(outfile), 'eni-ipam-netlink'), flags);
  // ipamd's spawn helper (ipamd/cni-exec/spawn): starts ipamd's `ip` children so ipamd does not fork.
  buildC(`${root}ipamd/cni-exec/spawn`, path.join(path.dirname(outfile), 'eni-ipam-spawn'), flags);
  // The DaemonSet's probe (ipamd/probe): gRPC health without starting Node.
  buildC(`${root}ipamd/probe`, path.join(path.dirname(outfile), 'eni-ipam-probe'), flags);
  return { outfile, bytes: statSync(outfile).size, static: isStatic };
}

/**
 * Compiles every `.c` file of `dir` (sorted) with gcc -O2 and all warnings as errors, plus
 * `args`, into `out` (written beside it, then renamed into place, mode 0755).
 * @throws Error when gcc fails (its output goes to stderr).
 */
function buildC(dir, out, args) {
  const sources = readdirSync(dir)
    .filter((f) => f.endsWith('.c'))
    .sort()
    .map((f) => `${dir}/${f}`);
  const tmp = `${out}.tmp-${process.pid}`;
  execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', ...args, '-o', tmp, ...sources], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  chmodSync(tmp, 0o755);
  renameSync(tmp, out);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { values } = parseArgs({
    options: { 'no-code-cache': { type: 'boolean', default: false }, outfile: { type: 'string' } },
  });
  if (writeIpamDescriptor())
    console.error(`bundle-plugin: ${DESCRIPTOR_PATH} was stale and has been regenerated (re-run tsc for dist/)`);
  if (writeIpamCodec())
    console.error(`bundle-plugin: ${CODEC_PATH} was stale and has been regenerated (re-run tsc for dist/)`);
  const r = await bundlePlugin({ outfile: values.outfile, codeCache: !values['no-code-cache'] });
  console.error(
    `bundle-plugin: wrote ${r.outfile} (${Math.round(r.bytes / 1024)} KiB${values['no-code-cache'] ? '' : `, V8 code cache loader, source ${r.sourceHash}`})`,
  );
  if (!values.outfile) {
    const s = buildShim();
    console.error(
      `bundle-plugin: wrote ${s.outfile} (${Math.round(s.bytes / 1024)} KiB, ${s.static ? 'static' : 'dynamic: libc.a not found'})`,
    );
  }
}
