/**
 * A pod wired as eni-ipam wired every pod before host veths were named after their pod
 * (issue #39 item 1): main's cni-plugin/add.ts path with its names, for the upgrade tests.
 * The same AddNetwork request, the same wiring functions of the node side given (ipamd's
 * netlink helper or `ip`), the same MACs, and the names of then: veth-name.ts
 * `legacyHostVethName` of the key for the pod's veth and of `<ifname>/v4if0` for an IPv6
 * pod's egress veth. Its result, as main's `finishAdd` encoded it, is the prevResult the
 * runtime keeps for DEL and CHECK.
 */
import type { CniEnv } from '../../cni-plugin/env.js';
import type { PluginHost } from '../../cni-plugin/host.js';
import type { NetConf } from '../../cni-plugin/netconf.js';
import { startNetlinkWiring } from '../../cni-plugin/netlink-wiring.js';
import { networkIds } from '../../cni-plugin/request.js';
import { encodeAddResult } from '../../cni-plugin/result.js';
import { hostVethMac, legacyHostVethName, podVethMac } from '../../cni-plugin/veth-name.js';
import { startWiring, type WiringPlan } from '../../cni-plugin/wiring.js';
import { egressVeth } from '../../cni-plugin/wiring-plan.js';

/** What {@link wireLegacy} made: the plan it wired and the CNI result (the runtime's prevResult). */
export interface LegacyWired {
  plan: WiringPlan;
  result: Record<string, unknown>;
}

/**
 * ADD of `env` (its CNI_ARGS pod included in the request, as then) by the earlier code
 * path: AddNetwork at `conf.ipamdSocket` through `host`, then the veth pair(s) wired on
 * `host`'s node side under the earlier names (through `host.netlink` when it has one).
 * @throws the AddNetwork or wiring error (nothing is undone: a test fails on it).
 */
export async function wireLegacy(
  env: CniEnv,
  conf: NetConf,
  host: PluginHost,
  family: 'ipv4' | 'ipv6',
): Promise<LegacyWired> {
  const { containerId: id, ifName } = env;
  const ipamd = host.ipamd(conf.ipamdSocket);
  const reply = await ipamd
    .addNetwork({ ...networkIds(env, conf), ip_family: family }, 10_000)
    .finally(() => ipamd.close());
  if (!reply.success) throw new Error(`AddNetwork refused: ${reply.message ?? JSON.stringify(reply)}`);
  const plan: WiringPlan = {
    netns: env.netns,
    ifName,
    hostVeth: legacyHostVethName(conf.vethPrefix, id, ifName),
    hostMac: hostVethMac(id, ifName),
    podMac: podVethMac(id, ifName),
    mtu: conf.mtu,
    family,
    ipv4: reply.ipv4_addr,
    routeTableId: reply.route_table_id,
    ...(family === 'ipv6'
      ? {
          ipv6: reply.ipv6_addr!,
          egress: { ...egressVeth(id, ifName), hostVeth: legacyHostVethName(conf.vethPrefix, id, `${ifName}/v4if0`) },
          egressV4: reply.egress_v4_addr!,
        }
      : {}),
  };
  const wiring = host.netlink ? startNetlinkWiring(plan, host, host.netlink) : startWiring(plan, host);
  await wiring.finish(plan);
  const result = encodeAddResult(conf.cniVersion, {
    hostVeth: { name: plan.hostVeth, mac: plan.hostMac },
    pod: { ifName, mac: plan.podMac, netns: env.netns },
    ipv4: plan.ipv4,
    ...(plan.ipv6 ? { ipv6: plan.ipv6 } : {}),
    ...(plan.egress
      ? {
          egress: {
            hostVeth: { name: plan.egress.hostVeth, mac: plan.egress.hostMac },
            pod: { ifName: plan.egress.ifName, mac: plan.egress.podMac },
            ipv4: plan.egressV4!,
          },
        }
      : {}),
    mtu: conf.mtu,
  });
  return { plan, result: result as unknown as Record<string, unknown> };
}
