/**
 * Installs the node-wide IPv4 egress rules of IPv6 pods (netfacts/egress-v4.ts: SNAT of
 * 169.254.172.0/22 to the node's primary IPv4, REJECT of NEW connections forwarded to the
 * range) once, in `ipv6` mode, as AWS-SNAT-CHAIN-0 is installed in `ipv4` mode. No SNAT
 * for IPv6. Idempotent: the chains are refilled, the jumps added once.
 */
import { EGRESS_V4_JUMPS, egressV4Restore } from '../../netfacts/egress-v4.js';
import { detectIptablesBackend, Iptables } from './iptables.js';
import { CommandRunner } from './runner.js';

/**
 * Applies the egress rules for `nodeIpv4` in the node's netns (or `netns`, tests).
 * @throws CommandError when iptables refuses them (ipamd does not serve IPv6 pods then).
 */
export async function applyEgressV4(nodeIpv4: string, netns?: string): Promise<void> {
  const runner = new CommandRunner(netns ? { netns } : {});
  const ipt = new Iptables(runner, await detectIptablesBackend(runner));
  await ipt.restoreNoflush(egressV4Restore(nodeIpv4));
  for (const [table, chain, ...spec] of EGRESS_V4_JUMPS) await ipt.ensureRule(table!, chain!, spec);
}
