/**
 * The environment aws-node's own DaemonSet sets by default (amazon-vpc-cni-k8s v1.23.1:
 * config/master/aws-k8s-cni.yaml and the aws-vpc-cni chart's `env`, the same list), so a
 * node taken over from aws-node with its values copied over starts without a warning:
 * no "ignored" line for these values, whatever the mode (docs/configuration.md). Pure.
 */

/** Variable → the value aws-node's DaemonSet gives it (MY_NODE_NAME and MY_POD_NAME: the downward API). */
export const AWS_NODE_MANIFEST_ENV: Readonly<Record<string, string>> = {
  ADDITIONAL_ENI_TAGS: '{}',
  AWS_VPC_CNI_NODE_PORT_SUPPORT: 'true',
  AWS_VPC_ENI_MTU: '9001',
  AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'false',
  AWS_VPC_K8S_CNI_EXTERNALSNAT: 'false',
  AWS_VPC_K8S_CNI_LOGLEVEL: 'DEBUG',
  AWS_VPC_K8S_CNI_LOG_FILE: '/host/var/log/aws-routed-eni/ipamd.log',
  AWS_VPC_K8S_CNI_RANDOMIZESNAT: 'prng',
  AWS_VPC_K8S_CNI_VETHPREFIX: 'eni',
  AWS_VPC_K8S_PLUGIN_LOG_FILE: '/var/log/aws-routed-eni/plugin.log',
  AWS_VPC_K8S_PLUGIN_LOG_LEVEL: 'DEBUG',
  DISABLE_INTROSPECTION: 'false',
  DISABLE_METRICS: 'false',
  DISABLE_NETWORK_RESOURCE_PROVISIONING: 'false',
  DISABLE_TCP_EARLY_DEMUX: 'false',
  ENABLE_IMDS_ONLY_MODE: 'false',
  ENABLE_IPv4: 'true',
  ENABLE_IPv6: 'false',
  ENABLE_MULTI_NIC: 'false',
  ENABLE_POD_ENI: 'false',
  ENABLE_PREFIX_DELEGATION: 'false',
  ENABLE_SUBNET_DISCOVERY: 'true',
  NETWORK_POLICY_ENFORCING_MODE: 'standard',
  VPC_CNI_VERSION: 'v1.23.1',
  WARM_ENI_TARGET: '1',
  WARM_PREFIX_TARGET: '1',
};

/** Values set per pod or per release rather than fixed: any version tag, any pod name. */
const VARYING: Readonly<Record<string, RegExp>> = {
  VPC_CNI_VERSION: /^v[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.-]+)?$/,
  MY_POD_NAME: /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/,
  MY_NODE_NAME: /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/,
};

/** True when `raw` (blanks around ignored, case-insensitive) is what aws-node's DaemonSet sets `name` to. */
export function isAwsNodeDefault(name: string, raw: string): boolean {
  const v = raw.replace(/^[ \t\n\f\r]+|[ \t\n\f\r]+$/g, '');
  const varying = VARYING[name];
  if (varying) return varying.test(v);
  const d = AWS_NODE_MANIFEST_ENV[name];
  return d !== undefined && d.toLowerCase() === v.toLowerCase();
}
