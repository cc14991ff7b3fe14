/**
 * The V8 code cache of the CNI plugin (loader/code-cache.ts), each run in a fresh
 * `node` process as the plugin is: produced at exit when missing, accepted on the next
 * run, a corrupt file rejected and rewritten, a new source (other hash) gets its own
 * file and the stale one is removed, an unwritable location only disables the cache.
 * Then the bundled plugin (dist/cni-plugin/eni-ipam.cjs, copied to a temp dir) writes its
 * cache on ADD and still answers with a garbage cache file in place.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { codeCachePath } from '../../loader/code-cache.js';

const CODE_CACHE_JS = fileURLToPath(new URL('../../loader/code-cache.js', import.meta.url));
const PLUGIN = fileURLToPath(new URL('../../cni-plugin/eni-ipam.cjs', import.meta.url));

function run(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
  input = '',
): Promise<{ code: number; stdout: string; stderr: string }> {
  const e = { ...process.env, ...env };
  delete e.NODE_EXTRA_CA_CERTS;
  return new Promise((resolve) => {
    const p = execFile(process.execPath, argv, { env: e }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
    p.stdin?.end(input);
  });
}

/** Runs `source` through runWithCodeCache in a fresh node; prints the cache state then the module's output. */
async function runCached(source: string, cacheFile: string, produce = true): Promise<string[]> {
  const script = `import { runWithCodeCache } from ${JSON.stringify(CODE_CACHE_JS)};
import { createRequire } from 'node:module';
const module = { exports: {} };
const state = runWithCodeCache({ source: ${JSON.stringify(source)}, filename: ${JSON.stringify(path.join(path.dirname(cacheFile), 'plugin.cjs'))}, cacheFile: ${JSON.stringify(cacheFile)}, produce: ${produce} },
  { exports: module.exports, require: createRequire(import.meta.url), module, filename: '/virtual/plugin.cjs', dirname: '/virtual' });
console.log(state);`;
  const r = await run(['--input-type=module', '-e', script]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim().split('\n');
}

test('cache produced when missing, accepted next time, corrupt one rejected and rewritten', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-v8cache-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const src = `const f = (n) => n < 2 ? n : f(n - 1) + f(n - 2); console.log('fib', f(15), require('node:path').basename(__filename), typeof module.exports);`;
  const file = codeCachePath(path.join(dir, 'plugin.cjs'), 'aaaaaaaaaaaaaaaa');
  assert.match(path.basename(file), /^\.plugin\.cjs\.aaaaaaaaaaaaaaaa\.[0-9A-Za-z._-]+\.v8cache$/);
  assert.deepEqual(await runCached(src, file, false), ['fib 610 plugin.cjs object', 'missing']);
  assert.deepEqual(await readdir(dir), [], 'produce=false writes nothing');
  assert.deepEqual(await runCached(src, file), ['fib 610 plugin.cjs object', 'missing']);
  const first = await readFile(file);
  assert.ok(first.length > 100);
  assert.deepEqual(await runCached(src, file), ['fib 610 plugin.cjs object', 'accepted']);
  assert.deepEqual(await readFile(file), first, 'an accepted cache is not rewritten');

  await writeFile(file, Buffer.from('not a V8 code cache at all, just junk bytes'));
  assert.deepEqual(await runCached(src, file), ['fib 610 plugin.cjs object', 'rejected']);
  assert.deepEqual(await runCached(src, file), ['fib 610 plugin.cjs object', 'accepted']);

  // Another plugin's cache in the same dir is never touched.
  const other = codeCachePath(path.join(dir, 'plugin.cjs.old'), 'dddddddddddddddd');
  await writeFile(other, 'x');
  // A new build (other source hash): its own file; writing it removes the stale one.
  const src2 = src.replace('fib', 'FIB');
  const file2 = codeCachePath(path.join(dir, 'plugin.cjs'), 'bbbbbbbbbbbbbbbb');
  assert.deepEqual(await runCached(src2, file2), ['FIB 610 plugin.cjs object', 'missing']);
  assert.deepEqual((await readdir(dir)).sort(), [path.basename(file2), path.basename(other)].sort());
  assert.deepEqual(await runCached(src2, file2), ['FIB 610 plugin.cjs object', 'accepted']);
});

test('an unwritable cache location only disables the cache', async () => {
  const file = codeCachePath('/proc/eni-ipam-no-such-dir/plugin.cjs', 'cccccccccccccccc');
  assert.deepEqual(await runCached('console.log("ran")', file), ['ran', 'missing']);
  assert.deepEqual(await runCached('console.log("ran")', file), ['ran', 'missing']);
});

test('the bundled plugin writes its cache on ADD and survives a garbage cache', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-v8plugin-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const plugin = path.join(dir, 'eni-ipam');
  await copyFile(PLUGIN, plugin);
  const version = await run([plugin], { CNI_COMMAND: 'VERSION' });
  assert.equal(version.code, 0);
  assert.ok(JSON.parse(version.stdout).supportedVersions.includes('1.0.0'));
  assert.deepEqual(await readdir(dir), ['eni-ipam'], 'VERSION does not produce the cache');
  // ADD with a config that fails validation: still an ADD run, so the cache is produced.
  const add = await run(
    [plugin],
    { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'x', CNI_NETNS: '/nonexistent', CNI_IFNAME: 'eth0' },
    '{"cniVersion":"1.0.0"}',
  );
  assert.equal(add.code, 1);
  assert.equal(JSON.parse(add.stdout).code, 7);
  const caches = (await readdir(dir)).filter((f) => f.endsWith('.v8cache'));
  assert.equal(caches.length, 1, `cache files: ${caches}`);
  await writeFile(path.join(dir, caches[0]!), 'garbage');
  const again = await run([plugin], { CNI_COMMAND: 'VERSION' });
  assert.equal(again.code, 0);
  assert.ok(Array.isArray(JSON.parse(again.stdout).supportedVersions));
  const off = await run([plugin], { CNI_COMMAND: 'VERSION', ENI_IPAM_CNI_CODE_CACHE: 'off' });
  assert.equal(off.code, 0);
});
