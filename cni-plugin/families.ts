/**
 * IP families of a pod (docs/design.md#ip-families; issue #31): which addresses ipamd's
 * AddNetwork answer gives for the mode it serves, checked against the family the network
 * config asks for (`ipFamily`), and the names of the second interface an IPv6 pod gets for
 * IPv4 egress. Pure.
 *
 * - `ipv4`: an IPv4 `/32` on CNI_IFNAME (the warm pool), as before.
 * - `ipv6`: an IPv6 `/128` from the node's /80 on CNI_IFNAME, and, when ipamd gives one, an
 *   IPv4 egress address from 169.254.172.0/22 on a second veth pair whose pod end is
 *   `v4if0` (SNATed by the node to its primary IPv4: netfacts/egress-v4.ts).
 * - `dual`: both an IPv4 and an IPv6 on CNI_IFNAME; an answer with one of them only is
 *   refused (and given back) so a pod never holds one without the other.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { servedFamily, type AddNetworkReply, type IpFamilyMode } from '../proto/ipam.js';
import { cniError } from './error-catalogue.js';
import type { CniError } from './errors.js';
import type { NetConf } from './netconf.js';

/** Link-local IPv6 gateway of every pod (its permanent neighbour points at the host veth MAC), as upstream's fe80::1. */
export const POD_GATEWAY_V6 = 'fe80::1';
/** Pod-side name of the IPv4 egress interface of an IPv6 pod (as upstream's egress plugin). */
export const EGRESS_IFNAME = 'v4if0';
/** Prefix length of a pod's IPv6 address. */
export const POD_V6_PREFIX_LEN = 128;

/** The addresses one ADD wires, by family. */
export interface PodAddresses {
  /** The mode ipamd serves. */
  family: IpFamilyMode;
  /** IPv4 on CNI_IFNAME (`ipv4`, `dual`); '' in `ipv6` mode. */
  ipv4: string;
  /** IPv6 on CNI_IFNAME (`ipv6`, `dual`), no prefix length; undefined in `ipv4` mode. */
  ipv6?: string;
  /** `ipv6` mode: the IPv4 egress address for `v4if0`; undefined when ipamd gives none. */
  egressV4?: string;
}

/** The family stage 1 of ADD wires routes for before ipamd answers: the config's, `ipv4` for `auto`. */
export function expectedFamily(conf: Pick<NetConf, 'ipFamily'>): IpFamilyMode {
  return conf.ipFamily === 'auto' ? 'ipv4' : conf.ipFamily;
}

/** What an ADD answer means for the pod, or the CniError refusing it (and whether an address must be given back). */
export type FamilyVerdict = { ok: true; addrs: PodAddresses } | { ok: false; error: CniError; giveBack: boolean };

/**
 * Reads the mode and addresses out of `reply` for a config asking for `asked`.
 * Refused: a mode this build does not know (100 `add-unknown-family`); a mode other than
 * the config's `ipFamily` unless it is `auto` (7 `add-family`, naming both); `success`
 * false (100 `add-no-ipv4`/`add-no-address` with ipamd's message); an answer missing an
 * address of its mode, or with a malformed one (100 `add-no-address`). `giveBack` is true
 * when ipamd reported success (it holds something under the key, which must be released).
 */
export function readPodAddresses(reply: AddNetworkReply, asked: NetConf['ipFamily']): FamilyVerdict {
  const giveBack = reply.success;
  const mode = servedFamily(reply.ip_family);
  if (!mode) return { ok: false, giveBack, error: cniError('add-unknown-family', '', { mode: reply.ip_family ?? '' }) };
  if (asked !== 'auto' && asked !== mode)
    return {
      ok: false,
      giveBack,
      error: cniError('add-family', reply.success ? '' : reply.message, { served: `${mode} (ipamd)`, asked }),
    };
  const detail = reply.message || `reply ${JSON.stringify(reply)}`;
  if (mode === 'ipv4') {
    if (!reply.success || !isIPv4(reply.ipv4_addr))
      return { ok: false, giveBack, error: cniError('add-no-ipv4', detail) };
    return { ok: true, addrs: { family: mode, ipv4: reply.ipv4_addr } };
  }
  const missing: string[] = [];
  if (!isIPv6(reply.ipv6_addr)) missing.push('an IPv6 address');
  if (mode === 'dual' && !isIPv4(reply.ipv4_addr)) missing.push('an IPv4 address');
  const egress = reply.egress_v4_addr ?? '';
  if (mode === 'ipv6' && egress && !isIPv4(egress)) missing.push(`a valid IPv4 egress address (got ${egress})`);
  const len = reply.ipv6_prefix_len || POD_V6_PREFIX_LEN;
  if (len !== POD_V6_PREFIX_LEN) missing.push(`a /${POD_V6_PREFIX_LEN} (got /${len})`);
  if (!reply.success || missing.length)
    return {
      ok: false,
      giveBack,
      error: cniError('add-no-address', detail, { mode, missing: missing.join(' and ') || 'an address' }),
    };
  return {
    ok: true,
    addrs: {
      family: mode,
      ipv4: mode === 'dual' ? reply.ipv4_addr : '',
      ipv6: reply.ipv6_addr,
      ...(mode === 'ipv6' && egress ? { egressV4: egress } : {}),
    },
  };
}

/** The addresses of `a` for messages, e.g. `10.0.5.10 + 2600:1f14::5`. */
export function describeAddresses(a: Pick<PodAddresses, 'ipv4' | 'ipv6' | 'egressV4'>): string {
  return [a.ipv4, a.ipv6, a.egressV4 ? `${a.egressV4} (egress)` : ''].filter(Boolean).join(' + ');
}
