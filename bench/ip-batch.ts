/**
 * bench: how the CNI plugin should drive iproute2 for one pod's wiring, timed from a
 * Node process as the plugin does it (child_process.spawn, wall time in ms):
 *
 *   batch per side     one `ip -batch -` in the node netns + one `nsenter --net=<pod> ip -batch -`
 *                      (what cni-plugin/wiring.ts does: 2 processes)
 *   batch, ip -n       the same, but the pod side as `ip -n <name> -batch -` (named netns only)
 *   ip per command     one `ip <line>` per node-side line and one `nsenter --net=<pod> ip <line>`
 *                      per pod-side line, sequentially
 *
 * The lines are the plugin's own (wiring.ts hostLines/podLines) for a pod on the main
 * route table. Each round wires a fresh named pod netns and deletes the host veth; the
 * whole bench runs inside a throw-away node netns (re-executed under `nsenter --net`),
 * so nothing on the real host changes. Needs root.
 *
 *   node dist/bench/ip-batch.js [--runs 30]
 */
import { spawn, spawnSync } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createNamedNetns } from '../kit/netns.js';
import { ipBatch } from '../netfacts/ip-batch.js';
import { hostLines, podLines, policyRoutingLines, type WiringPlan } from '../cni-plugin/wiring.js';
import { ms, summarize } from './timed-exec.js';

const SELF = fileURLToPath(import.meta.url);

/** Runs one command to completion. @throws Error with its stderr when it fails. */
function run(argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${argv.join(' ')}: ${err.trim()}`))));
  });
}

/** Runs `ip -n <name> -batch -` with `lines` on stdin. */
function ipBatchNamed(name: string, lines: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn('ip', ['-n', name, '-batch', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`ip -n ${name} -batch: ${err.trim()}`))));
    p.stdin.end(`${lines.join('\n')}\n`);
  });
}

type Variant = 'batch per side' | 'batch, ip -n' | 'ip per command';

async function wire(v: Variant, plan: WiringPlan, podName: string): Promise<void> {
  if (v === 'batch per side') {
    await ipBatch(hostLines(plan));
    await ipBatch(podLines(plan), plan.netns);
  } else if (v === 'batch, ip -n') {
    await ipBatch(hostLines(plan));
    await ipBatchNamed(podName, podLines(plan));
  } else {
    for (const l of hostLines(plan)) await run(['ip', ...l.split(' ')]);
    for (const l of podLines(plan)) await run(['nsenter', `--net=${plan.netns}`, 'ip', ...l.split(' ')]);
  }
}

async function inside(runs: number): Promise<void> {
  const variants: Variant[] = ['batch per side', 'batch, ip -n', 'ip per command'];
  const times = new Map<Variant, number[]>(variants.map((v) => [v, []]));
  for (let i = 0; i < runs + 2; i++) {
    for (let j = 0; j < variants.length; j++) {
      const v = variants[(i + j) % variants.length]!;
      const name = `eni-ipb-pod-${process.pid}`;
      const pod = await createNamedNetns(name);
      try {
        const plan: WiringPlan = {
          netns: pod.path,
          ifName: 'eth0',
          hostVeth: 'enibench0',
          hostMac: '02:00:00:00:00:01',
          podMac: '02:00:00:00:00:02',
          ipv4: '10.0.7.9',
          mtu: 9001,
          routeTableId: 3, // a secondary ENI's table: both pod rules
        };
        const t0 = performance.now();
        await wire(v, plan, name);
        const t = performance.now() - t0;
        if (i >= 2) times.get(v)!.push(t);
        // Undo: the host veth (its peer and route go with it) and the pod's ip rules.
        await ipBatch([
          `link del dev ${plan.hostVeth}`,
          ...policyRoutingLines(plan).map((l) => l.replace(/^rule (add|replace) /, 'rule del ')),
        ]);
      } finally {
        await pod.remove();
      }
    }
  }
  const sample: WiringPlan = {
    netns: '/x',
    ifName: 'eth0',
    hostVeth: 'v',
    hostMac: 'm',
    podMac: 'm',
    ipv4: '10.0.7.9',
    mtu: 9001,
    routeTableId: 3,
  };
  const nHost = hostLines(sample).length;
  const nPod = podLines(sample).length;
  console.log(
    `iproute2 wiring of one pod (${nHost} node-side + ${nPod} pod-side lines), ${runs} rounds, ${os.cpus().length} vCPU, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log('| how | processes | median ms | p90 ms |\n|---|---|---|---|');
  const procs: Record<Variant, string> = {
    'batch per side': '2 (+1 nsenter exec)',
    'batch, ip -n': '2',
    'ip per command': `${nHost + nPod} (+${nPod} nsenter execs)`,
  };
  for (const v of variants) {
    const s = summarize(times.get(v)!);
    console.log(`| ${v} | ${procs[v]} | ${ms(s.median)} | ${ms(s.p90)} |`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '30' } } });
  const runs = Number(values.runs);
  if (process.env.ENI_IPAM_BENCH_INSIDE === '1') return inside(runs);
  const node = await createNamedNetns(`eni-ipb-node-${process.pid}`);
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, ENI_IPAM_BENCH_INSIDE: '1' };
    delete env.NODE_EXTRA_CA_CERTS;
    const r = spawnSync('nsenter', [`--net=${node.path}`, process.execPath, SELF, '--runs', String(runs)], {
      env,
      stdio: 'inherit',
    });
    if (r.status !== 0) throw new Error(`bench inside the node netns exited ${r.status}`);
  } finally {
    await node.remove();
  }
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(e.stack);
    process.exit(1);
  },
);
