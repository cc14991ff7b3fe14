/**
 * Scale-up and rolling updates on the real cluster (test/cluster), Debian's Go `ptp` +
 * `host-local` (containernetworking-plugins) against eni-ipam (installed by helm, on the
 * simulated cloud, default chart values) on the same node in the same run, their rounds
 * interleaved (ptp, eni-ipam, eni-ipam, ptp, ptp, …) so load that rises or falls during the
 * run counts against both sides alike. The node's CNI is switched only while no bench pod
 * exists (a pod is torn down by the plugin that wired it): ptp's conflist `00-ptp.conflist`
 * sorts before eni-ipam's `05-eni-ipam.conflist`, so the runtime uses ptp while it is there.
 * After each round every pod's address is checked to come from the side measured.
 *
 * --mode scale (default): a Deployment of echo pods scaled 0→N, seconds from `kubectl
 *   scale` until every pod is Running and Ready; then back to 0.
 * --mode rollout: the Deployment at N (default: the node's capacity, the pod addresses the
 *   instance's ENIs hold, bounded by the kubelet's max pods), then `kubectl rollout
 *   restart` (maxSurge and maxUnavailable 100 %), seconds until `kubectl rollout status`
 *   says every new pod is Ready and the old ones are gone; then back to 0.
 * --service: a ClusterIP Service selects the pods (their addresses are in EndpointSlices,
 *   so eni-ipam's cooldown ends on the slice change, not at once).
 * --instance-type: the node's EC2 instance type (default m5.xlarge: 4 ENIs × 14 addresses).
 * --settle: before each eni-ipam round, wait until no address is cooling (IP_COOLDOWN_PERIOD).
 * --no-evidence: eni-ipam with ENI_IPAM_COOLDOWN_EVIDENCE=false (every cooldown runs its
 *   full IP_COOLDOWN_PERIOD, as before issue 41), for comparison.
 *
 *   node dist/bench/cluster-scale-up.js [--pods 50] [--rounds 3] [--mode scale|rollout]
 *     [--instance-type m5.xlarge] [--service] [--settle] [--no-evidence]
 *
 * Prints each round, the medians and the ratio eni-ipam / ptp, and the machine's load.
 */
import { chmod, copyFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { instanceTypeInfo } from '../sim/index.js';
import { startCluster, type TestCluster } from '../kit/cluster/cluster.js';
import { eksMaxPods } from '../kit/cluster/cluster-node.js';
import { installEniIpam } from '../kit/cluster/install.js';
import { echoDeployment, introspect, podsOf, waitPodsReady } from '../kit/cluster/workload.js';
import { ECHO_PORT } from '../kit/cluster/echo-image.js';
import { waitFor } from '../kit/wait.js';
import { quantile } from './stats.js';
import { machineLine } from './bench-util.js';

const { values: args } = parseArgs({
  options: {
    pods: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    mode: { type: 'string', default: 'scale' },
    'instance-type': { type: 'string', default: 'm5.xlarge' },
    service: { type: 'boolean', default: false },
    settle: { type: 'boolean', default: false },
    'no-evidence': { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds);
const MODE = args.mode;
const TYPE = args['instance-type'];
if (MODE !== 'scale' && MODE !== 'rollout') throw new Error(`--mode ${MODE}: scale or rollout`);
const info = instanceTypeInfo(TYPE);
if (!info) throw new Error(`--instance-type ${TYPE}: not an instance type the simulated cloud knows`);
/** Pod addresses the instance's ENIs hold (each ENI's primary serves no pod), bounded by the kubelet's max pods less ipamd's pod. */
const CAPACITY = Math.min(info.maxEnis * (info.ipv4PerEni - 1), eksMaxPods(TYPE, false) - 1);
const PODS = Number(args.pods ?? (MODE === 'rollout' ? CAPACITY : 50));
if (!(PODS >= 1 && PODS <= CAPACITY)) throw new Error(`--pods ${PODS}: 1 to ${CAPACITY} on ${TYPE}`);
const PTP_SUBNET = '10.244.0.0/24';

type Side = 'ptp' | 'eni-ipam';

const scale = (c: TestCluster, n: number) =>
  c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'bench', `--replicas=${n}`]);

/** Back to 0 and no bench pod left (a CNI switch waits for it). */
async function drain(c: TestCluster): Promise<void> {
  await scale(c, 0);
  await waitFor('no bench pod left', async () => (await podsOf(c, 'bench')).length === 0, 300_000, 500);
}

/** Every bench pod's address came from `side` (ptp: 10.244.0.0/24; eni-ipam: anything else). */
async function checkSide(c: TestCluster, side: Side): Promise<string> {
  const ips = (await podsOf(c, 'bench')).map((p) => p.ip ?? '');
  const ptp = ips.filter((ip) => ip.startsWith('10.244.0.')).length;
  const wrong = side === 'ptp' ? ips.length - ptp : ptp;
  return wrong === 0 ? '' : ` (!! ${wrong} of ${ips.length} pods wired by the other CNI: round not comparable)`;
}

/** One measured round of `side`; seconds. Starts and ends with no bench pod. */
async function round(c: TestCluster, side: Side): Promise<{ s: number; note: string }> {
  if (MODE === 'scale') {
    const t0 = process.hrtime.bigint();
    await scale(c, PODS);
    await waitPodsReady(c, 'bench', PODS, 600_000);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    const note = await checkSide(c, side);
    await drain(c);
    return { s, note };
  }
  await scale(c, PODS);
  await waitPodsReady(c, 'bench', PODS, 600_000);
  const t0 = process.hrtime.bigint();
  await c.kubectl.run(['-n', 'default', 'rollout', 'restart', 'deployment/bench']);
  await c.kubectl.run(['-n', 'default', 'rollout', 'status', 'deployment/bench', '--timeout=600s']);
  await waitPodsReady(c, 'bench', PODS, 600_000);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const note = await checkSide(c, side);
  await drain(c);
  return { s, note };
}

/** ipamd's cooling count; with --settle, first waits (≤ 2 min) until nothing cools. */
async function cooling(c: TestCluster): Promise<number> {
  const now = async (): Promise<number> =>
    (await introspect<{ counts: { cooling: number } }>(c, '/v1/status')).counts.cooling;
  if (args.settle) await waitFor('nothing cooling', async () => (await now()) === 0, 120_000, 1000);
  return now();
}

/** Makes `side` the node's CNI (no bench pod exists): ptp's conflist first, or none of it. */
async function useCni(c: TestCluster, side: Side): Promise<void> {
  const conf = c.host('/etc/cni/net.d/00-ptp.conflist');
  if (side === 'eni-ipam') return rm(conf, { force: true });
  const plugin = {
    type: 'ptp',
    ipMasq: false,
    ipam: {
      type: 'host-local',
      ranges: [[{ subnet: PTP_SUBNET }]],
      routes: [{ dst: '0.0.0.0/0' }],
      dataDir: '/run/eni-ipam/ptp-ipam',
    },
  };
  await writeFile(`${conf}.tmp`, JSON.stringify({ cniVersion: '1.0.0', name: 'ptp-bench', plugins: [plugin] }));
  await rename(`${conf}.tmp`, conf);
}

async function setup(c: TestCluster): Promise<void> {
  for (const p of ['ptp', 'host-local']) {
    await copyFile(`/usr/lib/cni/${p}`, c.host(`/opt/cni/bin/${p}`));
    await chmod(c.host(`/opt/cni/bin/${p}`), 0o755);
  }
  const env = args['no-evidence'] ? { ENI_IPAM_COOLDOWN_EVIDENCE: 'false' } : {};
  await installEniIpam(c, { wait: true, values: { env } });
  const objects: object[] = [echoDeployment(c, 'bench', 0)];
  if (args.service)
    objects.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'bench', namespace: 'default' },
      spec: { selector: { app: 'bench' }, ports: [{ port: 80, targetPort: ECHO_PORT }] },
    });
  await c.kubectl.apply(objects);
}

