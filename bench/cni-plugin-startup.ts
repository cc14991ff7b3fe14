/**
 * bench: start-up cost of the bundled CNI plugin (dist/cni-plugin/eni-ipam.cjs) without
 * ipamd: median/p90 wall time in ms of `CNI_COMMAND=VERSION`, and of ADD and DEL against
 * the in-process stand-in ipamd (test/helpers/cni-backend-stub.ts) on a Unix socket, the
 * plugin run inside a node netns with a fresh named pod netns per ADD. Also prints
 * `node -e 0` as the floor. NODE_EXTRA_CA_CERTS is unset for every child.
 *
 *   node dist/bench/cni-plugin-startup.js [--runs 20]
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { execPlugin } from '../demo/cni-exec.js';
import { createNamedNetns } from '../demo/netns.js';
import { startCniBackendStub } from '../test/helpers/cni-backend-stub.js';
import { quantile } from './stats.js';

const fmt = (name: string, xs: number[]) =>
  `${name.padEnd(28)} median ${quantile(xs, 0.5).toFixed(1).padStart(6)} ms   p90 ${quantile(xs, 0.9).toFixed(1).padStart(6)} ms   (n=${xs.length})`;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
  const runs = Number(values.runs);
  delete process.env.NODE_EXTRA_CA_CERTS;
  const floor: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    floor.push(performance.now() - t0);
  }
  const version: number[] = [];
  for (let i = 0; i < runs; i++) version.push((await execPlugin({ command: 'VERSION', config: '' })).ms);

  const stub = await startCniBackendStub();
  const node = await createNamedNetns(`eni-bench-cp-${process.pid}`);
  const nsenter: number[] = [];
  const add: number[] = [];
  const del: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      spawnSync('nsenter', [`--net=${node.path}`, 'true']);
      nsenter.push(performance.now() - t0);
    }
    const config = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: stub.socket };
    const prefix = ['nsenter', `--net=${node.path}`];
    for (let i = 0; i < runs; i++) {
      const pod = await createNamedNetns(`eni-bench-cp-pod-${process.pid}`);
      try {
        const id = randomBytes(32).toString('hex');
        const a = await execPlugin({ command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0', config, prefix, args: { K8S_POD_NAME: `p${i}`, K8S_POD_NAMESPACE: 'default' } });
        if (a.code !== 0) throw new Error(`ADD failed: ${a.stdout}`);
        add.push(a.ms);
        const d = await execPlugin({ command: 'DEL', containerId: id, netns: pod.path, ifName: 'eth0', config, prefix });
        if (d.code !== 0) throw new Error(`DEL failed: ${d.stdout}`);
        del.push(d.ms);
      } finally {
        await pod.remove();
      }
    }
  } finally {
    await node.remove();
    await stub.close();
  }
  console.log(fmt('node -e 0 (floor)', floor));
  console.log(fmt('nsenter --net true', nsenter));
  console.log(fmt('plugin VERSION', version));
  console.log(fmt('plugin ADD (stub ipamd)', add));
  console.log(fmt('plugin DEL (stub ipamd)', del));
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
