/**
 * CNI GC (spec 1.1.0, "GC"): the runtime lists the attachments it still knows in
 * `cni.dev/valid-attachments` (`[{"containerID","ifname"}]`); ipamd releases every
 * allocation of this network not listed (`GcNetwork`: every address of a key, IPv4 and
 * IPv6 together), and the plugin removes the leftover node side of each released one
 * (host veth with the host routes and neighbours of both families, an IPv6 pod's egress
 * veth, the IPv4 ip rules). Nothing is printed on success.
 */
import { IPAM_API_VERSION, type ValidAttachment } from '../proto/ipam.js';
import { cniError } from './error-catalogue.js';
import type { VerbContext } from './invocation.js';
import { teardownHost } from './host-teardown.js';
import { IpamdCallError } from '../proto/ipamd-api.js';
import { hostOf } from './process-host.js';
import type { NetConf } from './netconf.js';
import { PLUGIN_VERSION } from './request.js';
import { versionAtLeast } from './versions.js';
import { hostVethMac, hostVethNames, knowsPod, podVethMac } from './veth-name.js';
import { deleteOwnedVeth } from './veth-delete.js';
import { egressVeth, egressVethNames } from './wiring-plan.js';

/** Deadline of `GcNetwork` in ms (it waits for one checkpoint write). */
export const GC_TIMEOUT_MS = 10_000;

/** The config key of the valid attachments, and the alias some libcni versions also send. */
export const VALID_ATTACHMENTS_KEYS = ['cni.dev/valid-attachments', 'cni.dev/attachments'] as const;

/**
 * Reads `cni.dev/valid-attachments` (or its alias `cni.dev/attachments`).
 * @throws CniError 7 when it is absent or not a list of `{containerID, ifname}` strings
 *   (a GC without the list would release everything, so it is refused).
 */
export function validAttachments(conf: NetConf): ValidAttachment[] {
  const key = VALID_ATTACHMENTS_KEYS.find((k) => conf[k] !== undefined);
  const raw = key ? conf[key] : undefined;
  if (!Array.isArray(raw)) throw cniError('gc-attachments', key ? `${key} is not a list` : 'the key is absent');
  return raw.map((a, i) => {
    const o = (typeof a === 'object' && a !== null ? a : {}) as Record<string, unknown>;
    if (typeof o.containerID !== 'string' || !o.containerID || typeof o.ifname !== 'string' || !o.ifname) {
      throw cniError('gc-attachment', 'expected {"containerID": string, "ifname": string}', {
        key: key ?? '',
        index: i,
      });
    }
    return { container_id: o.containerID, if_name: o.ifname };
  });
}

/**
 * Runs GC. `warnings` collects non-fatal problems for the log.
 * @throws CniError 1 for a config version before 1.1.0, 7 for a bad valid-attachments
 *   list, 11 when ipamd cannot be reached, 100 when ipamd refused, 5 when a released
 *   attachment's host veth could not be deleted (all others are still tried).
 */
export async function cmdGc(conf: NetConf, warnings: string[], ctx: VerbContext = {}): Promise<{ released: string[] }> {
  if (!versionAtLeast(conf.cniVersion, '1.1.0'))
    throw cniError('gc-version', `cniVersion ${conf.cniVersion}; GC needs 1.1.0`);
  const valid = validAttachments(conf);
  const host = hostOf(ctx);
  const ipamd = host.ipamd(conf.ipamdSocket);
  let released;
  try {
    released = (
      await ipamd.gcNetwork(
        {
          api_version: IPAM_API_VERSION,
          client_version: PLUGIN_VERSION,
          network_name: conf.name,
          valid_attachments: valid,
        },
        GC_TIMEOUT_MS,
      )
    ).released;
  } catch (e) {
    const down =
      !(e instanceof IpamdCallError) || e.statusName === 'UNAVAILABLE' || e.statusName === 'DEADLINE_EXCEEDED';
    throw cniError(down ? 'gc-ipamd-down' : 'gc-refused', (e as Error).message);
  } finally {
    ipamd.close();
  }
  const failed: string[] = [];
  await Promise.all(
    released.map(async (r) => {
      let hostVeth = '';
      const owner = {
        containerId: r.container_id,
        ifName: r.if_name,
        pod: { namespace: r.k8s_pod_namespace ?? '', name: r.k8s_pod_name ?? '' },
      };
      const names = hostVethNames(conf.vethPrefix, owner);
      const hostMac = hostVethMac(r.container_id, r.if_name);
      const what = [r.ipv4_addr, r.ipv6_addr, r.egress_v4_addr].filter(Boolean).join(', ');
      try {
        if (r.egress_v4_addr) {
          const e = egressVeth(r.container_id, r.if_name);
          await deleteOwnedVeth(egressVethNames(conf.vethPrefix, r.container_id, r.if_name), e.hostMac, host);
        }
        // Only this attachment's veth (its MAC): a newer sandbox of the same pod has the same name.
        // A pod ipamd does not know (adopted from the kernel): the link of that MAC, whatever its name.
        hostVeth = (await deleteOwnedVeth(names, hostMac, host, { byMac: !knowsPod(owner) })) ?? names[0]!;
        const plan = {
          netns: '',
          ifName: r.if_name,
          hostVeth,
          hostMac,
          podMac: podVethMac(r.container_id, r.if_name),
          ipv4: r.ipv4_addr,
          mtu: conf.mtu,
          routeTableId: r.route_table_id,
        };
        warnings.push(
          ...(await teardownHost({
            ipv4: r.ipv4_addr,
            node: host,
            ...(r.route_table_id ? { plan } : {}),
          })),
        );
      } catch (e) {
        failed.push(`${hostVeth || names[0]} (${what}): ${(e as Error).message}`);
      }
    }),
  );
  if (failed.length) throw cniError('gc-veth', failed.join('; '), { released: released.length, failed: failed.length });
  return { released: released.map((r) => [r.ipv4_addr, r.ipv6_addr].filter(Boolean).join('+')) };
}
