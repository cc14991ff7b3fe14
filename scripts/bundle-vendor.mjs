#!/usr/bin/env node
/**
 * Replaces the compiled output of ipamd's two library doors with tree-shaken, minified
 * esbuild bundles of the same exports, so ipamd parses and keeps only the parts of the
 * libraries it uses (resident memory: docs/design.md#16-footprint-and-latency). Runs after
 * tsc in `npm run build`:
 *
 * - ipamd/cloud/ec2-sdk.ts → dist/ipamd/cloud/ec2-sdk.js (@aws-sdk/client-ec2: the client
 *   and ipamd's commands, from the SDK's ES modules);
 * - ipamd/kube/client.ts → dist/ipamd/kube/client.js (@kubernetes/client-node: KubeConfig,
 *   Watch, CoreV1Api...).
 *
 * The SDK's schema file declares ~3,400 request/response schemas as array literals with
 * computed keys (`{ [_xN]: _TSa }`, where `_xN` is a string constant of the same file);
 * esbuild keeps any statement with a computed key (it may run code), so none would be
 * dropped. {@link inlineSchemaKeys} writes those keys as the string literals they stand
 * for, which makes unused schemas droppable. It fails the build when a key is not a
 * string constant of the file, or when no key was found (a changed SDK layout must be
 * looked at, not silently bundled whole).
 *
 * Bundled with the libraries' dependencies (node built-ins stay imports; `require` of a
 * built-in by CommonJS code inside works through createRequire). Output ESM, node20.
 * CLI: `node scripts/bundle-vendor.mjs`. Prints each output's size; exits non-zero on any
 * esbuild error. Exported for tests and benches: `bundleVendor(options)`.
 */
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The doors: TypeScript entry (relative to the repo) → compiled file it replaces. */
export const VENDOR_BUNDLES = [
  { entry: 'ipamd/cloud/ec2-sdk.ts', outfile: 'dist/ipamd/cloud/ec2-sdk.js' },
  { entry: 'ipamd/kube/client.ts', outfile: 'dist/ipamd/kube/client.js' },
];

/** The SDK's schema modules (dist-es/schemas/schemas_N.js of client-ec2). */
const SCHEMA_FILE = /@aws-sdk[\\/]client-ec2[\\/]dist-es[\\/]schemas[\\/]schemas_\d+\.js$/;

/**
 * Rewrites `[_name]:` object keys to the string literal `_name` is declared as
 * (`const _name = "...";` in the same source).
 * @param {string} src the module's source
 * @param {string} file its path, for errors
 * @returns {{ contents: string, keys: number }} the rewritten source and how many keys were inlined
 * @throws Error when a computed key is not a string constant of the file
 */
export function inlineSchemaKeys(src, file) {
  const consts = new Map();
  for (const m of src.matchAll(/^const (_\w+) = ("[^"\\\n]*");$/gm)) consts.set(m[1], m[2]);
  let keys = 0;
  const contents = src.replace(/\[(_\w+)\]:/g, (_all, id) => {
    const v = consts.get(id);
    if (v === undefined) throw new Error(`${file}: computed key [${id}] is not a string constant of the file`);
    keys++;
    return `${v}:`;
  });
  return { contents, keys };
}

/** esbuild plugin applying {@link inlineSchemaKeys} to the SDK's schema modules. */
const schemaKeysPlugin = {
  name: 'ec2-schema-keys',
  setup(b) {
    b.onLoad({ filter: SCHEMA_FILE }, async (a) => {
      const { contents, keys } = inlineSchemaKeys(await readFile(a.path, 'utf8'), a.path);
      if (keys === 0) throw new Error(`${a.path}: no computed schema keys found; has the SDK's layout changed?`);
      return { contents, loader: 'js' };
    });
  },
};

/**
 * Builds every bundle of {@link VENDOR_BUNDLES} (or those whose entry is in `only`).
 * @param {{ outdir?: string, only?: string[], minify?: boolean }} [o] `outdir` replaces
 *   `dist/` as the root of the outputs (benches); `minify` defaults to true.
 * @returns {Promise<Array<{ outfile: string, bytes: number }>>}
 * @throws Error on any esbuild error
 */
export async function bundleVendor(o = {}) {
  const out = [];
  for (const v of VENDOR_BUNDLES) {
    if (o.only && !o.only.includes(v.entry)) continue;
    const outfile = path.join(root, o.outdir ? path.join(o.outdir, v.outfile.replace(/^dist\//, '')) : v.outfile);
    await build({
      entryPoints: [path.join(root, v.entry)],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      // The ES module builds (tree-shakeable; client-ec2 declares "sideEffects": false).
      mainFields: ['module', 'main'],
      minify: o.minify ?? true,
      // No keepNames: it costs ~9 MiB of resident memory on the Kubernetes bundle; the
      // libraries set `name` on their errors themselves (the SDK from the error code).
      legalComments: 'none',
      logLevel: 'warning',
      outfile,
      plugins: [schemaKeysPlugin],
      banner: {
        js: "import { createRequire as __vendorRequire } from 'node:module'; const require = __vendorRequire(import.meta.url);",
      },
    });
    await rm(`${outfile}.map`, { force: true }); // tsc's map describes the file this replaced
    out.push({ outfile, bytes: (await stat(outfile)).size });
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  for (const r of await bundleVendor())
    console.log(`bundle-vendor: wrote ${path.relative(root, r.outfile)} (${Math.round(r.bytes / 1024)} KiB, minified)`);
}
