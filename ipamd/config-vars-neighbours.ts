/**
 * The settings about ipamd's neighbours on the node: a live aws-node it must not run beside
 * (startup/aws-node-presence.ts), the DaemonSet that owns the node (startup/node-owner.ts)
 * and the network policy agent ipamd answers (rpc/npa-config-server.ts).
 */
import { NETWORK_POLICY_MODES, NPA_CONFIG_DEFAULT_SOCKET } from '../proto/network-policy-config.js';
import { bool, duration, oneOf } from './config-fields.js';
import { dnsLabel, namespacedName } from './config-fields-more.js';
import { pathOf } from './config-path-fields.js';
import type { VarSpec } from './config-spec.js';
import { v } from './config-spec.js';

/** The neighbour settings, in the reference's order. */
export const NEIGHBOUR_VARS: VarSpec[] = [
  v(
    'ENI_IPAM_AWS_NODE_CHECK',
    'awsNodeCheck',
    bool(),
    'true',
    "Before managing the node, look for a live aws-node (its ipamd's gRPC socket or port 50051, its metrics on 61678 and introspection on 61679 answering as aws-node, recent writes to its checkpoint) and wait, re-checking, until it is gone. false skips the look: only where something else answers as aws-node.",
  ),
  v(
    'ENI_IPAM_AWS_NODE_SOCKET',
    'awsNodeSocket',
    pathOf('socket'),
    '/var/run/aws-node/ipamd.sock',
    "aws-node's ipamd gRPC socket (amazon-vpc-cni-k8s 1.23 and later; earlier ones listen on 127.0.0.1:50051, also checked).",
  ),
  v(
    'ENI_IPAM_AWS_NODE_QUIET',
    'awsNodeQuietMs',
    duration(0, 3_600_000),
    '30s',
    "How long aws-node's checkpoint (ENI_IPAM_AWS_NODE_CHECKPOINT_PATH) must have gone unwritten before ipamd takes the node (aws-node writes it at every pod ADD and DEL); a stale checkpoint is then imported as usual.",
  ),
  v(
    'ENI_IPAM_DAEMONSET',
    'daemonSet',
    namespacedName(),
    undefined,
    'The DaemonSet this ipamd runs in, as <namespace>/<name> (the chart sets it). With MY_NODE_NAME, the node is claimed for it in a Lease (eni-ipam-node-<node> in ENI_IPAM_LEASE_NAMESPACE) and ipamd stands aside, idle, on a node another existing DaemonSet owns; it is also named in the one-per-node guards.',
    'unset: no owner record',
  ),
  v(
    'ENI_IPAM_LEASE_NAMESPACE',
    'leaseNamespace',
    dnsLabel(),
    'kube-system',
    "Namespace of the nodes' owner Leases (ENI_IPAM_DAEMONSET): the same for every release, so a second release meets the first's record.",
  ),
  v(
    'NETWORK_POLICY_ENFORCING_MODE',
    'networkPolicyMode',
    oneOf(NETWORK_POLICY_MODES),
    'standard',
    "What ipamd tells the network policy agent (aws-network-policy-agent) when it asks at start: standard (a new pod's traffic is allowed until its policies apply) or strict (denied until they do). aws-node's name and values; its 'none' is refused, as the agent refuses it.",
  ),
  v(
    'ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET',
    'networkPolicyConfigSocket',
    pathOf('socket'),
    NPA_CONFIG_DEFAULT_SOCKET,
    "Unix socket on which ipamd answers the network policy agent's GetNetworkPolicyConfigs (amazon-vpc-cni-k8s rpc/rpc.proto ConfigServerBackend), from its start until it stops. The agent dials /var/run/aws-node/ipamd.sock, aws-node's ipamd socket; ipamd binds it only once no aws-node is left on the node, and refuses to start while another process serves there.",
  ),
];
