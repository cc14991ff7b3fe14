/**
 * Installs the CNI plugin and its network configuration once ipamd serves (DESIGN §8:
 * kubelet reports the node Ready as soon as a conflist exists, so it must not exist
 * before ipamd can answer). Both files are written as a temp file in the destination
 * directory followed by a rename: containerd reloads its conf dir on a write or a rename
 * *within* it, and a running plugin binary is never overwritten in place.
 */
import { chmod, copyFile, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The bundled plugin shipped next to ipamd in `dist/`. */
export const BUNDLED_PLUGIN_PATH = fileURLToPath(new URL('../../cni-plugin/eni-ipam.cjs', import.meta.url));

/** Name of the conflist file (sorts before most others: the runtime picks the first). */
export const CONFLIST_NAME = '10-eni-ipam.conflist';

/** What goes into the conflist. */
export interface CniInstallOptions {
  confDir: string;
  binDir: string;
  /** CNI network name (ENI_IPAM_NETWORK_NAME). */
  networkName: string;
  /** Pod interface MTU (POD_MTU, else AWS_VPC_ENI_MTU). */
  podMtu: number;
  /** Host-side veth prefix (AWS_VPC_K8S_CNI_VETHPREFIX, already validated). */
  vethPrefix: string;
  ipamdSocket: string;
  /** Plugin source to copy (default: the bundled one). */
  pluginSource?: string;
}

/** The conflist document ipamd installs (CNI spec 1.0.0 network configuration list). */
export function renderConflist(o: CniInstallOptions): object {
  return {
    cniVersion: '1.0.0',
    name: o.networkName,
    plugins: [{ type: 'eni-ipam', mtu: o.podMtu, vethPrefix: o.vethPrefix, ipamdSocket: o.ipamdSocket }],
  };
}

/**
 * Copies the plugin to `<binDir>/eni-ipam` (mode 0755) and writes
 * `<confDir>/10-eni-ipam.conflist`, each via a temp file + rename in the same directory.
 * @returns the two paths written. @throws Error on I/O failure (temp files are removed).
 */
export async function installCni(o: CniInstallOptions): Promise<{ plugin: string; conflist: string }> {
  await mkdir(o.binDir, { recursive: true });
  await mkdir(o.confDir, { recursive: true });
  const plugin = path.join(o.binDir, 'eni-ipam');
  const pluginTmp = path.join(o.binDir, `.eni-ipam.tmp-${process.pid}`);
  try {
    await copyFile(o.pluginSource ?? BUNDLED_PLUGIN_PATH, pluginTmp);
    await chmod(pluginTmp, 0o755);
    await rename(pluginTmp, plugin);
  } finally {
    await rm(pluginTmp, { force: true });
  }
  const conflist = path.join(o.confDir, CONFLIST_NAME);
  const confTmp = path.join(o.confDir, `.${CONFLIST_NAME}.tmp-${process.pid}`);
  try {
    await writeFile(confTmp, JSON.stringify(renderConflist(o), null, 2) + '\n', { mode: 0o644 });
    await rename(confTmp, conflist);
  } finally {
    await rm(confTmp, { force: true });
  }
  return { plugin, conflist };
}
