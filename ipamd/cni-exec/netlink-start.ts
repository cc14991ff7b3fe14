/**
 * Which rtnetlink wiring helper ipamd's CNI exec server hands the plugin code
 * (cni-plugin/netlink/eni-ipam-netlink.c through cni-plugin/netlink-helper.ts): the one
 * built beside the shim, another path, or none (then ADD and DEL wire with `ip`).
 */
import { access, constants } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { netlinkHelper, type NetlinkHelper } from '../../cni-plugin/facade.js';
import type { Logger } from '../log.js';

/** The rtnetlink wiring helper of this build (dist/cni-plugin/eni-ipam-netlink). */
export const BUNDLED_NETLINK_HELPER = fileURLToPath(new URL('../../cni-plugin/eni-ipam-netlink', import.meta.url));

/**
 * The helper at `path` (default {@link BUNDLED_NETLINK_HELPER}) entering `nodeNetns`,
 * started and answering; or undefined when `path` is false, not executable, or the helper
 * does not answer (e.g. it cannot enter `nodeNetns`): logged, and the plugin code then
 * wires with `ip`. Started here so the first ADD does not pay for it.
 */
export async function chooseNetlinkHelper(
  path: string | false | undefined,
  nodeNetns: string | undefined,
  log: Logger,
): Promise<NetlinkHelper | undefined> {
  const helper = path ?? BUNDLED_NETLINK_HELPER;
  if (helper === false) return undefined;
  try {
    await access(helper, constants.X_OK);
  } catch (e) {
    log.warn({ helper, err: (e as Error).message }, 'CNI exec: no netlink helper, pods are wired with ip batches');
    return undefined;
  }
  const h = netlinkHelper(helper, nodeNetns);
  try {
    await h.ping();
  } catch (e) {
    h.close();
    log.warn(
      { helper, err: (e as Error).message },
      'CNI exec: the netlink helper does not run, pods are wired with ip batches',
    );
    return undefined;
  }
  return h;
}
