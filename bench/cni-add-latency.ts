/**
 * bench: wall time of the real CNI plugin binary, ADD and DEL, against a live ipamd with
 * a warm pool (simulated cloud), each in a fresh named network namespace, the plugin
 * run inside a node namespace. Prints medians/p90 and `node -e 0` (the floor) measured
 * in the same run. NODE_EXTRA_CA_CERTS is unset for every child.
 *
 *   node dist/bench/cni-add-latency.js [--runs 20]
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SimCloud } from '../sim/index.js';
import { execPlugin } from '../demo/cni-exec.js';
import { startIpamd } from '../demo/ipamd-process.js';
import { createNamedNetns } from '../demo/netns.js';
import { quantile } from './stats.js';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
  const runs = Number(values.runs);
  delete process.env.NODE_EXTRA_CA_CERTS;
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-bench-'));
  const sim = new SimCloud();
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
  sim.launchInstance({ instanceType: 'c5.4xlarge', subnetId: subnet.subnetId });
  const node = await createNamedNetns(`eni-bench-node-${process.pid}`);
  const socket = path.join(work, 'ipamd.sock');
  const ipamd = await startIpamd({
    env: { AWS_EC2_ENDPOINT: sim.ec2Endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint, ENI_IPAM_SOCKET: socket, ENI_IPAM_CHECKPOINT_PATH: path.join(work, 'ipam.json'), WARM_IP_TARGET: String(runs + 5), AWS_VPC_K8S_CNI_LOGLEVEL: 'info' },
    logFile: path.join(work, 'ipamd.log'),
  });
  const config = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: socket };
  const prefix = ['nsenter', `--net=${node.path}`];
  const add: number[] = [];
  const del: number[] = [];
  const floor: number[] = [];
  try {
    for (let t = 0; t < 50 && (await ipamd.status()).counts.available < runs; t++) await new Promise((r) => setTimeout(r, 100));
    for (let i = 0; i < runs + 2; i++) {
      const pod = await createNamedNetns(`eni-bench-pod-${process.pid}-${i}`);
      const id = randomBytes(32).toString('hex');
      try {
        const a = await execPlugin({ command: 'ADD', containerId: id, netns: pod.path, config, prefix, args: { K8S_POD_NAME: `p${i}`, K8S_POD_NAMESPACE: 'bench' } });
        if (a.code !== 0) throw new Error(`ADD failed: ${a.stdout}`);
        const d = await execPlugin({ command: 'DEL', containerId: id, netns: pod.path, config, prefix });
        if (d.code !== 0) throw new Error(`DEL failed: ${d.stdout}`);
        if (i >= 2) { add.push(a.ms); del.push(d.ms); } // two warm-up rounds
      } finally {
        await pod.remove();
      }
      const t0 = performance.now();
      spawnSync(process.execPath, ['-e', '0'], { env: process.env });
      if (i >= 2) floor.push(performance.now() - t0);
    }
  } finally {
    await ipamd.stop();
    await node.remove();
    await sim.stop();
    await rm(work, { recursive: true, force: true });
  }
  const row = (name: string, xs: number[]) => `| ${name} | ${quantile(xs, 0.5).toFixed(1)} | ${quantile(xs, 0.9).toFixed(1)} |`;
  console.log(`CNI plugin latency, ${runs} runs (ms), ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} vCPU`);
  console.log('| what | median | p90 |\n|---|---|---|');
  console.log(row('eni-ipam ADD (plugin process wall time, incl. ipamd RPC + netns wiring)', add));
  console.log(row('eni-ipam DEL', del));
  console.log(row('`node -e 0` (floor)', floor));
  console.log(`ADD / node floor: ${(quantile(add, 0.5) / quantile(floor, 0.5)).toFixed(2)}×`);
}

main().catch((e: Error) => { console.error(e.stack); process.exit(1); });
