/**
 * Every environment variable amazon-vpc-cni-k8s's aws-node reads (its ipamd, the
 * entrypoint that writes the conflist, the init container and the CNI plugin; read from
 * upstream's source and README, v1.23), with upstream's default and meaning, and what
 * eni-ipam does with each (docs/configuration.md#every-aws-node-setting). Upstream's
 * defaults are always accepted: a refused variable is refused only for a value that asks
 * for what eni-ipam does not do. Checked at start by aws-node-check.ts; rendered by
 * config-reference.ts. Meanings are ours, written from upstream's behaviour. The warned
 * rows are in aws-node-vars-warned.ts.
 */
import { FALSE, honoured, refused, type AwsNodeVar } from './aws-node-var.js';
import { AWS_NODE_WARNED } from './aws-node-vars-warned.js';

/** The honoured and refused rows, then the warned ones; documentation order. */
export const AWS_NODE_VARS: readonly AwsNodeVar[] = [
  honoured('WARM_ENI_TARGET', 'ipamd', '1', "Whole ENIs' worth of free addresses to keep when no IP target is set."),
  honoured('WARM_IP_TARGET', 'ipamd, entrypoint', 'unset', 'Free addresses to keep; replaces the ENI target.'),
  honoured('MINIMUM_IP_TARGET', 'ipamd, entrypoint', 'unset', 'Floor on the addresses held by the node.'),
  honoured(
    'WARM_PREFIX_TARGET',
    'ipamd, entrypoint',
    'unset (the chart sets 1)',
    'Free /28 prefixes to keep with prefix delegation; ignored without it.',
    'Without ENABLE_PREFIX_DELEGATION=true it is ignored, as upstream does, with one warning.',
  ),
  honoured(
    'ENABLE_PREFIX_DELEGATION',
    'ipamd, entrypoint',
    'false',
    'Assign /28 prefixes to ENIs instead of single addresses.',
  ),
  honoured('MAX_ENI', 'ipamd', 'unset (instance limit)', 'Cap on the ENIs attached to the node.'),
  honoured(
    'AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG',
    'ipamd',
    'false',
    "New ENIs take subnet and security groups from the node's ENIConfig.",
  ),
  honoured(
    'ENI_CONFIG_ANNOTATION_DEF',
    'ipamd',
    'k8s.amazonaws.com/eniConfig',
    'Node annotation naming its ENIConfig.',
  ),
  honoured('ENI_CONFIG_LABEL_DEF', 'ipamd', 'k8s.amazonaws.com/eniConfig', 'Node label naming its ENIConfig.'),
  honoured('ENABLE_SUBNET_DISCOVERY', 'ipamd', 'true', 'New ENIs may go to other subnets tagged for the CNI.'),
  honoured(
    'DISABLE_NETWORK_RESOURCE_PROVISIONING',
    'ipamd',
    'false',
    'Never create ENIs or assign addresses; use what is attached.',
  ),
  honoured('DISABLE_LEAKED_ENI_CLEANUP', 'ipamd', 'false', 'Skip the periodic deletion of leaked ENIs.'),
  honoured(
    'AWS_MANAGE_ENIS_NON_SCHEDULABLE',
    'ipamd',
    'false',
    'Whether ipamd still adds and frees ENIs while the node is unschedulable (cordoned).',
  ),
  honoured('IP_COOLDOWN_PERIOD', 'ipamd, entrypoint', '30', 'Seconds a released address rests before reuse.'),
  honoured(
    'NETWORK_POLICY_ENFORCING_MODE',
    'ipamd',
    'standard',
    'How the network policy agent treats a new pod: standard (allow until policies apply) or strict (deny).',
    "ipamd answers it to the agent's GetNetworkPolicyConfigs; standard and strict only: aws-node's none is refused (the agent exits on it).",
  ),
  honoured('MY_NODE_NAME', 'ipamd', "the pod's node (downward API)", 'Kubernetes name of this node.'),
  honoured('CLUSTER_NAME', 'ipamd', 'unset', 'Cluster name tagged on the ENIs ipamd creates.'),
  honoured('ADDITIONAL_ENI_TAGS', 'ipamd', '{}', 'JSON object of extra tags on created ENIs.'),
  honoured('AWS_EC2_ENDPOINT', 'ipamd', 'unset (SDK default)', 'EC2 API endpoint URL.'),
  honoured('AWS_VPC_ENI_MTU', 'ipamd, entrypoint', '9001', 'MTU of the ENIs.'),
  honoured('POD_MTU', 'entrypoint', 'AWS_VPC_ENI_MTU', 'MTU of pod interfaces.'),
  honoured('AWS_VPC_K8S_CNI_VETHPREFIX', 'ipamd, entrypoint', 'eni', 'Prefix of host-side veth names.'),
  honoured('AWS_VPC_K8S_CNI_EXTERNALSNAT', 'ipamd', 'false', 'SNAT happens outside the node: no SNAT rules.'),
  honoured('AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS', 'ipamd', 'empty', 'IPv4 CIDRs pod traffic reaches without SNAT.'),
  honoured(
    'AWS_VPC_K8S_CNI_RANDOMIZESNAT',
    'ipamd, entrypoint',
    'prng',
    'Port randomisation of the SNAT rule: prng (--random-fully), hashrandom (--random) or none.',
  ),
  honoured(
    'AWS_VPC_CNI_NODE_PORT_SUPPORT',
    'ipamd',
    'true',
    'NodePort traffic to pods on secondary ENIs returns through the primary ENI (connmark rules).',
  ),
  honoured('AWS_VPC_K8S_CNI_CONNMARK', 'ipamd', '0x80', 'The connection mark of the NodePort rules.'),
  honoured('ENABLE_BANDWIDTH_PLUGIN', 'entrypoint', 'false', 'Chain the bandwidth plugin in the conflist.'),
  honoured('AWS_VPC_K8S_CNI_LOGLEVEL', 'ipamd', 'DEBUG', "ipamd's log level."),
  honoured(
    'AWS_VPC_K8S_CNI_LOG_FILE',
    'ipamd',
    '/host/var/log/aws-routed-eni/ipamd.log',
    "ipamd's log: stdout or a file.",
  ),
  honoured(
    'AWS_VPC_K8S_PLUGIN_LOG_FILE',
    'entrypoint',
    '/var/log/aws-routed-eni/plugin.log',
    "The CNI plugin's log file.",
  ),
  honoured('INTROSPECTION_BIND_ADDRESS', 'ipamd', '127.0.0.1:61679', 'host:port of the introspection endpoint.'),
  honoured('DISABLE_INTROSPECTION', 'ipamd', 'false', 'Do not serve introspection.'),
  honoured('DISABLE_METRICS', 'ipamd', 'false', 'Do not serve metrics on :61678.'),
  honoured(
    'ENABLE_IPv6',
    'ipamd, entrypoint, init',
    'false',
    'IPv6 mode: pods get IPv6 addresses (prefix delegation).',
    'With ENABLE_IPv4=false, IPv6 mode as upstream (needs ENABLE_PREFIX_DELEGATION=true, refuses custom networking); with ENABLE_IPv4=true, dual-stack mode, an eni-ipam extension.',
  ),
  honoured(
    'ENABLE_IPv4',
    'ipamd',
    'true',
    'IPv4 mode.',
    'true with ENABLE_IPv6=true is dual-stack mode (an eni-ipam extension: upstream refuses both); false with ENABLE_IPv6=false is refused.',
  ),
  refused(
    'ENABLE_POD_ENI',
    'ipamd, entrypoint',
    'false',
    'Security groups for pods: a trunk ENI on the node and branch ENIs for selected pods.',
    FALSE,
    'security groups for pods (trunk and branch ENIs) is not implemented in eni-ipam',
  ),
  refused(
    'ENABLE_MULTI_NIC',
    'ipamd, entrypoint',
    'false',
    'ENIs on network cards other than 0, for pods that ask for multi-homed networking.',
    FALSE,
    'multi-NIC pods are not implemented in eni-ipam; it uses network card 0 only',
  ),
  refused(
    'ENABLE_IMDS_ONLY_MODE',
    'ipamd',
    'false',
    'Never call EC2: learn ENIs and addresses from instance metadata only.',
    FALSE,
    'eni-ipam always reads EC2 (DescribeNetworkInterfaces); DISABLE_NETWORK_RESOURCE_PROVISIONING=true stops it changing anything',
  ),
  refused(
    'ENABLE_V6_EGRESS',
    'entrypoint, init',
    'false',
    'IPv4 pods also reach IPv6 destinations through the egress-cni plugin.',
    FALSE,
    'IPv6 egress for IPv4 pods (the egress-cni plugin) is not implemented in eni-ipam',
  ),
  refused(
    'AWS_EXTERNAL_SERVICE_CIDRS',
    'ipamd',
    'empty',
    'CIDRs routed through the main route table (an ip rule each), whatever ENI the pod is on.',
    [''],
    'eni-ipam installs no ip rules for external service CIDRs',
  ),
  ...AWS_NODE_WARNED,
];
