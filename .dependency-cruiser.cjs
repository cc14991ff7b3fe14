// dependency-cruiser: the import-graph rules of docs/architecture.md#rules-that-never-break that
// eslint's per-file rules cannot see. Run by `npm run lint` (and so by `npm test`):
//   npm run lint (the depcruise step lists the folders)
/**
 * ipamd's folders by layer, lowest first (docs/architecture.md#where-each-concept-lives): a
 * folder imports its own layer and the ones below, never one above. The root files
 * (config, log, clock at the bottom; daemon.ts and ipamd-main.ts at the top) are not layered.
 */
const IPAMD_LAYERS = [
  ['datastore', 'pool'],
  ['cloud', 'kube', 'network', 'checkpoint'],
  ['controller'],
  ['restore', 'service', 'eniconfig'],
  ['rpc', 'cni-exec', 'observability'],
  ['startup'],
  ['lifecycle'],
];
const upward = IPAMD_LAYERS.slice(0, -1).map((layer, i) => ({
  name: `ipamd-no-upward-import-${layer.join('-')}`,
  severity: 'error',
  comment: `ipamd/${layer.join(', ipamd/')} import nothing from a higher layer (${IPAMD_LAYERS.slice(i + 1)
    .flat()
    .join(', ')}): move the shared type or helper down.`,
  from: { path: `^ipamd/(${layer.join('|')})/` },
  to: {
    path: `^ipamd/(${IPAMD_LAYERS.slice(i + 1)
      .flat()
      .join('|')})/`,
  },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'No import cycles, type-only imports included: a cycle of types is still two files a reader must read together. Move the shared type to a file both import.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'datastore-roles-not-class',
      severity: 'error',
      comment:
        "ipamd's consumers take the datastore's roles (ipamd/datastore/roles.ts), never the Datastore class: only the daemon's wiring (daemon.ts, lifecycle/) builds and holds it whole.",
      from: { path: '^ipamd/', pathNot: '^ipamd/(datastore/|lifecycle/|daemon[.]ts$)' },
      to: { path: '^ipamd/datastore/datastore[.]ts$' },
    },
    {
      name: 'bench-demo-not-from-test',
      severity: 'error',
      comment:
        'bench/ and demo/ import product code or the shared kit (kit/), never test/: a test helper change must not break a bench or the demo.',
      from: { path: '^(bench|demo)/' },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|dist-[^/]+|build|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'] },
  },
};
