/**
 * CNI DEL: idempotent, succeeds in the end. Deletes the host veth by its computed names
 * (veth-name.ts `hostVethNames`: its pod's, then the one an earlier eni-ipam gave it),
 * only a link with this attachment's MAC (a newer sandbox of the same pod keeps its veth),
 * removing the pair, the host routes and neighbours of both families, and releases the
 * key at ipamd (`DelNetwork` reason "cni-del": every address it holds, IPv4 and IPv6
 * together) in parallel, then removes the pod's ip rules (IPv4 only). An IPv6 pod's
 * egress pair (`v4if0`) is deleted too: in parallel when the config says `ipFamily:
 * ipv6` (both veths in one kernel batch through ipamd's netlink helper: veth-delete.ts
 * `deleteHostVethPair`), else when ipamd (or, without ipamd, prevResult) names an egress address. A missing/empty netns,
 * an unknown container and an unreachable ipamd (it reclaims the IP later) are all
 * success, logged as warnings; with ipamd unreachable the host side is torn down from
 * `prevResult` (the IP it names: its rules, unless another attachment now holds it).
 */
import { requireEnv, type CniEnv } from './env.js';
import type { VerbContext } from './invocation.js';
import { cniError } from './error-catalogue.js';
import { teardownHost } from './host-teardown.js';
import { hostOf } from './process-host.js';
import type { NetConf } from './netconf.js';
import { readPrevResult } from './prev-result.js';
import { networkIds } from './request.js';
import { hostVethMac, hostVethNames, knowsPod, podVethMac, vethOwnerOf } from './veth-name.js';
import { deleteHostVethPair, deleteOwnedVeth, type OwnedVethLookup } from './veth-delete.js';
import type { NodeSide } from './host.js';
import { egressVeth, egressVethNames } from './wiring-plan.js';

/** Deadline of `DelNetwork` in ms. */
export const DEL_TIMEOUT_MS = 5_000;

/**
 * Runs DEL. `warnings` collects non-fatal problems for the log.
 * @returns the released IP ('' when ipamd held none or could not be asked).
 * @throws CniError 4 for bad env; 5 only when the host veth exists but cannot be deleted.
 */
export async function cmdDel(
  env: CniEnv,
  conf: NetConf,
  warnings: string[],
  ctx: VerbContext = {},
): Promise<{ ip: string }> {
  requireEnv(env, 'DEL');
  const owner = vethOwnerOf(env);
  const names = hostVethNames(conf.vethPrefix, owner);
  // No pod in CNI_ARGS: ADD may have named the veth after a pod this DEL cannot see; its MAC finds it.
  const lookup = { byMac: !knowsPod(owner) };
  const hostMac = hostVethMac(env.containerId, env.ifName);
  const host = hostOf(ctx);
  const ipamd = host.ipamd(conf.ipamdSocket);
  const egress = egressVeth(env.containerId, env.ifName);
  const egressNames = egressVethNames(conf.vethPrefix, env.containerId, env.ifName);
  try {
    const veths =
      conf.ipFamily === 'ipv6'
        ? deleteV6Pair(names, egressNames, [hostMac, egress.hostMac], host, lookup)
        : Promise.allSettled([deleteOwnedVeth(names, hostMac, host, lookup), Promise.resolve(undefined)]);
    const [[unwired, egressEarly], [released]] = await Promise.all([
      veths,
      Promise.allSettled([ipamd.delNetwork({ ...networkIds(env, conf), reason: 'cni-del' }, DEL_TIMEOUT_MS)]),
    ]);
    if (unwired.status === 'rejected') {
      throw cniError('del-veth', (unwired.reason as Error).message, { veth: names[0]! });
    }
    // The name it had (an older eni-ipam's, for a pod wired before the upgrade), for the rules' plan.
    const hostVeth = unwired.value ?? names[0]!;
    const prev = conf.prevResult ? readPrevResult(conf.prevResult, env.ifName) : undefined;
    const egressNamed =
      (released.status === 'fulfilled' && !!released.value.egress_v4_addr) ||
      (released.status === 'rejected' && typeof prev === 'object' && !!prev.egressV4);
    if (egressEarly.status === 'rejected' || (conf.ipFamily !== 'ipv6' && egressNamed)) {
      await deleteOwnedVeth(egressNames, egress.hostMac, host).catch((e: Error) => {
        throw cniError('del-veth', e.message, { veth: egressNames[0]! });
      });
    }
    let ip = '';
    let cleanup: Promise<string[]> | undefined;
    if (released.status === 'rejected') {
      warnings.push(`ipamd not reached on DEL, it will reclaim the IP later: ${(released.reason as Error).message}`);
      if (prev && typeof prev !== 'string' && prev.ipv4) cleanup = teardownHost({ ipv4: prev.ipv4, node: host });
    } else if (released.value.released) {
      ip = released.value.ipv4_addr; // released=false: unknown container or a repeated DEL, also success
      if (!ip) return { ip: released.value.ipv6_addr ?? '' }; // IPv6 only: no rules; routes went with the veths
      // route_table_id 0: ipamd no longer knows the ENI, so rules are found by IP instead.
      cleanup =
        released.value.route_table_id === 0
          ? teardownHost({ ipv4: ip, node: host })
          : teardownHost({
              ipv4: ip,
              node: host,
              plan: {
                netns: env.netns,
                ifName: env.ifName,
                hostVeth,
                hostMac,
                podMac: podVethMac(env.containerId, env.ifName),
                ipv4: ip,
                mtu: conf.mtu,
                routeTableId: released.value.route_table_id,
              },
            });
    }
    if (cleanup) warnings.push(...(await cleanup.catch((e: Error) => [`host cleanup after DEL failed: ${e.message}`])));
    return { ip };
  } finally {
    ipamd.close();
  }
}

/**
 * An IPv6 pod's two host veths deleted, each only with its MAC: under their current names
 * in one helper request when both are there, then (one absent, or wired by an earlier
 * eni-ipam under the older names) one by one through every name (the pod's veth, with
 * `lookup`, by its MAC last).
 * @returns each one's outcome: the name deleted, or undefined when it was not there.
 */
async function deleteV6Pair(
  names: readonly string[],
  egressNames: readonly string[],
  macs: [string, string],
  host: NodeSide,
  lookup: OwnedVethLookup,
): Promise<[PromiseSettledResult<string | undefined>, PromiseSettledResult<string | undefined>]> {
  const [a, b] = await deleteHostVethPair(names[0]!, egressNames[0]!, host, macs);
  const rest = async (r: PromiseSettledResult<boolean>, all: readonly string[], mac: string, l = {}) => {
    if (r.status === 'rejected') throw r.reason;
    return r.value ? all[0] : deleteOwnedVeth(all.slice(1), mac, host, l);
  };
  return Promise.allSettled([rest(a, names, macs[0], lookup), rest(b, egressNames, macs[1])]);
}
