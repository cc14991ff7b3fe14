/**
 * Which build of the CNI plugin a test runs: `node` (the bundled Node plugin,
 * dist/cni-plugin/eni-ipam.cjs, run with this Node) or `shim` (the native shim
 * dist/cni-plugin/eni-ipam, which forwards to ipamd's CNI exec socket and answers on its
 * own when ipamd is not serving). The default comes from `ENI_IPAM_TEST_PLUGIN` (`node`
 * when unset), so a whole test file can be re-run through the shim:
 * `ENI_IPAM_TEST_PLUGIN=shim node --test dist/test/integration/cni-check.test.js`.
 */
import { fileURLToPath } from 'node:url';
import { PLUGIN_PATH } from '../../kit/cni-exec.js';

/** The two builds. */
export type PluginKind = 'node' | 'shim';

/** Path of the built shim (`npm run build`), beside PLUGIN_PATH. */
export const SHIM_PATH = fileURLToPath(new URL('../../cni-plugin/eni-ipam', import.meta.url));

/** The kind named by ENI_IPAM_TEST_PLUGIN, default `node`. @throws Error for another value. */
export function defaultPluginKind(): PluginKind {
  const v = process.env.ENI_IPAM_TEST_PLUGIN ?? 'node';
  if (v !== 'node' && v !== 'shim') throw new Error(`ENI_IPAM_TEST_PLUGIN=${v}: expected node or shim`);
  return v;
}

/** The command that runs the plugin of `kind` (for execPlugin's `plugin`). */
export function pluginArgv(kind: PluginKind): string[] {
  return kind === 'shim' ? [SHIM_PATH] : [process.execPath, PLUGIN_PATH];
}
