/**
 * The IP family ipamd serves, from ENABLE_IPv4 and ENABLE_IPv6 (docs/design.md#ip-families),
 * and the settings each family refuses. As amazon-vpc-cni-k8s: ENABLE_IPv6=true with
 * ENABLE_IPv4=false is IPv6 mode (a /80 prefix on the primary ENI, a /128 per pod), and
 * needs ENABLE_PREFIX_DELEGATION=true and refuses custom networking. Both true is
 * eni-ipam's own dual-stack mode (an IPv4 from the warm pool and an IPv6 from the /80 per
 * pod); upstream refuses it. Both false serves nothing and is refused. Pure.
 */
import type { IpFamilyMode } from '../proto/ipam.js';
import { ConfigError } from './config-types.js';

/** The settings {@link ipFamilyOf} reads. */
export interface FamilySettings {
  enableIpv4: boolean;
  enableIpv6: boolean;
  enablePrefixDelegation: boolean;
  customNetworkCfg: boolean;
}

/**
 * The mode the settings ask for.
 * @throws ConfigError (one line naming the variable) when both families are off, when an
 *   IPv6 mode lacks ENABLE_PREFIX_DELEGATION=true, or asks for custom networking.
 */
export function ipFamilyOf(s: FamilySettings): IpFamilyMode {
  if (!s.enableIpv6) {
    if (!s.enableIpv4)
      throw new ConfigError(
        'ENABLE_IPv4',
        'ENABLE_IPv4=false is refused with ENABLE_IPv6=false: ipamd would serve no family; accepted: ENABLE_IPv4=true, or ENABLE_IPv6=true',
      );
    return 'ipv4';
  }
  const mode: IpFamilyMode = s.enableIpv4 ? 'dual' : 'ipv6';
  const asked = `ENABLE_IPv6=true with ENABLE_IPv4=${s.enableIpv4} (${mode} mode)`;
  if (!s.enablePrefixDelegation)
    throw new ConfigError(
      'ENABLE_PREFIX_DELEGATION',
      `ENABLE_PREFIX_DELEGATION=false is refused: ${asked} serves pods from a /80 prefix and needs ENABLE_PREFIX_DELEGATION=true`,
    );
  if (s.customNetworkCfg)
    throw new ConfigError(
      'AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG',
      `AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true is refused: ${asked} does not support custom networking; accepted: false`,
    );
  return mode;
}
