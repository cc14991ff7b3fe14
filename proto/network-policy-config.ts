/**
 * Shared constants and shapes of the network policy agent's configuration call
 * (`proto/network-policy-config.proto`, amazon-vpc-cni-k8s `rpc/rpc.proto`
 * `ConfigServerBackend`): ipamd serves it, test kits call it as the agent does.
 */
import { fileURLToPath } from 'node:url';

/** Absolute path of `proto/network-policy-config.proto` (resolved from `dist/proto/`). */
export const NPA_CONFIG_PROTO_PATH = fileURLToPath(new URL('../../proto/network-policy-config.proto', import.meta.url));

/** Fully qualified gRPC service name, as upstream's (package `rpc`). */
export const NPA_CONFIG_SERVICE = 'rpc.ConfigServerBackend';

/**
 * Where the agent dials ipamd (aws-network-policy-agent main.go `LOCAL_IPAMD_ADDRESS`,
 * hard-coded): the default of ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET.
 */
export const NPA_CONFIG_DEFAULT_SOCKET = '/var/run/aws-node/ipamd.sock';

/** NETWORK_POLICY_ENFORCING_MODE values the agent accepts (its pkg/utils `IsValidNetworkPolicyEnforcingMode`). */
export const NETWORK_POLICY_MODES = ['standard', 'strict'] as const;

/** A network policy enforcing mode: `standard` (a new pod is open until its policies apply) or `strict` (closed). */
export type NetworkPolicyMode = (typeof NETWORK_POLICY_MODES)[number];

/** `NetworkPolicyAgentConfigReply`, field names as in the .proto. */
export interface NetworkPolicyAgentConfigReply {
  NetworkPolicyMode: string;
  MultiNICEnabled: boolean;
  NodeIPv4: string;
  NodeIPv6: string;
  InstanceID: string;
  Region: string;
}
