/**
 * V8 flags for a small resident set, set before any other module of ipamd loads (main.ts
 * imports this first): `--optimize-for-size` (V8 trades some optimisation for smaller
 * code and heap; `node --v8-options`). `--max-semi-space-size` (MiB) only takes effect on
 * the command line, so the image's entrypoint (/app/bin/ipamd, scripts/image/stage.mjs)
 * passes {@link IPAMD_NODE_FLAGS} itself, with {@link IPAMD_MALLOC_ENV} (glibc malloc
 * otherwise keeps the parser's freed memory of the SDK and Kubernetes client imports:
 * ~25 MiB); a direct `node dist/ipamd/main.js` gets what can be set at run time. Node
 * refuses these flags in NODE_OPTIONS. ENI_IPAM_V8_DEFAULTS=false runs with V8's
 * defaults (for comparison).
 */
import v8 from 'node:v8';

/** The flags the image's entrypoint passes to node before main.js. */
export const IPAMD_NODE_FLAGS = ['--optimize-for-size', '--max-semi-space-size=1'];

/** The glibc malloc settings the image's entrypoint exports (man 3 mallopt: M_ARENA_MAX, M_TRIM_THRESHOLD, M_MMAP_THRESHOLD). */
export const IPAMD_MALLOC_ENV = {
  MALLOC_ARENA_MAX: '1',
  MALLOC_TRIM_THRESHOLD_: '65536',
  MALLOC_MMAP_THRESHOLD_: '65536',
};

if (process.env.ENI_IPAM_V8_DEFAULTS !== 'false' && !process.execArgv.includes('--optimize-for-size'))
  v8.setFlagsFromString('--optimize-for-size');
