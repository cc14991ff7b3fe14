/**
 * CNI DEL: idempotent, succeeds in the end. Deletes the host veth by its computed name
 * (removing the pair and the host route) and releases the IP at ipamd (`DelNetwork`
 * reason "cni-del") in parallel, then removes the pod's ip rules. A missing/empty netns,
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
import { deleteHostVeth } from './wiring.js';

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
  try {
    const [unwired, released] = await Promise.allSettled([
      deleteHostVeth(hostVeth, host),
      ipamd.delNetwork({ ...networkIds(env, conf), reason: 'cni-del' }, DEL_TIMEOUT_MS),
    ]);
    if (unwired.status === 'rejected') {
      throw cniError('del-veth', (unwired.reason as Error).message, { veth: hostVeth });
    }
    let ip = '';
    let cleanup: Promise<string[]> | undefined;
    if (released.status === 'rejected') {
      warnings.push(`ipamd not reached on DEL, it will reclaim the IP later: ${(released.reason as Error).message}`);
      const prev = conf.prevResult ? readPrevResult(conf.prevResult, env.ifName) : undefined;
      if (prev && typeof prev !== 'string')
        cleanup = teardownHost({ hostVeth, ipv4: prev.ipv4, vethDone: true, node: host });
    } else if (released.value.released) {
      ip = released.value.ipv4_addr; // released=false: unknown container or a repeated DEL, also success
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
