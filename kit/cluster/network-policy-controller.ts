/**
 * amazon-network-policy-controller-k8s (cluster/build.sh network-policy-controller) run for a
 * test cluster as EKS runs it for a cluster: outside the nodes' pods, reaching the API server
 * at the control-plane node's address. It runs in the first node's network namespace with the
 * admin kubeconfig, leader election in kube-system (out of cluster it has no namespace of its
 * own) and the ConfigMap check off (EKS turns it on with `enable-network-policy-controller` in
 * the `amazon-vpc-cni` ConfigMap; here it always runs). docs/network-policy.md.
 */
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { API_PORT, type TestCluster } from './cluster.js';

/**
 * Writes `<cluster dir>/<name>.kubeconfig`: the admin kubeconfig with its server the API
 * server's address inside the nodes (`https://<node IP>:6443`), for a process in a node's
 * network namespace. @returns its path. @throws Error when the admin kubeconfig names no loopback server.
 */
export async function nodeKubeconfig(c: TestCluster, name: string): Promise<string> {
  const admin = await readFile(c.kubeconfig, 'utf8');
  const inNode = admin.replace(/server: "https:\/\/127\.0\.0\.1:\d+"/, `server: "https://${c.nodeIp}:${API_PORT}"`);
  if (inNode === admin) throw new Error(`no loopback server in ${c.kubeconfig}`);
  const file = path.join(c.dir, `${name}.kubeconfig`);
  await writeFile(file, inNode);
  return file;
}

/** A running controller: its output so far, and stop. */
export interface RunningController {
  log(): string;
  stop(): void;
}

/** Starts the controller binary `bin` for cluster `c` (its metrics and health on the node's loopback, its default ports). */
export async function startNetworkPolicyController(c: TestCluster, bin: string): Promise<RunningController> {
  const kubeconfig = await nodeKubeconfig(c, 'network-policy-controller');
  const proc = spawn(
    'nsenter',
    [
      `--net=${c.nodeNetns.path}`,
      bin,
      `--kubeconfig=${kubeconfig}`,
      '--enable-configmap-check=false',
      '--leader-election-namespace=kube-system',
      '--metrics-bind-addr=127.0.0.1:8080',
      '--health-probe-bind-addr=127.0.0.1:8081',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  for (const s of [proc.stdout!, proc.stderr!])
    s.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-200_000)));
  return { log: () => out, stop: () => void proc.kill('SIGKILL') };
}

/**
 * A NetworkPolicy `name` in `default`: pods labelled `app=<target>` accept ingress only from
 * pods labelled `app=<peer>`, on TCP `port`.
 */
export function ingressOnlyFrom(name: string, target: string, peer: string, port: number): object {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: 'default' },
    spec: {
      podSelector: { matchLabels: { app: target } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchLabels: { app: peer } } }], ports: [{ port }] }],
    },
  };
}
