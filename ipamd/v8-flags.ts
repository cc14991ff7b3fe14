/**
 * V8 flags for a small resident set, set before any other module of ipamd loads (main.ts
 * imports this first): `--optimize-for-size` (V8 trades some optimisation for smaller
 * code and heap; `node --v8-options`). `--max-semi-space-size` (MiB) only takes effect on
 * the command line, so the image's entrypoint (/app/bin/ipamd) passes
 * {@link IPAMD_NODE_FLAGS} itself; a direct `node dist/ipamd/main.js` gets what can be
 * set at run time. Node refuses these in NODE_OPTIONS. Set ENI_IPAM_V8_DEFAULTS=false to
 * run with V8's defaults (for comparison).
 */
import v8 from 'node:v8';

/** The flags the image's entrypoint passes to node before main.js. */
export const IPAMD_NODE_FLAGS = ['--optimize-for-size', '--max-semi-space-size=1'];

if (process.env.ENI_IPAM_V8_DEFAULTS !== 'false' && !process.execArgv.includes('--optimize-for-size')) v8.setFlagsFromString('--optimize-for-size');
