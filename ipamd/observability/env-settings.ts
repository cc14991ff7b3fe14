/**
 * The documents of `GET /v1/ipamd-env-settings` and `GET /v1/networkutils-env-settings`:
 * the settings in force, keyed by their environment variable, as amazon-vpc-cni-k8s's
 * introspection serves them (a flat JSON object; unset numeric targets read 0, its "no
 * target"; CIDR lists as arrays of strings). Only settings eni-ipam implements are listed;
 * ours follow the upstream keys. Pure: config in, JSON out.
 */
import type { IpamdConfig } from '../config.js';

/** Pool settings by env var name (upstream keys first, then eni-ipam's). */
export function ipamdEnvSettings(c: IpamdConfig): Record<string, unknown> {
  return {
    WARM_IP_TARGET: c.warmIpTarget ?? 0,
    WARM_ENI_TARGET: c.warmEniTarget,
    AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: c.customNetworkCfg,
    MINIMUM_IP_TARGET: c.minimumIpTarget ?? 0,
    WARM_PREFIX_TARGET: c.warmPrefixTarget ?? 0,
    ENABLE_PREFIX_DELEGATION: c.enablePrefixDelegation,
    ENABLE_SUBNET_DISCOVERY: c.enableSubnetDiscovery,
    MAX_ENI: c.maxEni ?? -1,
    DISABLE_NETWORK_RESOURCE_PROVISIONING: c.disableNetworkResourceProvisioning,
    IP_COOLDOWN_PERIOD: Math.round(c.ipCooldownMs / 1000),
    // Where ipamd and the plugin log (`stdout` or a path as ipamd sees it): what
    // `eni-ipam support-bundle` collects (and the conflist directory below).
    AWS_VPC_K8S_CNI_LOG_FILE: c.logFile,
    AWS_VPC_K8S_PLUGIN_LOG_FILE: c.pluginLogFile,
    // Where ipamd installs the conflist, as ipamd sees it: the support bundle copies it.
    ENI_IPAM_CNI_CONF_DIR: c.cniConfDir,
  };
}

/** Host-networking settings by env var name (the upstream keys eni-ipam implements, then eni-ipam's). */
export function networkEnvSettings(c: IpamdConfig): Record<string, unknown> {
  return {
    AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS: c.excludeSnatCidrs,
    AWS_VPC_K8S_CNI_EXTERNALSNAT: c.externalSnat,
    AWS_VPC_ENI_MTU: c.eniMtu,
    AWS_VPC_K8S_CNI_VETHPREFIX: c.vethPrefix,
    AWS_VPC_K8S_CNI_CONNMARK: c.connmark,
    AWS_VPC_CNI_NODE_PORT_SUPPORT: c.nodePortSupport,
    // amazon-vpc-cni-k8s reports its snatType number here: 0 none, 1 hashrandom, 2 prng.
    AWS_VPC_K8S_CNI_RANDOMIZESNAT: { none: 0, hashrandom: 1, prng: 2 }[c.randomizeSnat],
    POD_MTU: c.podMtu,
  };
}
