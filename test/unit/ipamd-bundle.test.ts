/**
 * ipamd's one-file bundle and its V8 code cache (scripts/bundle-ipamd.mjs, ipamd/bundle-loader.ts),
 * checked on the build's own output (dist/ipamd/ipamd.bundle.cjs):
 * - every file a bundled module finds relative to itself (a .proto, a CNI binary, a
 *   package.json) exists where the bundle computes it;
 * - the bundle has no `import()` left (Node 20 cannot run one from code-cached code);
 * - the code cache is the same bytes on every build (the image is reproducible) and a
 *   node with the entrypoint's flags accepts it; under other flags V8 rejects it and the
 *   bundle still loads;
 * - a missing bundle means the ES modules; a file without the header is refused by name.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { IPAMD_BUNDLE_PATH, readIpamdBundle } from '../../ipamd/bundle-loader.js';
import { IPAMD_NODE_FLAGS } from '../../ipamd/v8-flags.js';

const DIST = fileURLToPath(new URL('../../', import.meta.url));
const ROOT = path.resolve(DIST, '..');

test('every path a bundled module computes from its own location exists', () => {
  const text = readFileSync(IPAMD_BUNDLE_PATH, 'utf8');
  const bundleDir = path.dirname(IPAMD_BUNDLE_PATH);
  const rels = [...text.matchAll(/__eniIpamd(?:FileUrl|Path)\(("[^"]*")\)/g)].map((m) => JSON.parse(m[1]!) as string);
  assert.ok(rels.length >= 8, `found ${rels.length} rewritten paths`);
  for (const rel of new Set(rels))
    assert.ok(existsSync(path.join(bundleDir, rel)), `${rel} (relative to dist/ipamd) is missing`);
  // What those modules then find beside themselves: the helpers ipamd runs and the .proto files it loads.
  for (const f of [
    '../cni-plugin/eni-ipam-spawn',
    '../cni-plugin/eni-ipam-netlink',
    '../cni-plugin/eni-ipam',
    '../../proto/ipam.proto',
    '../../proto/cri/api.proto',
  ])
    assert.ok(existsSync(path.join(bundleDir, f)), f);
  assert.doesNotMatch(text, /[^\w$.]import\(/, 'an import() is left in the bundle');
});

test('the code cache is the same bytes on every build, and the entrypoint flags accept it', async (t) => {
  // A copy of the files the cache step uses, laid out as in the checkout (the bundle finds
  // node_modules and proto/ relative to itself, as the image's /app/dist does).
  const top = mkdtempSync(path.join(os.tmpdir(), 'eni-ipamd-bundle-'));
  t.after(() => rmSync(top, { recursive: true, force: true }));
  const dir = path.join(top, 'dist');
  for (const f of ['ipamd/ipamd.bundle.cjs', 'ipamd/bundle-loader.js', 'ipamd/v8-flags.js', 'loader/code-cache.js'])
    cpSync(path.join(DIST, f), path.join(dir, f));
  for (const d of ['node_modules', 'proto']) symlinkSync(path.join(ROOT, d), path.join(top, d));
  writeFileSync(path.join(top, 'package.json'), '{"type":"module"}\n');
  const bundle = path.join(dir, 'ipamd', 'ipamd.bundle.cjs');
  const { makeIpamdCodeCache } = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'bundle-ipamd.mjs')).href)) as {
    makeIpamdCodeCache: (o: { bundle: string }) => Promise<{ file: string; bytes: number }>;
  };
  const first = await makeIpamdCodeCache({ bundle });
  const bytes = readFileSync(first.file);
  assert.ok(bytes.length > 100_000, `cache of ${bytes.length} bytes`);
  rmSync(first.file);
  const second = await makeIpamdCodeCache({ bundle });
  assert.equal(second.file, first.file);
  assert.ok(readFileSync(second.file).equals(bytes), 'two builds made different cache bytes');
  assert.deepEqual(
    readdirSync(path.join(dir, 'ipamd')).filter((f) => f.endsWith('.v8cache')),
    [path.basename(first.file)],
    'one cache file',
  );

  // What the loader reports (it never writes the cache), under the entrypoint's flags and under others.
  const load = (flags: string[]) =>
    JSON.parse(
      execFileSync(
        process.execPath,
        [
          ...flags,
          '--input-type=module',
          '-e',
          `import(${JSON.stringify(pathToFileURL(path.join(dir, 'ipamd', 'bundle-loader.js')).href)}).then((m) => {
            const r = m.loadIpamdBundle(m.readIpamdBundle(${JSON.stringify(bundle)}));
            process.stdout.write(JSON.stringify({ ...r.loaded, runIpamd: typeof r.runIpamd }));
            process.exit(0);
          })`,
        ],
        { encoding: 'utf8' },
      ),
    ) as { from: string; codeCache: string; codeCacheFile: string; runIpamd: string };
  assert.deepEqual(load(IPAMD_NODE_FLAGS), {
    from: 'bundle',
    codeCache: 'accepted',
    codeCacheFile: first.file,
    runIpamd: 'function',
  });
  assert.deepEqual(load([]), {
    from: 'bundle',
    codeCache: 'rejected',
    codeCacheFile: first.file,
    runIpamd: 'function',
  });
  assert.ok(readFileSync(first.file).equals(bytes), 'loading changed the cache');
});

test('no bundle: the ES modules; a file that is not a bundle: refused by name', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eni-ipamd-bundle-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.equal(readIpamdBundle(path.join(dir, 'ipamd.bundle.cjs')), undefined);
  writeFileSync(path.join(dir, 'ipamd.bundle.cjs'), 'module.exports = {};\n');
  assert.throws(
    () => readIpamdBundle(path.join(dir, 'ipamd.bundle.cjs')),
    /ipamd\.bundle\.cjs: no "\/\/ eni-ipamd bundle <hash>" first line/,
  );
  const b = readIpamdBundle(IPAMD_BUNDLE_PATH);
  assert.ok(b && /^[0-9a-f]{16}$/.test(b.sourceHash));
});
