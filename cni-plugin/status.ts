/**
 * CNI STATUS (spec 1.1.0, "STATUS"): succeeds (nothing printed) when ipamd can hand out
 * the addresses of the mode it serves now (an IPv4, an IPv6 from the node's /80, or both
 * for dual-stack) and that mode is the config's `ipFamily` (or `auto`). Otherwise it
 * fails with the spec's codes (the message names ipamd's mode):
 * - 50 "the plugin is not available (i.e. cannot service ADD requests)": ipamd
 *   unreachable (no socket, nothing listening, shutting down, too old to answer), not
 *   ready, or its pool is empty and cannot grow. Pods already running keep their
 *   addresses and routes, so this is not 51.
 * - 51 "not available, and existing containers in the network may have limited
 *   connectivity": only when ipamd itself reports it.
 * The message is ipamd's reason.
 */
import { IPAM_API_VERSION, servedFamily } from '../proto/ipam.js';
import { CniCode } from './errors.js';
import { cniError } from './error-catalogue.js';
import type { VerbContext } from './invocation.js';
import { hostOf } from './process-host.js';
import type { NetConf } from './netconf.js';
import { PLUGIN_VERSION } from './request.js';
import { versionAtLeast } from './versions.js';

/** Deadline of `IpamStatus` in ms: STATUS must answer quickly (the spec asks for it). */
export const STATUS_TIMEOUT_MS = 3_000;

/**
 * Runs STATUS.
 * @throws CniError 1 for a config version before 1.1.0, 50 when ipamd cannot be asked,
 *   51 when ipamd says existing pods are affected, else 50 when ipamd cannot serve.
 */
export async function cmdStatus(conf: NetConf, ctx: VerbContext = {}): Promise<void> {
  if (!versionAtLeast(conf.cniVersion, '1.1.0'))
    throw cniError('status-version', `cniVersion ${conf.cniVersion}; STATUS needs 1.1.0`);
  const ipamd = hostOf(ctx).ipamd(conf.ipamdSocket);
  let reply;
  try {
    reply = await ipamd.ipamStatus(
      { api_version: IPAM_API_VERSION, client_version: PLUGIN_VERSION, network_name: conf.name },
      STATUS_TIMEOUT_MS,
    );
  } catch (e) {
    throw cniError('status-unreachable', (e as Error).message, { socket: conf.ipamdSocket });
  } finally {
    ipamd.close();
  }
  const mode = servedFamily(reply.ip_family) ?? reply.ip_family ?? '';
  if (conf.ipFamily !== 'auto' && conf.ipFamily !== mode)
    throw cniError('status-cannot-serve', '', {
      reason: `this node serves ${mode}, the network config asks for ipFamily ${conf.ipFamily}`,
    });
  if (reply.can_serve) return;
  const limited = reply.code === CniCode.PluginNotAvailableLimitedConnectivity;
  throw cniError(limited ? 'status-limited' : 'status-cannot-serve', '', {
    reason: `${reply.message || 'ipamd cannot serve an IP now'}${mode === 'ipv4' ? '' : ` (mode ${mode})`}`,
  });
}
