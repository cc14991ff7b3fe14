/**
 * The library doors' bundles (scripts/bundle-vendor.mjs): the schema-key rewrite that
 * lets esbuild drop the EC2 SDK's unused schemas, and the built bundles themselves (after
 * `npm run build`): bundled, small, exporting what ipamd uses. A bundle that silently
 * grew back to the whole library would cost ipamd ~40 MiB again
 * (docs/design.md#16-footprint-and-latency).
 */
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import test from 'node:test';
import { fileURLToPath } from 'node:url';

interface BundleVendorModule {
  inlineSchemaKeys(src: string, file: string): { contents: string; keys: number };
}
const root = fileURLToPath(new URL('../../../', import.meta.url));
const { inlineSchemaKeys } = (await import(`${root}scripts/bundle-vendor.mjs`)) as BundleVendorModule;

test('inlineSchemaKeys writes computed keys as the string constants they name, and refuses unknown ones', () => {
  const src =
    'const _xN = "xmlName";\nconst _TSa = "TagSpecification";\nexport var A$ = [3, [() => B, { [_xN]: _TSa }]];\n';
  const r = inlineSchemaKeys(src, 'schemas_0.js');
  assert.equal(r.keys, 1);
  assert.match(r.contents, /\{ "xmlName": _TSa \}/);
  assert.throws(
    () => inlineSchemaKeys('export var A$ = [{ [_nope]: 1 }];\n', 'schemas_0.js'),
    /\[_nope\] is not a string constant/,
  );
});

for (const [file, maxKiB, names] of [
  [
    'dist/ipamd/cloud/ec2-sdk.js',
    1024,
    ['EC2Client', 'DescribeNetworkInterfacesCommand', 'AssignPrivateIpAddressesCommand'],
  ],
  ['dist/ipamd/kube/client.js', 2048, ['KubeConfig', 'Watch', 'CoreV1Api', 'PatchStrategy']],
] as const) {
  test(`${file} is a tree-shaken bundle under ${maxKiB} KiB exporting what ipamd uses`, async () => {
    const text = readFileSync(root + file, 'utf8');
    assert.match(text, /__vendorRequire/, `${file} is not the bundle: run npm run build (scripts/bundle-vendor.mjs)`);
    const kib = statSync(root + file).size / 1024;
    assert.ok(kib < maxKiB, `${file} is ${Math.round(kib)} KiB: has the bundle pulled in the whole library?`);
    const m = (await import(root + file)) as Record<string, unknown>;
    for (const n of names) assert.ok(m[n] !== undefined && m[n] !== null, `${file} exports ${n}`);
  });
}
