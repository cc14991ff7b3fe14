/**
 * What the cluster tests run and look at: a Deployment of echo pods (echo-image.ts), the
 * pods as the API server reports them, ipamd's introspection read inside the node, and
 * TCP from a pod's own network namespace (entered by the path containerd reports for its
 * sandbox: traffic leaves through the pod's eth0, as the pod's would).
 */
import { run } from '../netns.js';
import type { IpamdAllocation } from '../containerd-node-types.js';
import { CriTestClient } from '../cri-client.js';
import { waitFor } from '../wait.js';
import type { ClusterNode, TestCluster } from './cluster.js';
import { ECHO_PORT } from './echo-image.js';

/** A pod as the API server reports it. */
export interface KubePod {
  name: string;
  uid: string;
  ip: string | undefined;
  /** status.podIPs: every address (dual-stack: one per family, the primary family first). */
  ips: string[];
  phase: string;
  ready: boolean;
  deleting: boolean;
  /** The node it is scheduled on (spec.nodeName), once scheduled. */
  node: string | undefined;
}

/**
 * The spec of one echo pod: the locally built echo image (never pulled), a TCP readiness
 * probe on {@link ECHO_PORT} every 2 s, 1 s grace; `hostPort` maps that port on the node.
 */
export function echoPodSpec(c: TestCluster, o: { hostPort?: number } = {}): object {
  return {
    terminationGracePeriodSeconds: 1,
    enableServiceLinks: false,
    automountServiceAccountToken: false,
    containers: [
      {
        name: 'echo',
        image: c.nodeProcs.echoImage,
        imagePullPolicy: 'Never',
        ports: [{ containerPort: ECHO_PORT, ...(o.hostPort ? { hostPort: o.hostPort } : {}) }],
        readinessProbe: { tcpSocket: { port: ECHO_PORT }, periodSeconds: 2 },
      },
    ],
  };
}

/**
 * A Deployment `name` of `replicas` echo pods with a TCP readiness probe (the kubelet's own);
 * `podSpec` adds fields to the pod spec (a nodeSelector, topologySpreadConstraints).
 */
export function echoDeployment(
  c: TestCluster,
  name: string,
  replicas: number,
  podSpec: Record<string, unknown> = {},
): object {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: 'default' },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '100%', maxSurge: '100%' } },
      template: {
        metadata: { labels },
        spec: { ...(echoPodSpec(c) as Record<string, unknown>), ...podSpec },
      },
    },
  };
}

/** The pods labelled `app=<app>` in `default`. */
export async function podsOf(c: TestCluster, app: string): Promise<KubePod[]> {
  const l = await c.kubectl.json<{
    items: Array<{
      metadata: { name: string; uid: string; deletionTimestamp?: string };
      spec: { nodeName?: string };
      status: {
        podIP?: string;
        podIPs?: Array<{ ip: string }>;
        phase: string;
        conditions?: Array<{ type: string; status: string }>;
      };
    }>;
  }>(['-n', 'default', 'get', 'pods', '-l', `app=${app}`]);
  return l.items.map((p) => ({
    name: p.metadata.name,
    uid: p.metadata.uid,
    ip: p.status.podIP,
    ips: (p.status.podIPs ?? []).map((x) => x.ip),
    phase: p.status.phase,
    ready: p.status.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false,
    deleting: !!p.metadata.deletionTimestamp,
    node: p.spec.nodeName,
  }));
}

/**
 * Waits until exactly `n` pods of `app` exist, all Running and Ready (none terminating).
 * @throws Error with the pods' phases and the latest Events when it does not happen in `timeoutMs`.
 */
export async function waitPodsReady(c: TestCluster, app: string, n: number, timeoutMs = 300_000): Promise<KubePod[]> {
  return waitFor(
    `${n} ${app} pods Running and Ready`,
    async () => {
      const pods = await podsOf(c, app);
      return pods.length === n && pods.every((p) => p.phase === 'Running' && p.ready && !p.deleting && p.ip)
        ? pods
        : undefined;
    },
    timeoutMs,
    1000,
  ).catch(async (e: Error) => {
    const pods = await podsOf(c, app).catch(() => []);
    const phases = pods.map((p) => `${p.name}:${p.phase}${p.ready ? '/ready' : ''}${p.deleting ? '/deleting' : ''}`);
    const ev = await c.kubectl.try(['get', 'events', '-A', '--sort-by=.lastTimestamp']);
    throw new Error(`${e.message}\npods: ${phases.join(' ')}\n${ev.stdout.split('\n').slice(-15).join('\n')}`);
  });
}

/**
 * `GET <path>` of ipamd's introspection (127.0.0.1:61679 inside `node`, default the first), parsed.
 * @throws Error when curl fails.
 */
export async function introspect<T>(c: TestCluster, path: string, node: ClusterNode = c.nodes[0]!): Promise<T> {
  const out = await run('nsenter', [
    `--net=${node.netns.path}`,
    'curl',
    '-sf',
    '--max-time',
    '5',
    `http://127.0.0.1:61679${path}`,
  ]);
  return JSON.parse(out) as T;
}

/** ipamd's allocations on `node` (default the first). */
export const allocations = (c: TestCluster, node?: ClusterNode): Promise<IpamdAllocation[]> =>
  introspect(c, '/v1/allocations', node);

/** Pod name → its sandbox's network namespace path, for the READY sandboxes of `namespace` on `node` (default the first). */
export async function podNetns(
  c: TestCluster,
  namespace = 'default',
  node: ClusterNode = c.nodes[0]!,
): Promise<Map<string, string>> {
  const cri = new CriTestClient(node.procs.criSocket, 30_000);
  try {
    const out = new Map<string, string>();
    for (const sb of await cri.liveSandboxes()) {
      if (sb.podNamespace !== namespace) continue;
      const ns = await cri.netnsPath(sb.id);
      if (ns) out.set(sb.podName, ns);
    }
    return out;
  } finally {
    cri.close();
  }
}

/**
 * From the network namespace `netns`, connects to `host:port`, sends one line and returns
 * the first line answered ('' when `connectOnly`). @throws Error when it fails within 5 s.
 */
export async function tcpAsk(netns: string, host: string, port: number, connectOnly = false): Promise<string> {
  const script = connectOnly
    ? `exec 3<>/dev/tcp/${host}/${port}`
    : `exec 3<>/dev/tcp/${host}/${port} && printf 'ping\\n' >&3 && read -t 5 -r reply <&3 && printf '%s' "$reply"`;
  return run('nsenter', [`--net=${netns}`, 'timeout', '5', 'bash', '-c', script]);
}

/** The simulated ENI holding `ip` (primary or secondary), or undefined. */
export function eniOf(c: TestCluster, ip: string): string | undefined {
  for (const e of c.sim.state.enis.values())
    if (e.primaryIp === ip || e.secondaryIps.includes(ip)) return e.networkInterfaceId;
  return undefined;
}
