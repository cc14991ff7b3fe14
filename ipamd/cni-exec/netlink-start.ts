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

/** Helpers started in this process, by path and node netns, with their users. */
const started = new Map<string, { helper: Promise<NetlinkHelper | undefined>; users: number }>();

/**
 * The helper at `path` (default {@link BUNDLED_NETLINK_HELPER}) entering `nodeNetns`,
 * started and answering; or undefined when `path` is false, not executable, or the helper
 * does not answer (e.g. it cannot enter `nodeNetns`): logged, and the plugin code then
 * wires with `ip`. Started here so the first ADD does not pay for it. One helper per path
 * and netns serves every caller in the process (ipamd has one CNI exec server; a fleet
 * simulation has hundreds): the one returned ends when its last user calls `close()`.
 */
export async function chooseNetlinkHelper(
  path: string | false | undefined,
  nodeNetns: string | undefined,
  log: Logger,
): Promise<NetlinkHelper | undefined> {
  const helper = path ?? BUNDLED_NETLINK_HELPER;
  if (helper === false) return undefined;
  const key = `${helper}\0${nodeNetns ?? ''}`;
  let s = started.get(key);
  if (!s) {
    const entry = { helper: startHelper(helper, nodeNetns, log), users: 0 };
    started.set(key, entry);
    void entry.helper.then((h) => {
      if (!h && started.get(key) === entry) started.delete(key); // the next caller tries again
    });
    s = entry;
  }
  const entry = s;
  entry.users++;
  const h = await entry.helper;
  if (!h) return undefined;
  let closed = false;
  return {
    ...h,
    close: () => {
      if (closed) return;
      closed = true;
      if (--entry.users > 0) return;
      if (started.get(key) === entry) started.delete(key);
      h.close();
    },
  };
}

async function startHelper(
  helper: string,
  nodeNetns: string | undefined,
  log: Logger,
): Promise<NetlinkHelper | undefined> {
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
