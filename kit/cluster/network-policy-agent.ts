/**
 * aws-network-policy-agent (cluster/build.sh network-policy-agent) run on a node of the test
 * cluster as the aws-node DaemonSet's `aws-eks-nodeagent` container sees the node: in the
 * node's mount and network namespaces, with bpffs mounted at `/sys/fs/bpf` in a private mount
 * namespace of its own (never the machine's), its working directory the bin dir that holds
 * its eBPF objects, IMDS the node's (simulated), and the node's own `/var/run/aws-node`.
 *
 * The agent's start-up call, `rpc.ConfigServerBackend/GetNetworkPolicyConfigs` on the node's
 * `/var/run/aws-node/ipamd.sock`, is answered by eni-ipam's ipamd (the chart sets
 * ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET to that path and mounts the node's /var/run/aws-node;
 * ipamd/rpc/npa-config-server.ts). The agent finds a pod's host veth by the name it looks up
 * (`eni` + the first 11 hex digits of SHA-1 of `<namespace>.<pod>`: its pkg/utils
 * GetHostVethName), which eni-ipam gives it ({@link upstreamNamedHostVeth} checks).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { run } from '../netns.js';
import type { TestCluster } from './cluster.js';

/** The agent's metrics and health ports inside the node (aws-node's chart: 8162, 8163). */
export const NPA_METRICS_PORT = 8162;
export const NPA_HEALTH_PORT = 8163;

/** The host veth name the agent looks up for pod `namespace/name` (first interface). */
export function upstreamHostVethName(namespace: string, name: string): string {
  return 'eni' + createHash('sha1').update(`${namespace}.${name}`).digest('hex').slice(0, 11);
}

/**
 * The host veth of the pod at `ip` on the first node, read from ipamd's host route to it, and
 * checked to carry the name the agent looks up ({@link upstreamHostVethName}): eni-ipam names
 * it so itself (docs/design.md "Host veth names"); nothing is renamed.
 * @returns the veth's name
 * @throws Error when no host route names a veth, or it has another name.
 */
export async function upstreamNamedHostVeth(
  c: TestCluster,
  namespace: string,
  name: string,
  ip: string,
): Promise<string> {
  const route = (await run('nsenter', [`--net=${c.nodeNetns.path}`, 'ip', '-o', 'route', 'show', ip])).trim();
  const dev = /dev (\S+)/.exec(route)?.[1];
  if (!dev) throw new Error(`no host route to ${ip} on ${c.nodeName}: '${route}'`);
  const want = upstreamHostVethName(namespace, name);
  if (dev !== want) throw new Error(`pod ${namespace}/${name}: host veth ${dev}, not ${want} as aws-node names it`);
  return dev;
}

/** A running agent: its output so far, and stop. */
export interface RunningNpa {
  proc: ChildProcess;
  log(): string;
  stop(): void;
}

/**
 * Starts the agent on the first node with aws-node's flags (policy enabled, IPv4, events
 * logged to stdout) and the kubeconfig given (its server reachable from the node).
 */
export function startNetworkPolicyAgent(c: TestCluster, binDir: string, kubeconfig: string): RunningNpa {
  const env = Object.entries({ ...c.cloudEnv, MY_NODE_NAME: c.nodeName }).map(([k, v]) => `${k}=${v}`);
  const flags = [
    `--kubeconfig=${kubeconfig}`,
    '--enable-network-policy=true',
    '--enable-ipv6=false',
    '--enable-cloudwatch-logs=false',
    '--enable-policy-event-logs=true',
    '--log-file=stdout',
    `--metrics-bind-addr=:${NPA_METRICS_PORT}`,
    `--health-probe-bind-addr=:${NPA_HEALTH_PORT}`,
    '--log-level=debug',
  ];
  // Private from the node's namespace down: the bpffs mount goes with the agent's last process.
  const script = `set -e; mount --make-rprivate /; mount -t bpf bpffs /sys/fs/bpf; cd '${binDir}'; exec env ${env.join(' ')} ./aws-network-policy-agent ${flags.join(' ')}`;
  const proc = spawn(
    'nsenter',
    [
      ...c.mountNs.nsenterArgs,
      `--net=${c.nodeNetns.path}`,
      'unshare',
      '-m',
      '--propagation',
      'private',
      'sh',
      '-c',
      script,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  for (const s of [proc.stdout!, proc.stderr!])
    s.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-400_000)));
  return { proc, log: () => out, stop: () => void proc.kill('SIGKILL') };
}
