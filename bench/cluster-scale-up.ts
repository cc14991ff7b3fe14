/**
 * Scale-up on the real cluster (test/cluster): a Deployment of echo pods scaled 0→N, the
 * seconds from `kubectl scale` until every pod is Running and Ready, with Debian's Go
 * `ptp` + `host-local` (containernetworking-plugins) as the node's CNI, then with eni-ipam
 * (installed by helm, on the simulated cloud, default chart values) in the same run on the
 * same node. Each round scales back to 0 and waits until no pod is left.
 * Prints each round, the medians and the ratio eni-ipam / ptp.
 *
 *   node dist/bench/cluster-scale-up.js [--pods 50] [--rounds 3] [--settle]
 *
 * --settle: before each eni-ipam round, wait until no address is cooling (IP_COOLDOWN_PERIOD).
 */
import { chmod, copyFile, rename, unlink, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { startCluster, type TestCluster } from '../kit/cluster/cluster.js';
import { installEniIpam, nodeCondition } from '../kit/cluster/install.js';
import { echoDeployment, introspect, podsOf, waitPodsReady } from '../kit/cluster/workload.js';
import { waitFor } from '../kit/wait.js';
import { quantile } from './stats.js';
import { machineLine } from './bench-util.js';
import os from 'node:os';

const { values: args } = parseArgs({
  options: {
    pods: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '3' },
    settle: { type: 'boolean', default: false },
  },
});
const PODS = Number(args.pods);
const ROUNDS = Number(args.rounds);

/** One 0→PODS round: seconds from the scale until all are Running and Ready, then back to 0. */
async function round(c: TestCluster): Promise<number> {
  const t0 = process.hrtime.bigint();
  await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'bench', `--replicas=${PODS}`]);
  await waitPodsReady(c, 'bench', PODS, 600_000);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  await c.kubectl.run(['-n', 'default', 'scale', 'deployment', 'bench', '--replicas=0']);
  await waitFor('no bench pod left', async () => (await podsOf(c, 'bench')).length === 0, 300_000, 500);
  return s;
}

/**
 * ipamd's cooling count; with --settle, first waits (≤ 2 min) until nothing cools: addresses
 * released by the previous round stay out of the pool for IP_COOLDOWN_PERIOD (30 s in the
 * chart), so a back-to-back round on a full node waits for them.
 */
async function cooling(c: TestCluster): Promise<number> {
  const now = async (): Promise<number> =>
    (await introspect<{ counts: { cooling: number } }>(c, '/v1/status')).counts.cooling;
  if (args.settle) await waitFor('nothing cooling', async () => (await now()) === 0, 120_000, 1000);
  return now();
}

async function rounds(c: TestCluster, label: string, eni: boolean): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const cool = eni ? await cooling(c) : 0;
    out.push(await round(c));
    console.log(
      `${label} round ${i + 1}: ${out[i]!.toFixed(1)} s${eni ? ` (${cool} addresses cooling at the start)` : ''}`,
    );
  }
  return out;
}

/** Writes Debian's ptp + host-local as the node's only conflist (temp file + rename in the dir). */
async function usePtp(c: TestCluster): Promise<void> {
  for (const p of ['ptp', 'host-local']) {
    await copyFile(`/usr/lib/cni/${p}`, c.host(`/opt/cni/bin/${p}`));
    await chmod(c.host(`/opt/cni/bin/${p}`), 0o755);
  }
  const conf = {
    cniVersion: '1.0.0',
    name: 'ptp-bench',
    plugins: [
      {
        type: 'ptp',
        ipMasq: false,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: '10.244.0.0/24' }]],
          routes: [{ dst: '0.0.0.0/0' }],
          dataDir: '/run/eni-ipam/ptp-ipam',
        },
      },
    ],
  };
  await writeFile(c.host('/etc/cni/net.d/.00-ptp.conflist.tmp'), JSON.stringify(conf));
  await rename(c.host('/etc/cni/net.d/.00-ptp.conflist.tmp'), c.host('/etc/cni/net.d/00-ptp.conflist'));
}

async function main(): Promise<void> {
  const c = await startCluster();
  // Ctrl-C or a kill: remove the cluster before exiting.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => void c.close().finally(() => process.exit(130)));
  try {
    console.log(machineLine(os.cpus().length));
    // First the baseline on the fresh node: Debian's Go ptp + host-local as its CNI.
    await usePtp(c);
    await waitFor('the Node Ready with ptp', async () => (await nodeCondition(c, 'Ready')) === 'True', 120_000, 500);
    await c.kubectl.apply([echoDeployment(c, 'bench', 0)]);
    const ptp = await rounds(c, 'ptp+host-local', false);
    // Then eni-ipam on the same node: the ptp conflist goes, the chart installs its own.
    await unlink(c.host('/etc/cni/net.d/00-ptp.conflist'));
    await installEniIpam(c, { wait: true });
    const eni = await rounds(c, 'eni-ipam', true);
    const m = (xs: number[]): number => quantile(xs, 0.5);
    console.log(`\n| CNI | 0→${PODS} Running, median of ${ROUNDS} (s) | rounds |`);
    console.log('|---|---|---|');
    console.log(`| eni-ipam | ${m(eni).toFixed(1)} | ${eni.map((x) => x.toFixed(1)).join(', ')} |`);
    console.log(`| ptp + host-local | ${m(ptp).toFixed(1)} | ${ptp.map((x) => x.toFixed(1)).join(', ')} |`);
    console.log(`\nratio eni-ipam / ptp+host-local: ${(m(eni) / m(ptp)).toFixed(2)}`);
  } finally {
    await c.close();
  }
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
