/**
 * CNI STATUS (spec 1.1.0, "STATUS"): succeeds (nothing printed) when ipamd can hand out
 * an IPv4 address now; otherwise fails with code 50 (plugin not available: ipamd
 * unreachable, not ready, shutting down, or an ipamd too old to answer) or the code
 * ipamd reports (51: no IP can be had now, the pool is empty and cannot grow), with
 * ipamd's reason as the message.
 */
import { IPAM_API_VERSION } from '../proto/ipam.js';
import { CniCode, CniError } from './errors.js';
import { connectIpamd } from './ipamd-client.js';
import type { NetConf } from './netconf.js';
import { PLUGIN_VERSION } from './request.js';
import { versionAtLeast } from './versions.js';

/** Deadline of `IpamStatus` in ms: STATUS must answer quickly (the spec asks for it). */
export const STATUS_TIMEOUT_MS = 3_000;

/**
 * Runs STATUS.
 * @throws CniError 1 for a config version before 1.1.0, 50 when ipamd cannot be asked,
 *   50/51 as ipamd answers when it cannot serve.
 */
export async function cmdStatus(conf: NetConf): Promise<void> {
  if (!versionAtLeast(conf.cniVersion, '1.1.0')) throw new CniError(CniCode.IncompatibleVersion, 'config version does not allow STATUS', `cniVersion ${conf.cniVersion}; STATUS needs 1.1.0`);
  const ipamd = connectIpamd(conf.ipamdSocket);
  let reply;
  try {
    reply = await ipamd.ipamStatus({ api_version: IPAM_API_VERSION, client_version: PLUGIN_VERSION, network_name: conf.name }, STATUS_TIMEOUT_MS);
  } catch (e) {
    throw new CniError(CniCode.PluginNotAvailable, `ipamd is not available on ${conf.ipamdSocket}`, (e as Error).message);
  } finally {
    ipamd.close();
  }
  if (reply.can_serve) return;
  const code = reply.code === CniCode.PluginNotAvailableLimitedConnectivity ? reply.code : CniCode.PluginNotAvailable;
  throw new CniError(code, reply.message || 'ipamd cannot serve an IP now');
}
