// ESLint 9 flat config: typescript-eslint's recommended rules, plus the import boundaries of
// docs/architecture.md ("Rules that never break"), enforced per folder with no-restricted-imports.
// Run by `npm run lint` (and so by `npm test`). See CONTRIBUTING.md.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import { defineConfig } from 'eslint/config';

/** Node modules that do I/O: the pure core (datastore, pool decisions) imports none of them. */
const NODE_IO = [
  'fs',
  'fs/promises',
  'net',
  'http',
  'http2',
  'https',
  'child_process',
  'dgram',
  'dns',
  'dns/promises',
  'tls',
  'os',
  'worker_threads',
  'cluster',
  'readline',
  'process',
].flatMap((m) => [m, `node:${m}`]);

/** Import-path patterns (regular expressions) for each boundary, and why. */
const IO_LIBRARIES = {
  regex:
    '^(@aws-sdk/|@grpc/|grpc-health-check$|@kubernetes/|pino|prom-client$|write-file-atomic$|rotating-file-stream$)',
  message:
    'the core (ipamd/datastore, ipamd/pool) is pure: no cloud SDK, gRPC, Kubernetes, logging or file I/O (docs/architecture.md#rules-that-never-break).',
};
const IPAMD_ADAPTERS = {
  regex:
    '(^|/)(cloud|kube|network|rpc|controller|observability|checkpoint|restore|startup|service|cni-exec|lifecycle|eniconfig)(/|$)',
  message:
    'the core (ipamd/datastore, ipamd/pool) imports no adapter; adapters import the core, never the reverse (docs/architecture.md#rules-that-never-break).',
};
const SIMULATOR = {
  regex: '(^|/)sim(/|$)',
  message:
    'the simulator (sim/) is for tests, the demo and benches only (docs/architecture.md#rules-that-never-break).',
};
const IPAMD_FROM_PLUGIN = {
  regex: '(^|/)ipamd(/|$)',
  message:
    'the CNI plugin imports no ipamd internals; share types through proto/ (docs/architecture.md#rules-that-never-break).',
};
const SHARED_FROM_EITHER_SIDE = {
  regex: '(^|/)(ipamd|cni-plugin)(/|$)',
  message:
    'shared code (proto/, netfacts/, loader/, nodefs/) imports neither ipamd nor the CNI plugin: both sides import it (docs/architecture.md#rules-that-never-break).',
};
const PLUGIN_INTERNALS_FROM_IPAMD = {
  regex: '(^|/)cni-plugin/(?!index\\.js$|facade\\.js$)',
  message:
    'ipamd reaches the CNI plugin through its one facade (cni-plugin/index.ts), not its internals (docs/architecture.md#rules-that-never-break).',
};

/**
 * The same boundaries for dynamic `import('…')`, which no-restricted-imports does not see.
 * esquery's regex literal cannot hold a `/`, so it is written as \u002F.
 */
function dynamicImports(...patterns) {
  return [
    'error',
    ...patterns.map(({ regex, message }) => ({
      selector: `ImportExpression[source.value=/${regex.replaceAll('/', '\\u002F')}/]`,
      message,
    })),
  ];
}
const NODE_IO_PATTERN = {
  regex: `^(node:)?(${[...new Set(NODE_IO.map((m) => m.replace(/^node:/, '')))].join('|')})$`,
  message: 'the core (ipamd/datastore, ipamd/pool) does no I/O (docs/architecture.md#rules-that-never-break).',
};
const PLUGIN_FROM_CORE = {
  regex: '(^|/)cni-plugin/',
  message:
    'the core (ipamd/datastore, ipamd/pool) imports no CNI plugin code (docs/architecture.md#rules-that-never-break).',
};

