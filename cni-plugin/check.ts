/**
 * CNI CHECK (spec 0.4.0+, "CHECK"): verifies that the attachment ADD made still exists
 * as `prevResult` describes it. ipamd must still hold the address for this key
 * (`CheckNetwork`, which never assigns); inside the pod netns (entered by path only):
 * the interface, its `<ip>/32`, the `169.254.1.1` scope-link route, the default route
 * via it, the permanent neighbour entry pointing at the host veth MAC; on the node: the
 * host veth, the host route `<ip>/32` to it, and the ip rules `policyRoutingLines` adds
 * for the ENI's route table. The IPv6 side when prevResult has one (check-drift-v6.ts:
 * `/128`, `::/0 via fe80::1`, its permanent neighbour, the node's `/128` route), and an
 * IPv6 pod's egress pair `v4if0` (checked like an IPv4 pod's interface, without rules);
 * ipamd must hold every address prevResult names. Success prints nothing; drift fails
 * with code 100 naming every missing piece.
 */
import { findDrift } from './check-drift.js';
import { requireEnv, type CniEnv } from './env.js';
import type { VerbContext } from './invocation.js';
import { cniError } from './error-catalogue.js';
import { ipShow } from '../netfacts/ip-query.js';
import { IpamdCallError } from '../proto/ipamd-api.js';
import { hostOf } from './process-host.js';
import type { NetConf } from './netconf.js';
import { expectedPodRules } from './pod-rules.js';
import { readPrevResult } from './prev-result.js';
import { networkIds } from './request.js';
import { versionAtLeast } from './versions.js';
import { hostVethMac, hostVethNames, podVethMac, vethOwnerOf } from './veth-name.js';
import type { WiringPlan } from './wiring.js';
import { familyDrift, heldProblems, presentVethName, V6_ROUTES } from './check-families.js';

/** Deadline of `CheckNetwork` in ms. */
export const CHECK_TIMEOUT_MS = 5_000;

/**
 * Runs CHECK.
 * @throws CniError 1 for a config version before 0.4.0; 4 bad env; 7 no usable
 *   prevResult; 11 ipamd unreachable; 100 drift (message lists what is missing or
 *   different, e.g. `route default via 169.254.1.1 dev eth0 missing in /var/run/netns/x`).
 */
export async function cmdCheck(env: CniEnv, conf: NetConf, ctx: VerbContext = {}): Promise<void> {
  if (!versionAtLeast(conf.cniVersion, '0.4.0'))
    throw cniError('check-version', `cniVersion ${conf.cniVersion}; CHECK needs 0.4.0`);
  requireEnv(env, 'CHECK');
  const prev = readPrevResult(conf.prevResult, env.ifName);
  if (typeof prev === 'string')
    throw cniError('check-prev-result', 'CHECK verifies the attachment against prevResult, the result of its ADD', {
      problem: prev,
    });
  const problems: string[] = [];
  if (prev.podIf?.sandbox && prev.podIf.sandbox !== env.netns)
    problems.push(`prevResult puts ${env.ifName} in ${prev.podIf.sandbox}, not CNI_NETNS ${env.netns}`);
  if (prev.ipv4 && prev.prefixLen !== 32)
    problems.push(`prevResult gives ${prev.ipv4}/${prev.prefixLen}, this plugin assigns /32`);
  if (prev.ipv6 && prev.ipv6PrefixLen !== 128)
    problems.push(`prevResult gives ${prev.ipv6}/${prev.ipv6PrefixLen}, this plugin assigns /128`);

  const host = hostOf(ctx);
  const ipamd = host.ipamd(conf.ipamdSocket);
  const held = ipamd.checkNetwork(networkIds(env, conf), CHECK_TIMEOUT_MS).finally(() => ipamd.close());
  const podState = ipShow(['addr show', 'route show', 'neigh show', V6_ROUTES], env.netns, host.ip);
  const nodeState = ipShow(['link show', 'route show', 'rule show', V6_ROUTES], host.nodeNetns, host.ip);
  const [h, pod, node] = await Promise.allSettled([held, podState, nodeState]);

  let routeTableId: number | undefined;
  if (h.status === 'rejected') {
    const e = h.reason as Error;
    if (!(e instanceof IpamdCallError) || e.statusName === 'UNAVAILABLE' || e.statusName === 'DEADLINE_EXCEEDED') {
      throw cniError('check-ipamd-down', e.message);
    }
    throw cniError('check-refused', e.message);
  } else {
    const held = heldProblems(h.value, prev, `container ${env.containerId} ${env.ifName} in network ${conf.name}`);
    problems.push(...held);
    if (!held.length) routeTableId = h.value.route_table_id;
  }
  if (pod.status === 'rejected') throw cniError('check-netns', (pod.reason as Error).message, { netns: env.netns });
  if (node.status === 'rejected') throw cniError('check-node-state', (node.reason as Error).message);

  const [addrs, routes, neighs, routes6] = pod.value;
  const [links, nodeRoutes, rules, nodeRoutes6] = node.value;
  const hostMac = hostVethMac(env.containerId, env.ifName);
  // A pod wired by an earlier eni-ipam keeps that name: CHECK checks the one it has.
  const hostVeth = presentVethName(links!, hostVethNames(conf.vethPrefix, vethOwnerOf(env)), hostMac);
  const plan: WiringPlan = {
    netns: env.netns,
    ifName: env.ifName,
    hostVeth,
    hostMac,
    podMac: podVethMac(env.containerId, env.ifName),
    ipv4: prev.ipv4,
    mtu: conf.mtu,
    routeTableId: routeTableId ?? 0,
  };
  problems.push(
    ...findDrift(
      {
        netns: env.netns,
        ifName: env.ifName,
        ipv4: prev.ipv4,
        hostVeth,
        hostMac: plan.hostMac,
        ...(prev.podIf?.mac ? { podMac: prev.podIf.mac } : {}),
        // The table is only known when ipamd still holds this IP; otherwise that is the problem reported.
        rules: routeTableId !== undefined ? expectedPodRules(plan) : [],
      },
      { addrs: addrs!, routes: routes!, neighs: neighs! },
      { links: links!, routes: nodeRoutes!, rules: rules! },
    ),
  );
  problems.push(
    ...familyDrift(plan, prev, conf.vethPrefix, env.containerId, {
      pod: { addrs: addrs!, routes: routes!, neighs: neighs!, routes6: routes6! },
      node: { links: links!, routes: nodeRoutes!, rules: rules!, routes6: nodeRoutes6! },
    }),
  );
  if (problems.length)
    throw cniError('check-drift', `CHECK of ${env.ifName} in ${env.netns} against prevResult`, {
      problems: problems.join('; '),
    });
}
