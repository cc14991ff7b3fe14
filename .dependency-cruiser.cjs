// dependency-cruiser: the import-graph rules of docs/architecture.md#rules-that-never-break that
// eslint's per-file rules cannot see. Run by `npm run lint` (and so by `npm test`):
//   npm run lint (the depcruise step lists the folders)
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'No import cycles, type-only imports included: a cycle of types is still two files a reader must read together. Move the shared type to a file both import.',
      from: {},
      to: { circular: true },
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
