/**
 * Installs the CNI plugin and its network configuration once ipamd serves (docs/design.md#8-lessons-the-field-paid-for:
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
 *
 * Name and order (docs/design.md#12-running-on-a-cluster item 6): containerd (and CRI-O) load the conf dir's files in
 * lexical order and use the first network (containerd's `max_conf_num` defaults to 1), so
 * ours is `05-eni-ipam.conflist`, sorting before amazon-vpc-cni-k8s's `10-aws.conflist`.
 * A leftover `10-aws.conflist` is left where it is: it sorts after ours and is never
 * chosen while ours exists; it is not ours to move (a rollback to aws-node finds the node
 * as aws-node left it, and aws-node rewrites it at its own start anyway), and renaming it
 * would not change which network the runtime uses. Its presence is reported
 * (`shadowed` in the result, logged by the caller). Our own conflist under its former name
 * (`10-eni-ipam.conflist`, before this change) is removed once the new one is in place.
 */
import { accessSync, constants } from 'node:fs';
import { chmod, copyFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { mkdirParents } from '../../nodefs/dirs.js';
import { completeCustomConflist, defaultChain, readCustomConflist } from './cni-conflist.js';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The bundled Node plugin shipped in `dist/`. */
export const BUNDLED_PLUGIN_PATH = fileURLToPath(new URL('../../cni-plugin/eni-ipam.cjs', import.meta.url));
/** The native shim shipped beside it (built by `npm run build` from cni-plugin/shim). */
export const BUNDLED_SHIM_PATH = fileURLToPath(new URL('../../cni-plugin/eni-ipam', import.meta.url));

/** File name of the Node plugin in the bin dir (installed only with the exec socket off). */
export const NODE_PLUGIN_NAME = 'eni-ipam.cjs';

/** Name of the conflist file: sorts before `10-aws.conflist` and most others (the runtime picks the first). */
export const CONFLIST_NAME = '05-eni-ipam.conflist';

/** The name our conflist had before it was renamed to sort first; removed at install. */
export const LEGACY_CONFLIST_NAME = '10-eni-ipam.conflist';

/** amazon-vpc-cni-k8s's conflist, left in place when found (see the module docstring). */
export const AWS_CONFLIST_NAME = '10-aws.conflist';

/** File endings libcni loads from a conf dir (libcni `ConfFiles` with `.conf`, `.conflist`, `.json`). */
const CNI_CONF_EXTENSIONS = ['.conf', '.conflist', '.json'];

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
  /** The plugin's log file (AWS_VPC_K8S_PLUGIN_LOG_FILE), written as the conflist's `logFile`; omitted when undefined. */
  pluginLogFile?: string;
  /** How long the shim's ADD waits for ipamd to serve, s (conflist `ipamdWaitSeconds`; default: the shim's 10). */
  ipamdWaitSeconds?: number;
  /**
   * The family ipamd serves (ENABLE_IPv6/ENABLE_IPv4). For ipv6 and dual it is written as
   * the entry's `ipFamily`, so ADD wires that family's routes while ipamd answers instead of
   * starting IPv4 and redoing it (docs/design.md#ip-families); ipv4 leaves the entry as before
   * (`auto` wires IPv4 first anyway). Default ipv4.
   */
  ipFamily?: 'ipv4' | 'ipv6' | 'dual';
  /** ENABLE_BANDWIDTH_PLUGIN: chain `bandwidth` after eni-ipam (and portmap) in the default conflist. */
  enableBandwidthPlugin?: boolean;
  /** ENI_IPAM_CNI_CONFLIST_FILE: install this conflist (completed, see ./cni-conflist.ts) instead of the default one. */
  customConflist?: string;
  /** Node plugin to copy (default: the bundled one). */
  pluginSource?: string;
  /** Shim to copy (default: the built one). */
  shimSource?: string;
}

/** The eni-ipam entry of the conflist: the fields ipamd owns (see ./cni-conflist.ts). */
export function renderPluginEntry(o: CniInstallOptions): Record<string, unknown> {
  return {
    type: 'eni-ipam',
    mtu: o.podMtu,
    vethPrefix: o.vethPrefix,
    ipamdSocket: o.ipamdSocket,
    execSocket: o.execSocket,
    ...(o.ipFamily && o.ipFamily !== 'ipv4' ? { ipFamily: o.ipFamily } : {}),
    ...(o.ipamdWaitSeconds !== undefined ? { ipamdWaitSeconds: o.ipamdWaitSeconds } : {}),
    ...(o.pluginLogFile ? { logFile: o.pluginLogFile } : {}),
    ...(o.execSocket === '' ? { nodePlugin: path.join(o.binDir, NODE_PLUGIN_NAME) } : {}),
  };
}

