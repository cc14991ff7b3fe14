/**
 * ipamd's settings whose defaults are machine paths, given paths a harness owns: a test,
 * bench or demo ipamd outside a node mount namespace must never read or write the machine's
 * `/var/run/eni-ipam`, `/etc/cni/net.d`, `/opt/cni/bin`, aws-node's checkpoint or a CRI socket
 * it finds by probing `/run/containerd/containerd.sock` (another harness's, or the machine's).
 *
 * An ipamd that falls back to a machine default reads a neighbour's state: with no checkpoint
 * of its own it imports aws-node's `/var/run/aws-node/ipam.json` written by another run's
 * aws-node stand-in, and with no runtime configured it trusts whatever containerd serves the
 * machine's default socket.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { configSpecs } from '../ipamd/config.js';

/** Settings ipamd derives from another one when unset (so their machine default never applies once that one is owned). */
const DERIVED = new Set(['ENI_IPAM_CNI_EXEC_SOCKET']);

/**
 * The settings of ipamd's spec whose default is a machine path (an absolute path, or a CRI
 * socket found by probing), by name: what {@link ownPathEnv} must cover.
 */
export function machinePathSettings(): string[] {
  return configSpecs()
    .filter((s) => !DERIVED.has(s.name) && (s.def?.startsWith('/') || s.name === 'CRI_RUNTIME_ENDPOINT'))
    .map((s) => s.name);
}

/**
 * Harness-owned values under `dir` for every setting of {@link machinePathSettings}: sockets,
 * checkpoint, CNI dirs, the plugin log, an aws-node checkpoint path that does not exist (no
 * import) and a CRI endpoint where no runtime serves (unreadable: releases freeze, as with no
 * runtime on a node). Callers spread their own values over these. Creates `<dir>/aws-node`
 * (the node's /var/run/aws-node, which the chart mounts): ipamd serves the network policy
 * agent's configuration there only when that directory exists.
 */
export function ownPathEnv(dir: string): Record<string, string> {
  mkdirSync(path.join(dir, 'aws-node'), { recursive: true });
  return {
    ENI_IPAM_SOCKET: path.join(dir, 'ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json'),
    ENI_IPAM_CNI_CONF_DIR: path.join(dir, 'cni', 'net.d'),
    ENI_IPAM_CNI_BIN_DIR: path.join(dir, 'cni', 'bin'),
    ENI_IPAM_AWS_NODE_CHECKPOINT_PATH: path.join(dir, 'aws-node', 'ipam.json'),
    ENI_IPAM_AWS_NODE_SOCKET: path.join(dir, 'aws-node', 'ipamd.sock'),
    // The same file, as on a node (both default to /var/run/aws-node/ipamd.sock): a restart meets its predecessor's.
    ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET: path.join(dir, 'aws-node', 'ipamd.sock'),
    AWS_VPC_K8S_PLUGIN_LOG_FILE: path.join(dir, 'plugin.log'),
    CRI_RUNTIME_ENDPOINT: `unix://${path.join(dir, 'no-cri.sock')}`,
  };
}
