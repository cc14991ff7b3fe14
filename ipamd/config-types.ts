/**
 * The validated ipamd configuration and its error type (the shapes {@link loadConfig} in
 * ./config.ts produces and throws).
 */
import type { NetworkPolicyMode } from '../proto/network-policy-config.js';

/** The validated ipamd configuration. Durations are in ms. */
export interface IpamdConfig {
  warmEniTarget: number;
  warmIpTarget?: number;
  minimumIpTarget?: number;
  warmPrefixTarget?: number;
  enablePrefixDelegation: boolean;
  /** ENABLE_IPv4: serve IPv4 pods (with ENABLE_IPv6=true: dual-stack mode). */
  enableIpv4: boolean;
  /** ENABLE_IPv6: serve IPv6 pods from the primary ENI's /80 (docs/design.md#ip-families). */
  enableIpv6: boolean;
  /** The mode served, derived from ENABLE_IPv4/ENABLE_IPv6 (config-family.ts). */
  ipFamily: 'ipv4' | 'ipv6' | 'dual';
  /** ENABLE_SUBNET_DISCOVERY: new ENIs may go to tagged subnets of the node's VPC and zone (most free first). */
  enableSubnetDiscovery: boolean;
  maxEni?: number;
  ipCooldownMs: number;
  /** ENI_IPAM_COOLDOWN_EVIDENCE: a cooldown may end early on the EndpointSlice evidence (docs/design.md#cooldown-that-ends-on-evidence). */
  cooldownEvidence: boolean;
  /** ENI_IPAM_PROXY_SYNC_ALLOWANCE (ms): time every proxy has to apply a slice change the watch saw. */
  proxySyncAllowanceMs: number;
  eniMtu: number;
  podMtu: number;
  vethPrefix: string;
  externalSnat: boolean;
  excludeSnatCidrs: string[];
  /** AWS_VPC_K8S_CNI_RANDOMIZESNAT. */
  randomizeSnat: 'none' | 'hashrandom' | 'prng';
  /** AWS_VPC_CNI_NODE_PORT_SUPPORT. */
  nodePortSupport: boolean;
  /** AWS_VPC_K8S_CNI_CONNMARK. */
  connmark: number;
  clusterName?: string;
  additionalEniTags: Record<string, string>;
  disableLeakedEniCleanup: boolean;
  /** AWS_MANAGE_ENIS_NON_SCHEDULABLE: grow and free ENIs on a cordoned node too (false: paused there, as aws-node). */
  manageEnisNonSchedulable: boolean;
  disableNetworkResourceProvisioning: boolean;
  nodeName?: string;
  ec2Endpoint?: string;
  imdsEndpoint: string;
  criRuntimeEndpoint?: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  logFormat: 'json' | 'pretty';
  socketPath: string;
  checkpointPath: string;
  metricsBindAddress: string;
  introspectionBindAddress: string;
  installCni: boolean;
  cniConfDir: string;
  cniBinDir: string;
  hostNetworking: boolean;
  cniExec: boolean;
  cniExecSocket: string;
  cniExecNetns?: string;
  cniIpamdWaitMs: number;
  /** ENABLE_BANDWIDTH_PLUGIN: chain bandwidth in the default conflist. */
  enableBandwidthPlugin: boolean;
  /** ENI_IPAM_CNI_CONFLIST_FILE: the custom conflist to install, if any. */
  cniConflistFile?: string;
  disableMetrics: boolean;
  disableIntrospection: boolean;
  addWaitTimeoutMs: number;
  /** ENI_IPAM_ADD_WAIT_FOR_ENI_TIMEOUT (ms). */
  addWaitForEniMs: number;
  shrinkDelayMs: number;
  reconcileIntervalMs: number;
  gcIntervalMs: number;
  gcGraceMs: number;
  poolIntervalMs: number;
  ec2RatePerSecond: number;
  ec2Burst: number;
  ec2TimeoutMs: number;
  ec2MaxAttempts: number;
  networkName: string;
  minEniAgeMs: number;
  imdsEniWaitMs: number;
  leakedEniSweepIntervalMs: number;
  leakedEniSweepJitterMs: number;
  /** ENI_IPAM_FAST_RESTART: serve a same-boot restart from the cached inventory and checkpoint at once. */
  fastRestart: boolean;
  restartConfirmJitterMs: number;
  awsNodeCheckpointPath: string;
  /** ENI_IPAM_AWS_NODE_CHECK: wait for a live aws-node to be gone before managing the node. */
  awsNodeCheck: boolean;
  /** ENI_IPAM_AWS_NODE_SOCKET: aws-node's ipamd gRPC socket. */
  awsNodeSocket: string;
  /** ENI_IPAM_AWS_NODE_QUIET: aws-node's checkpoint unwritten this long (ms) before ipamd takes the node. */
  awsNodeQuietMs: number;
  /** NETWORK_POLICY_ENFORCING_MODE: what ipamd tells the network policy agent (a new pod open or closed until its policies apply). */
  networkPolicyMode: NetworkPolicyMode;
  /** ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET: where ipamd answers the network policy agent's GetNetworkPolicyConfigs. */
  networkPolicyConfigSocket: string;
  /** ENI_IPAM_DAEMONSET: `<namespace>/<name>` of ipamd's DaemonSet (the node's owner record). */
  daemonSet?: string;
  /** ENI_IPAM_LEASE_NAMESPACE: where the nodes' owner Leases live. */
  leaseNamespace: string;
  logFile: string;
  pluginLogFile: string;
  logFileMaxSize: string;
  logFileMaxFiles: number;
  taintWhenExhausted: boolean;
  /** AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: new ENIs go where the node's ENIConfig says; the primary ENI serves no new pod. */
  customNetworkCfg: boolean;
  /** ENI_CONFIG_LABEL_DEF: the node label naming its ENIConfig. */
  eniConfigLabelDef: string;
  /** ENI_CONFIG_ANNOTATION_DEF: the node annotation naming its ENIConfig (wins over the label). */
  eniConfigAnnotationDef: string;
  /** ENI_IPAM_CHART_ENV: the variables the Helm chart set (so the start-up log can say a setting came from the chart). */
  chartEnv: string[];
}

/** A bad environment variable. `message` is one line: variable, value, what it accepts. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Quotes a value for a one-line message (JSON escapes, long values cut to 120 characters). */
export function quoteValue(raw: string): string {
  return JSON.stringify(raw.length > 120 ? `${raw.slice(0, 120)}…` : raw);
}
