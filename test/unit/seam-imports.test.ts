/**
 * The plugin↔ipamd seam holds in the source: ipamd imports one module of cni-plugin/
 * (cni-plugin/facade.ts), the plugin imports nothing from ipamd/, and the shared folders
 * (proto/, netfacts/: node networking facts, loader/: the V8 code-cache loader, nodefs/: loop-free directory creation) import neither. Reads the .ts sources.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Every `from '...'` / `import('...')` specifier of the .ts files under `dir`, with the file. */
function imports(dir: string): Array<{ file: string; spec: string }> {
  const out: Array<{ file: string; spec: string }> = [];
  for (const e of readdirSync(path.join(ROOT, dir), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.ts')) continue;
    const file = path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name);
    const src = readFileSync(file, 'utf8');
    for (const m of src.matchAll(/(?:from\s+|import\s*\(\s*)'([^']+)'/g))
      out.push({ file: path.relative(ROOT, file), spec: m[1]! });
  }
  return out;
}

const resolved = (i: { file: string; spec: string }): string => path.normalize(path.join(path.dirname(i.file), i.spec));

test('ipamd imports only cni-plugin/facade from the plugin', () => {
  const found = imports('ipamd').filter((i) => i.spec.startsWith('.') && resolved(i).startsWith('cni-plugin/'));
  assert.ok(found.length > 0, 'the scan sees the facade imports');
  assert.deepEqual(
    found.filter((i) => resolved(i) !== 'cni-plugin/facade.js'),
    [],
  );
});

test('the plugin imports nothing from ipamd/, netfacts/, loader/, nodefs/ and proto/ import neither side', () => {
  const bad = [
    ...imports('cni-plugin'),
    ...imports('netfacts'),
    ...imports('loader'),
    ...imports('nodefs'),
    ...imports('proto'),
  ].filter((i) => i.spec.startsWith('.') && /^(ipamd)\//.test(resolved(i)));
  assert.deepEqual(bad, []);
  const shared = [...imports('netfacts'), ...imports('loader'), ...imports('nodefs'), ...imports('proto')].filter(
    (i) => i.spec.startsWith('.') && /^(ipamd|cni-plugin)\//.test(resolved(i)),
  );
  assert.deepEqual(shared, []);
});
