#!/usr/bin/env node
/**
 * Bundles the CNI plugin (cni-plugin/main.ts and everything it imports, @grpc/grpc-js and
 * protobufjs/light included) into ONE CommonJS file, dist/cni-plugin/eni-ipam.cjs, with a
 * `#!/usr/bin/env node` shebang and mode 0755: node20, minified. Runs after tsc in
 * `npm run build`. First refreshes cni-plugin/generated/ipam-descriptor.ts from
 * proto/ipam.proto when it is stale (scripts/gen-ipam-descriptor.mjs).
 *
 * Prints the output size. Exits non-zero on any esbuild error.
 */
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { DESCRIPTOR_PATH, writeIpamDescriptor } from './gen-ipam-descriptor.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const outfile = `${root}dist/cni-plugin/eni-ipam.cjs`;
const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));

if (writeIpamDescriptor()) console.error(`bundle-plugin: ${DESCRIPTOR_PATH} was stale and has been regenerated (re-run tsc for dist/)`);

await build({
  entryPoints: [`${root}cni-plugin/main.ts`],
  outfile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  minify: true,
  legalComments: 'eof',
  logLevel: 'warning',
  // `import.meta.url` (used by proto/ipam.ts for IPAM_PROTO_PATH) has no CJS equivalent:
  // point it at the bundle itself so module evaluation cannot throw.
  banner: { js: '#!/usr/bin/env node\nconst __eniIpamImportMetaUrl = require("url").pathToFileURL(__filename).href;' },
  define: {
    'import.meta.url': '__eniIpamImportMetaUrl',
    'process.env.ENI_IPAM_BUILD_VERSION': JSON.stringify(version),
  },
});
chmodSync(outfile, 0o755);
console.error(`bundle-plugin: wrote ${outfile} (${Math.round(statSync(outfile).size / 1024)} KiB)`);
