/**
 * Start-up step of ipamd (called by `startDaemon` in ../daemon.ts once it serves): installs
 * the CNI plugin and conflist ({@link installCni}) and logs what the runtime will see. Also
 * the start check of a custom conflist, run with the other configuration checks.
 */
import { ConfigError, type IpamdConfig } from '../config-types.js';
import type { Logger } from '../log.js';
import { CustomConflistError } from './cni-conflist.js';
import { installCni, renderConflist, type CniInstallOptions } from './cni-install.js';

/** The install options `config` gives; `execServed`: the exec socket is served (named in the conflist). */
export function cniInstallOptions(config: IpamdConfig, execServed: boolean): CniInstallOptions {
  return {
    confDir: config.cniConfDir,
    binDir: config.cniBinDir,
    networkName: config.networkName,
    podMtu: config.podMtu,
    vethPrefix: config.vethPrefix,
    ipamdSocket: config.socketPath,
    execSocket: execServed ? config.cniExecSocket : '',
    pluginLogFile: config.pluginLogFile,
    ipamdWaitSeconds: config.cniIpamdWaitMs / 1000,
    enableBandwidthPlugin: config.enableBandwidthPlugin,
    ipFamily: config.ipFamily,
    ...(config.cniConflistFile ? { customConflist: config.cniConflistFile } : {}),
  };
}

/**
 * Checks the custom conflist (ENI_IPAM_CNI_CONFLIST_FILE) at start, before ipamd opens
 * anything: it must be readable, valid and agree with ipamd's settings (./cni-conflist.ts).
 * No-op without one or with ENI_IPAM_INSTALL_CNI=false.
 * @throws ConfigError naming ENI_IPAM_CNI_CONFLIST_FILE and why (one line).
 */
export function checkCustomConflist(config: IpamdConfig): void {
  if (!config.installCni || !config.cniConflistFile) return;
  try {
    renderConflist(cniInstallOptions(config, config.cniExec));
  } catch (e) {
    if (e instanceof CustomConflistError)
      throw new ConfigError('ENI_IPAM_CNI_CONFLIST_FILE', `ENI_IPAM_CNI_CONFLIST_FILE: ${e.message}`);
    throw e;
  }
}

/**
 * Installs the plugin and the conflist from `config` and logs the result: an error when
 * other network config files sort before ours (the runtime uses theirs), a warning when
 * ours shadows others or names plugins the bin dir lacks. `execServed`: the exec socket is
 * served (named in the conflist).
 * @throws what {@link installCni} throws (the files cannot be written, bandwidth missing, custom conflist refused).
 */
export async function installCniAndReport(config: IpamdConfig, execServed: boolean, log: Logger): Promise<void> {
  const written = await installCni(cniInstallOptions(config, execServed));
  log.info(written, 'installed the CNI plugin and conflist (ipamd is serving)');
  if (config.cniConflistFile && config.enableBandwidthPlugin)
    log.warn(
      'ENABLE_BANDWIDTH_PLUGIN is ignored with ENI_IPAM_CNI_CONFLIST_FILE: the custom conflist is used as written',
    );
  if (written.missingPlugins.length > 0)
    log.warn(
      { missingPlugins: written.missingPlugins, binDir: config.cniBinDir },
      'the conflist names plugins the CNI bin dir lacks: every pod ADD fails until they are installed',
    );
  if (written.shadowedBy.length > 0)
    log.error(
      { shadowedBy: written.shadowedBy },
      'network config files sort before ours: the runtime uses the first, not eni-ipam',
    );
  if (written.shadowed.length > 0)
    log.warn(
      { shadowed: written.shadowed },
      'other network config files left in place; ours sorts first, the runtime ignores them',
    );
}
