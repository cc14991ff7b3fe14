/**
 * Scale-up on the real cluster (test/cluster): a Deployment of echo pods scaled 0→N, the
 * seconds from `kubectl scale` until every pod is Running and Ready, with eni-ipam
 * (installed by helm, on the simulated cloud) as the node's CNI, then with Debian's Go
 * `ptp` + `host-local` (containernetworking-plugins) in the same run on the same node.
 * Prints each round, the medians and the ratio eni-ipam / ptp.
 *
 *   node dist/bench/cluster-scale-up.js [--pods 50] [--rounds 3]
 */
import { chmod, copyFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { startCluster, type TestCluster } from '../test/cluster/cluster.js';
import { installEniIpam, NAMESPACE, RELEASE } from '../test/cluster/install.js';
import { echoDeployment, podsOf, waitPodsReady } from '../test/cluster/workload.js';
import { waitFor } from '../test/helpers/wait.js';
import { quantile } from './stats.js';
import { machineLine } from './bench-util.js';
import os from 'node:os';

const { values: args } = parseArgs({
  options: { pods: { type: 'string', default: '50' }, rounds: { type: 'string', default: '3' } },
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

async function rounds(c: TestCluster, label: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    out.push(await round(c));
    console.log(`${label} round ${i + 1}: ${out[i]!.toFixed(1)} s`);
  }
  return out;
}

async function main(): Promise<void> {
  const c = await startCluster();
  try {
    console.log(machineLine(os.cpus().length));
    await installEniIpam(c, { wait: true });
    await c.kubectl.apply([echoDeployment(c, 'bench', 0)]);
    const eni = await rounds(c, 'eni-ipam');
    // The same node with Debian's ptp + host-local: the DaemonSet goes, its conflist is
    // outranked by one that sorts first (containerd loads the first file only).
    await c.kubectl.helm(['uninstall', RELEASE, '-n', NAMESPACE, '--wait']);
    for (const p of ['ptp', 'host-local']) {
      await copyFile(`/usr/lib/cni/${p}`, c.host(`/opt/cni/bin/${p}`));
      await chmod(c.host(`/opt/cni/bin/${p}`), 0o755);
    }
    await writeFile(
      c.host('/etc/cni/net.d/.00-ptp.conflist.tmp'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'ptp-bench',
        plugins: [
          {
            type: 'ptp',
            ipMasq: false,
            ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.0.0/24' }]], dataDir: '/run/eni-ipam/ptp-ipam' },
          },
        ],
      }),
    );
    const { rename } = await import('node:fs/promises');
    await rename(c.host('/etc/cni/net.d/.00-ptp.conflist.tmp'), c.host('/etc/cni/net.d/00-ptp.conflist'));
    const ptp = await rounds(c, 'ptp+host-local');
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
