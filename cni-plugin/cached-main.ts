/**
 * Outer entry point of the installed plugin file (scripts/bundle-plugin.mjs builds it):
 * runs the real plugin bundle (cni-plugin/main.ts, embedded at build time as a string)
 * through the V8 code cache of loader/code-cache.ts. The cache file sits next to the plugin
 * file and is produced by the first ADD (the hot path, so its functions are in it);
 * `ENI_IPAM_CNI_CODE_CACHE=off` disables it. Only meaningful inside the CommonJS bundle
 * (it uses `__filename`, `require` and `module`).
 */
import { codeCachePath, runWithCodeCache } from '../loader/code-cache.js';

/** Injected by scripts/bundle-plugin.mjs (esbuild `define`): the inner bundle and its sha256 (hex, shortened). */
declare const __ENI_IPAM_PLUGIN_SOURCE__: string;
declare const __ENI_IPAM_PLUGIN_SOURCE_HASH__: string;

const off = process.env.ENI_IPAM_CNI_CODE_CACHE === 'off';
runWithCodeCache(
  {
    source: __ENI_IPAM_PLUGIN_SOURCE__,
    filename: __filename,
    cacheFile: off ? undefined : codeCachePath(__filename, __ENI_IPAM_PLUGIN_SOURCE_HASH__),
    produce: process.env.CNI_COMMAND === 'ADD',
  },
  { exports: module.exports, require, module, filename: __filename, dirname: __dirname },
);