export default defineConfig(
  {
    ignores: [
      'dist/**',
      'dist-*/**',
      'node_modules/**',
      'build/**',
      '.tmp/**',
      'cni-plugin/generated/**',
      'charts/**',
      'cni-plugin/shim/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A `let` assigned once, later, but read by closures made before that (e.g. daemon.ts's hostNet).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // tsc (noUnusedLocals/noUnusedParameters) already reports these; `_`-prefixed are intentional.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  // --- Boundaries (docs/architecture.md#rules-that-never-break) -------------------------------
  {
    // The pure core: no Node I/O, no I/O libraries, no adapters, no simulator.
    files: ['ipamd/datastore/**/*.ts', 'ipamd/pool/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: NODE_IO.map((name) => ({
            name,
            message:
              'the core (ipamd/datastore, ipamd/pool) does no I/O (docs/architecture.md#rules-that-never-break).',
          })),
          patterns: [IO_LIBRARIES, IPAMD_ADAPTERS, SIMULATOR, PLUGIN_FROM_CORE],
        },
      ],
      'no-restricted-syntax': dynamicImports(
        NODE_IO_PATTERN,
        IO_LIBRARIES,
        IPAMD_ADAPTERS,
        SIMULATOR,
        PLUGIN_FROM_CORE,
      ),
    },
  },
  {
    // The CNI plugin: no ipamd internals, no simulator.
    files: ['cni-plugin/**/*.ts', 'cni-plugin/**/*.cjs'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [IPAMD_FROM_PLUGIN, SIMULATOR] }],
      'no-restricted-syntax': dynamicImports(IPAMD_FROM_PLUGIN, SIMULATOR),
    },
  },
  {
    // ipamd outside the core: the plugin through its facade only, no simulator.
    files: ['ipamd/**/*.ts'],
    ignores: ['ipamd/datastore/**', 'ipamd/pool/**'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [PLUGIN_INTERNALS_FROM_IPAMD, SIMULATOR] }],
      'no-restricted-syntax': dynamicImports(PLUGIN_INTERNALS_FROM_IPAMD, SIMULATOR),
    },
  },
  {
    // ipamd reaches the Kubernetes client and the EC2 SDK through one door each (bundled
    // tree-shaken by scripts/bundle-vendor.mjs; the libraries' indexes cost ~40 MiB each of
    // resident memory: docs/design.md#16-footprint-and-latency). Type imports are free.
    files: ['ipamd/**/*.ts'],
    ignores: ['ipamd/kube/client.ts', 'ipamd/cloud/ec2-sdk.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^@kubernetes/client-node',
              allowTypeImports: true,
              message: 'import the Kubernetes client from ipamd/kube/client.ts (add what you need there).',
            },
            {
              regex: '^@aws-sdk/client-ec2',
              allowTypeImports: true,
              message: 'import the EC2 SDK from ipamd/cloud/ec2-sdk.ts (add the command you need there).',
            },
          ],
        },
      ],
    },
  },
  {
    // The operator CLI: no simulator.
    files: ['cli/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [SIMULATOR] }],
      'no-restricted-syntax': dynamicImports(SIMULATOR),
    },
  },
  {
    // Shared by both sides (the contract, node networking facts): neither side's internals, no simulator.
    files: ['proto/**/*.ts', 'netfacts/**/*.ts', 'loader/**/*.ts', 'nodefs/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [SHARED_FROM_EITHER_SIDE, SIMULATOR] }],
      'no-restricted-syntax': dynamicImports(SHARED_FROM_EITHER_SIDE, SIMULATOR),
    },
  },
  // --- Shape (docs/architecture.md#rules-that-never-break) ------------------------------------
  {
    // Small files with one job (CONTRIBUTING.md): counted as a reader sees them, comments included.
    files: ['**/*.ts', '**/*.mjs'],
    rules: { 'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }] },
  },
  {
    // Small functions in everything that ships or is run by hand (product, sim, bench, demo,
    // scripts). Tests are exempt: a `describe` callback holds its steps by design.
    files: ['**/*.ts', '**/*.mjs'],
    ignores: ['test/**'],
    rules: {
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true, IIFEs: true }],
    },
  },
);
