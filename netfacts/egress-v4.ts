/**
 * The node-wide rules of IPv4 egress for IPv6 pods (issue #31; docs/design.md#ip-families):
 * an IPv6 pod's `v4if0` holds an address from 169.254.172.0/22 that must never leave the
 * node as is, so the node SNATs it to its primary IPv4, and refuses new connections
 * forwarded *to* the range (only replies reach the pods). Rendered here as data (pure),
 * shared by whoever installs them: ipamd's host networking in IPv6 mode, once per node,
 * as it installs AWS-SNAT-CHAIN-0 (not the plugin per ADD, which would start an iptables
 * process per pod); the tests apply the same text.
 */
import { EGRESS_V4_RANGE } from '../proto/ipam.js';

/** The nat chain holding the SNAT, and the filter chain refusing new inbound connections. */
export const EGRESS_V4_NAT_CHAIN = 'ENI-IPAM-EGRESS-V4';
export const EGRESS_V4_FILTER_CHAIN = 'ENI-IPAM-EGRESS-V4-IN';

/**
 * `iptables-restore --noflush` text that (re)fills both chains (declaring a chain flushes
 * it): nat: traffic from the range to anything outside it (multicast excluded, as
 * upstream) is SNATed to `nodeIpv4`; filter: NEW connections to the range are rejected.
 */
export function egressV4Restore(nodeIpv4: string): string {
  return [
    '*nat',
    `:${EGRESS_V4_NAT_CHAIN} - [0:0]`,
    `-A ${EGRESS_V4_NAT_CHAIN} -d ${EGRESS_V4_RANGE} -j RETURN`,
    `-A ${EGRESS_V4_NAT_CHAIN} -d 224.0.0.0/4 -j RETURN`,
    `-A ${EGRESS_V4_NAT_CHAIN} -j SNAT --to-source ${nodeIpv4}`,
    'COMMIT',
    '*filter',
    `:${EGRESS_V4_FILTER_CHAIN} - [0:0]`,
    `-A ${EGRESS_V4_FILTER_CHAIN} -d ${EGRESS_V4_RANGE} -m conntrack --ctstate NEW -j REJECT`,
    'COMMIT',
    '',
  ].join('\n');
}

/** The jumps into the chains, `[table, chain, ...rule]`: add each once (`-C` before `-A`). */
export const EGRESS_V4_JUMPS: readonly (readonly string[])[] = [
  ['nat', 'POSTROUTING', '-s', EGRESS_V4_RANGE, '-j', EGRESS_V4_NAT_CHAIN],
  ['filter', 'FORWARD', '-j', EGRESS_V4_FILTER_CHAIN],
];
