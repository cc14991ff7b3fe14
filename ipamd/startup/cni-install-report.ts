/**
 * Start-up step of ipamd (called by `startDaemon` in ../daemon.ts once it serves): installs
 * the CNI plugin and conflist ({@link installCni}) and logs what the runtime will see.
 */
import type { IpamdConfig } from '../config.js';
import type { Logger } from '../log.js';
import { installCni } from './cni-install.js';

/**
 * Installs the plugin and the conflist from `config` and logs the result: an error when
 * other network config files sort before ours (the runtime uses theirs), a warning when
 * ours shadows others. `execServed`: the exec socket is served (named in the conflist).
 * @throws what {@link installCni} throws (the files cannot be written).
 */
export async function installCniAndReport(config: IpamdConfig, execServed: boolean, log: Logger): Promise<void> {
  const written = await installCni({
    confDir: config.cniConfDir,
    binDir: config.cniBinDir,
    networkName: config.networkName,
    podMtu: config.podMtu,
    vethPrefix: config.vethPrefix,
    ipamdSocket: config.socketPath,
    execSocket: execServed ? config.cniExecSocket : '',
    pluginLogFile: config.pluginLogFile,
    ipamdWaitSeconds: config.cniIpamdWaitMs / 1000,
  });
  log.info(written, 'installed the CNI plugin and conflist (ipamd is serving)');
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
