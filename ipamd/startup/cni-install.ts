/**
 * Installs the CNI plugin and its network configuration once ipamd serves (DESIGN §8:
 * kubelet reports the node Ready as soon as a conflist exists, so it must not exist
 * before ipamd can answer). The plugin is the native shim, installed as `eni-ipam` (the
 * binary the runtime execs; it forwards to ipamd's exec socket and answers every verb on
 * its own when ipamd is not serving: it needs no Node.js on the host).
 *
 * The Node plugin (`eni-ipam.cjs`) is a developer's tool (tests, benches, running by
 * hand) and is installed only when the exec socket is off (ENI_IPAM_CNI_EXEC=false):
 * then the conflist names it as `nodePlugin` and the shim execs it for every call, which
 * needs Node on the host. With the exec socket on (the default, and what the DaemonSet
 * runs) it is neither installed nor named, so nothing on the host can depend on it.
 *
 * Every file is written as a temp file in the destination directory followed by a
 * rename: containerd reloads its conf dir on a write or a rename *within* it, and a
 * running plugin binary is never overwritten in place. The Node plugin (when installed)
 * goes first, so a conflist naming it always finds it.
 */
import { chmod, copyFile, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The bundled Node plugin shipped in `dist/`. */
export const BUNDLED_PLUGIN_PATH = fileURLToPath(new URL('../../cni-plugin/eni-ipam.cjs', import.meta.url));
/** The native shim shipped beside it (built by `npm run build` from cni-plugin/shim). */
export const BUNDLED_SHIM_PATH = fileURLToPath(new URL('../../cni-plugin/eni-ipam', import.meta.url));

/** File name of the Node plugin in the bin dir (installed only with the exec socket off). */
export const NODE_PLUGIN_NAME = 'eni-ipam.cjs';

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
  /** ipamd's CNI exec socket, or '' when it is off (the Node plugin is then installed and the shim runs it). */
  execSocket: string;
  /** How long the shim's ADD waits for ipamd to serve, s (conflist `ipamdWaitSeconds`; default: the shim's 10). */
  ipamdWaitSeconds?: number;
  /** Node plugin to copy (default: the bundled one). */
  pluginSource?: string;
  /** Shim to copy (default: the built one). */
  shimSource?: string;
}

/** The conflist document ipamd installs (CNI spec 1.0.0 network configuration list). */
export function renderConflist(o: CniInstallOptions): object {
  return {
    cniVersion: '1.0.0',
    name: o.networkName,
    plugins: [{
      type: 'eni-ipam', mtu: o.podMtu, vethPrefix: o.vethPrefix, ipamdSocket: o.ipamdSocket, execSocket: o.execSocket,
      ...(o.ipamdWaitSeconds !== undefined ? { ipamdWaitSeconds: o.ipamdWaitSeconds } : {}),
      ...(o.execSocket === '' ? { nodePlugin: path.join(o.binDir, NODE_PLUGIN_NAME) } : {}),
    }],
  };
}

/** Copies `src` to `dir/name` with `mode` via a temp file in `dir` + rename. */
async function installFile(src: string, dir: string, name: string, mode: number): Promise<string> {
  const dest = path.join(dir, name);
  const tmp = path.join(dir, `.${name}.tmp-${process.pid}`);
  try {
    await copyFile(src, tmp);
    await chmod(tmp, mode);
    await rename(tmp, dest);
  } finally {
    await rm(tmp, { force: true });
  }
  return dest;
}

/**
 * Installs `<binDir>/eni-ipam` (the shim, mode 0755) — preceded by `<binDir>/eni-ipam.cjs`
 * only when `execSocket` is '' — then writes `<confDir>/10-eni-ipam.conflist`, each via a
 * temp file + rename in the same directory.
 * @returns the paths written (`nodePlugin` undefined when not installed).
 * @throws Error on I/O failure (temp files are removed).
 */
export async function installCni(o: CniInstallOptions): Promise<{ plugin: string; nodePlugin?: string; conflist: string }> {
  await mkdir(o.binDir, { recursive: true });
  await mkdir(o.confDir, { recursive: true });
  const nodePlugin = o.execSocket === '' ? await installFile(o.pluginSource ?? BUNDLED_PLUGIN_PATH, o.binDir, NODE_PLUGIN_NAME, 0o755) : undefined;
  const plugin = await installFile(o.shimSource ?? BUNDLED_SHIM_PATH, o.binDir, 'eni-ipam', 0o755);
  const conflist = path.join(o.confDir, CONFLIST_NAME);
  const confTmp = path.join(o.confDir, `.${CONFLIST_NAME}.tmp-${process.pid}`);
  try {
    await writeFile(confTmp, JSON.stringify(renderConflist(o), null, 2) + '\n', { mode: 0o644 });
    await rename(confTmp, conflist);
  } finally {
    await rm(confTmp, { force: true });
  }
  return { plugin, ...(nodePlugin ? { nodePlugin } : {}), conflist };
}