/** True when `binDir/name` is an executable file (what a runtime needs to run a chained plugin). */
export function binHas(binDir: string, name: string): boolean {
  try {
    accessSync(path.join(binDir, name), constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The conflist document ipamd installs (CNI spec 1.0.0 network configuration list): the
 * eni-ipam entry, then the chained plugins (portmap when in the bin dir, bandwidth with
 * `enableBandwidthPlugin`); or the custom conflist completed with the eni-ipam entry.
 * @throws Error when bandwidth is asked for and missing; CustomConflistError when the custom conflist is refused.
 */
export function renderConflist(o: CniInstallOptions, has = (n: string) => binHas(o.binDir, n)): object {
  if (o.customConflist)
    return completeCustomConflist(
      readCustomConflist(o.customConflist),
      renderPluginEntry(o),
      o.networkName,
      o.customConflist,
    );
  return {
    cniVersion: '1.0.0',
    name: o.networkName,
    plugins: [renderPluginEntry(o), ...defaultChain(has, o.enableBandwidthPlugin ?? false, o.binDir)],
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

/** What {@link installCni} did. */
export interface CniInstallResult {
  plugin: string;
  /** Undefined when the Node plugin was not installed (exec socket on). */
  nodePlugin?: string;
  conflist: string;
  /** Network config files in the conf dir that sort before ours (the runtime would pick the first of them instead). */
  shadowedBy: string[];
  /** Network config files that sort after ours (ignored by the runtime while ours exists), e.g. a leftover `10-aws.conflist`. */
  shadowed: string[];
  /** Our conflist under its former name, removed. */
  removedLegacy: boolean;
  /** The plugin types of the installed conflist, in chain order (eni-ipam among them). */
  plugins: string[];
  /** Plugin types the conflist names that are not executables in the bin dir (only a custom conflist can). */
  missingPlugins: string[];
}

/**
 * Builds the conflist ({@link renderConflist}; nothing is written when it throws), then
 * installs `<binDir>/eni-ipam` (the shim, mode 0755) — preceded by `<binDir>/eni-ipam.cjs`
 * only when `execSocket` is '' — then writes `<confDir>/05-eni-ipam.conflist`, each via a
 * temp file + rename in the same directory, then removes our former `10-eni-ipam.conflist`
 * if present (other files are never touched).
 * @returns the paths written (`nodePlugin` undefined when not installed) and the other network config files found.
 * @throws Error on I/O failure (temp files are removed), or what {@link renderConflist} throws.
 */
export async function installCni(o: CniInstallOptions): Promise<CniInstallResult> {
  await mkdirParents(o.binDir);
  // Decided (and a custom conflist checked) before any file is written: a refusal leaves the node as it was.
  const conf = renderConflist(o) as { plugins: Array<{ type: string }> };
  await mkdirParents(o.confDir);
  const nodePlugin =
    o.execSocket === ''
      ? await installFile(o.pluginSource ?? BUNDLED_PLUGIN_PATH, o.binDir, NODE_PLUGIN_NAME, 0o755)
      : undefined;
  const plugin = await installFile(o.shimSource ?? BUNDLED_SHIM_PATH, o.binDir, 'eni-ipam', 0o755);
  const conflist = path.join(o.confDir, CONFLIST_NAME);
  const confTmp = path.join(o.confDir, `.${CONFLIST_NAME}.tmp-${process.pid}`);
  try {
    await writeFile(confTmp, JSON.stringify(conf, null, 2) + '\n', { mode: 0o644 });
    await rename(confTmp, conflist);
  } finally {
    await rm(confTmp, { force: true });
  }
  const names = await readdir(o.confDir);
  const removedLegacy = names.includes(LEGACY_CONFLIST_NAME);
  if (removedLegacy) await rm(path.join(o.confDir, LEGACY_CONFLIST_NAME), { force: true });
  const others = names
    .filter(
      (n) =>
        n !== CONFLIST_NAME &&
        n !== LEGACY_CONFLIST_NAME &&
        !n.startsWith('.') &&
        CNI_CONF_EXTENSIONS.some((x) => n.endsWith(x)),
    )
    .sort();
  return {
    plugin,
    ...(nodePlugin ? { nodePlugin } : {}),
    conflist,
    shadowedBy: others.filter((n) => n < CONFLIST_NAME),
    shadowed: others.filter((n) => n > CONFLIST_NAME),
    removedLegacy,
    plugins: conf.plugins.map((p) => p.type),
    missingPlugins: conf.plugins.map((p) => p.type).filter((t) => t !== 'eni-ipam' && !binHas(o.binDir, t)),
  };
}
