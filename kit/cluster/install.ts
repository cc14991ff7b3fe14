/**
 * Installs eni-ipam on the test cluster as an operator would: `npm run image`'s archive
 * imported into the node's containerd, then `helm install` of charts/eni-ipam with values
 * that only point the image and ipamd's EC2/IMDS endpoints at the simulated cloud.
 */
import { CHART } from '../helm.js';
import { ensureImageArchive, imageRefOf } from '../image-archive.js';
import { waitFor } from '../wait.js';
import type { TestCluster } from './cluster.js';
import type { CmdResult } from './kubectl.js';

/** Helm release name and namespace the tests install under. */
export const RELEASE = 'eni-ipam';
export const NAMESPACE = 'kube-system';

/**
 * The chart values of a test install: the image under test and the simulated cloud, plus
 * `extra` (its `env` keys are merged by helm over the chart's default `env`).
 */
export async function clusterValues(
  c: TestCluster,
  extra: { env?: Record<string, string>; [k: string]: unknown } = {},
): Promise<Record<string, unknown>> {
  const ref = await imageRefOf(await ensureImageArchive());
  const colon = ref.lastIndexOf(':');
  const { env, ...rest } = extra;
  return {
    image: { repository: ref.slice(0, colon), tag: ref.slice(colon + 1), pullPolicy: 'Never' },
    extraEnv: Object.entries(c.cloudEnv).map(([name, value]) => ({ name, value })),
    ...(env ? { env } : {}),
    ...rest,
  };
}

/** `helm <verb> eni-ipam charts/eni-ipam -n kube-system -f <values>` (verb: install | upgrade). */
export async function helmRelease(
  c: TestCluster,
  verb: 'install' | 'upgrade',
  values: Record<string, unknown>,
  flags: string[] = [],
): Promise<CmdResult> {
  const { writeFile, mkdtemp, rm } = await import('node:fs/promises');
  const dir = await mkdtemp('/tmp/eni-ipam-values-');
  try {
    await writeFile(`${dir}/values.json`, JSON.stringify(values));
    return await c.kubectl.helm([verb, RELEASE, CHART, '-n', NAMESPACE, '-f', `${dir}/values.json`, ...flags]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Node condition `type`'s status ('True' | 'False' | 'Unknown'), or undefined. */
export async function nodeCondition(c: TestCluster, type: string): Promise<string | undefined> {
  const n = await c.kubectl.json<{ status?: { conditions?: Array<{ type: string; status: string }> } }>([
    'get',
    'node',
    c.nodeName,
  ]);
  return n.status?.conditions?.find((x) => x.type === type)?.status;
}

/** True when every Node of the cluster reports Ready (the kubelet found a CNI conflist and is healthy). */
export async function allNodesReady(c: TestCluster): Promise<boolean> {
  const l = await c.kubectl.json<{
    items: Array<{ status?: { conditions?: Array<{ type: string; status: string }> } }>;
  }>(['get', 'nodes']);
  return (
    l.items.length >= c.nodes.filter((n) => !n.closed).length &&
    l.items.every((n) => n.status?.conditions?.find((x) => x.type === 'Ready')?.status === 'True')
  );
}

/**
 * Imports the image into every node's containerd, runs `helm install`, and (with `wait`)
 * waits until the DaemonSet's pods are Ready through the chart's own probes and every Node is Ready.
 * @throws Error with helm's stderr, or naming what did not become Ready (with ipamd's log tail).
 */
export async function installEniIpam(
  c: TestCluster,
  o: { wait?: boolean; values?: Record<string, unknown> } = {},
): Promise<void> {
  await c.importImage(await ensureImageArchive());
  const r = await helmRelease(c, 'install', { ...(await clusterValues(c)), ...o.values });
  if (r.code !== 0) throw new Error(`helm install failed: ${r.stderr.trim()}`);
  if (o.wait) await waitEniIpamReady(c);
}

/** Waits (≤ 3 min) for the DaemonSet rolled out and Ready on every node and every Node Ready. @throws Error with the pods' state. */
export async function waitEniIpamReady(c: TestCluster, timeoutMs = 180_000): Promise<void> {
  await waitFor(
    'the eni-ipam DaemonSet Ready and every Node Ready',
    async () => {
      const ds = await c.kubectl.json<{
        metadata: { generation: number };
        status: {
          observedGeneration?: number;
          numberReady?: number;
          updatedNumberScheduled?: number;
          desiredNumberScheduled?: number;
        };
      }>(['-n', NAMESPACE, 'get', 'daemonset', RELEASE]);
      const s = ds.status;
      return (
        s.observedGeneration === ds.metadata.generation &&
        (s.desiredNumberScheduled ?? 0) > 0 &&
        s.numberReady === s.desiredNumberScheduled &&
        s.updatedNumberScheduled === s.desiredNumberScheduled &&
        (await allNodesReady(c))
      );
    },
    timeoutMs,
    1000,
  ).catch(async (e: Error) => {
    const pods = await c.kubectl.try(['-n', NAMESPACE, 'get', 'pods', '-o', 'wide']);
    const desc = await c.kubectl.try(['-n', NAMESPACE, 'describe', 'pods', '-l', `app.kubernetes.io/name=${RELEASE}`]);
    throw new Error(`${e.message}\n${pods.stdout}\n${desc.stdout.split('\n').slice(-30).join('\n')}`);
  });
}

/** UIDs of the eni-ipam DaemonSet's pods (label app.kubernetes.io/name). */
export async function ipamdPodUids(c: TestCluster): Promise<string[]> {
  const l = await c.kubectl.json<{ items: Array<{ metadata: { uid: string } }> }>([
    '-n',
    NAMESPACE,
    'get',
    'pods',
    '-l',
    `app.kubernetes.io/name=${RELEASE}`,
  ]);
  return l.items.map((i) => i.metadata.uid);
}
