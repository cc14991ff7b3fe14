/**
 * CNI DEL: idempotent, succeeds in the end. Deletes the host veth by its computed name
 * (removing the pair, the host routes and neighbours of both families) and releases the
 * key at ipamd (`DelNetwork` reason "cni-del": every address it holds, IPv4 and IPv6
 * together) in parallel, then removes the pod's ip rules (IPv4 only). An IPv6 pod's
 * egress pair (`v4if0`) is deleted too: in parallel when the config says `ipFamily:
 * ipv6` (both veths in one kernel batch through ipamd's netlink helper: wiring.ts
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
import { hostVethMac, hostVethName, podVethMac } from './veth-name.js';
import { deleteHostVeth, deleteHostVethPair } from './wiring.js';
import { egressVeth } from './wiring-plan.js';

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
  const hostVeth = hostVethName(conf.vethPrefix, env.containerId, env.ifName);
  const host = hostOf(ctx);
  const ipamd = host.ipamd(conf.ipamdSocket);
  const egress = egressVeth(conf.vethPrefix, env.containerId, env.ifName).hostVeth;
  try {
    const veths =
      conf.ipFamily === 'ipv6'
        ? deleteHostVethPair(hostVeth, egress, host)
        : Promise.allSettled([deleteHostVeth(hostVeth, host), Promise.resolve(false)]);
    const [[unwired, egressEarly], [released]] = await Promise.all([
      veths,
      Promise.allSettled([ipamd.delNetwork({ ...networkIds(env, conf), reason: 'cni-del' }, DEL_TIMEOUT_MS)]),
    ]);
    if (unwired.status === 'rejected') {
      throw cniError('del-veth', (unwired.reason as Error).message, { veth: hostVeth });
    }
    const prev = conf.prevResult ? readPrevResult(conf.prevResult, env.ifName) : undefined;
    const egressNamed =
      (released.status === 'fulfilled' && !!released.value.egress_v4_addr) ||
      (released.status === 'rejected' && typeof prev === 'object' && !!prev.egressV4);
    if (egressEarly.status === 'rejected' || (conf.ipFamily !== 'ipv6' && egressNamed)) {
      await deleteHostVeth(egress, host).catch((e: Error) => {
        throw cniError('del-veth', e.message, { veth: egress });
      });
    }
    let ip = '';
    let cleanup: Promise<string[]> | undefined;
    if (released.status === 'rejected') {
      warnings.push(`ipamd not reached on DEL, it will reclaim the IP later: ${(released.reason as Error).message}`);
      if (prev && typeof prev !== 'string' && prev.ipv4)
        cleanup = teardownHost({ hostVeth, ipv4: prev.ipv4, vethDone: true, node: host });
    } else if (released.value.released) {
      ip = released.value.ipv4_addr; // released=false: unknown container or a repeated DEL, also success
      if (!ip) return { ip: released.value.ipv6_addr ?? '' }; // IPv6 only: no rules; routes went with the veths
      // route_table_id 0: ipamd no longer knows the ENI, so rules are found by IP instead.
      cleanup =
        released.value.route_table_id === 0
          ? teardownHost({ hostVeth, ipv4: ip, vethDone: true, node: host })
          : teardownHost({
              hostVeth,
              ipv4: ip,
              vethDone: true,
              node: host,
              plan: {
                netns: env.netns,
                ifName: env.ifName,
                hostVeth,
                hostMac: hostVethMac(env.containerId, env.ifName),
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