function report(results: Record<Side, number[]>): void {
  const m = (xs: number[]): number => quantile(xs, 0.5);
  const what = MODE === 'scale' ? `0→${PODS} Running` : `rollout restart of ${PODS}, all new Ready`;
  console.log(`\n| CNI | ${what}, median of ${ROUNDS} (s) | rounds |`);
  console.log('|---|---|---|');
  for (const side of ['eni-ipam', 'ptp'] as const)
    console.log(`| ${side} | ${m(results[side]).toFixed(1)} | ${results[side].map((x) => x.toFixed(1)).join(', ')} |`);
  const e = results['eni-ipam'];
  const p = results.ptp;
  console.log(`\nratio eni-ipam / ptp+host-local: median ${(m(e) / m(p)).toFixed(2)}`);
  console.log(
    `  first rounds ${(e[0]! / p[0]!).toFixed(2)}, later rounds ${(m(e.slice(1)) / m(p.slice(1))).toFixed(2)}`,
  );
  console.log(
    `load average at the end: ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
}

async function main(): Promise<void> {
  const c = await startCluster({ instanceType: TYPE });
  // Ctrl-C or a kill: remove the cluster before exiting.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => void c.close().finally(() => process.exit(130)));
  try {
    console.log(`${machineLine(os.cpus().length)}, load ${os.loadavg()[0]!.toFixed(1)}`);
    console.log(
      `${TYPE}, mode ${MODE}, ${PODS} pods (capacity ${CAPACITY})${args.service ? ', behind a Service' : ''}`,
    );
    await setup(c);
    const results: Record<Side, number[]> = { ptp: [], 'eni-ipam': [] };
    for (let i = 0; i < ROUNDS; i++) {
      // ptp, eni, eni, ptp, ptp, eni…: each side goes first every other round.
      const order: Side[] = i % 2 === 0 ? ['ptp', 'eni-ipam'] : ['eni-ipam', 'ptp'];
      for (const side of order) {
        await useCni(c, side);
        const cool = side === 'eni-ipam' ? ` (${await cooling(c)} addresses cooling at the start)` : '';
        const r = await round(c, side);
        results[side].push(r.s);
        console.log(`${side} round ${i + 1}: ${r.s.toFixed(1)} s${cool}${r.note}`);
      }
    }
    report(results);
  } finally {
    await c.close();
  }
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
