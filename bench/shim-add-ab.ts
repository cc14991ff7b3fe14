/**
 * bench: A/B of the shim fast path's CNI ADD/DEL latency between two ipamd set-ups that
 * differ only by environment variables (e.g. an experiment switch) or by build (`--a-dist`,
 * `--b-dist`: another build's dist/ directory, e.g. a copy made before a change), in one run: two shim
 * nodes (bench/shim-node.ts: sim + ipamd in a throw-away node netns each), rounds
 * alternating A/B on fresh named pod netns, wall time of the shim process measured with
 * `performance.now()` around its spawn (0.01 ms resolution, unlike `bash time`'s 1 ms;
 * the `nsenter` into the node netns is included, the same for both). Needs root;
 * everything created is removed.
 *
 * `--gap-ms N` waits N ms between each ADD and its DEL (a DEL right after a fast ADD can
 * find the kernel still settling the new veth).
 *
 *   node dist/bench/shim-add-ab.js [--rounds 60] [--a K=V]... [--b K=V]... [--a-dist DIR] [--b-dist DIR] [--gap-ms N]
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createNamedNetns } from '../kit/netns.js';
import { startShimNode, type ShimNode } from './shim-node.js';
import { ms, summarize } from './timed-exec.js';

/** Runs the shim once in `node`'s netns; resolves with its wall time in ms. @throws Error when it fails. */
function runShim(node: ShimNode, env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const childEnv = { ...process.env, ...env };
    delete childEnv.NODE_EXTRA_CA_CERTS;
    const t0 = performance.now();
    const p = spawn('nsenter', [`--net=${node.netns.path}`, node.plugin], {
      env: childEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      const dt = performance.now() - t0;
      if (code !== 0) reject(new Error(`${env.CNI_COMMAND} exited ${code}: ${out}`));
      else if (out.includes('eni-ipam.cjs')) reject(new Error(`the shim fell back to the Node plugin: ${out}`));
      else resolve(dt);
    });
    p.stdin.end(JSON.stringify(node.config));
  });
}

const envOf = (kvs: string[]): NodeJS.ProcessEnv =>
  Object.fromEntries(kvs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '60' },
      a: { type: 'string', multiple: true, default: [] },
      b: { type: 'string', multiple: true, default: [] },
      'a-dist': { type: 'string' },
      'b-dist': { type: 'string' },
      'gap-ms': { type: 'string', default: '0' },
    },
  });
  const mainOf = (dist: string | undefined) => (dist ? path.resolve(dist, 'ipamd/main.js') : undefined);
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-shim-ab-'));
  const nodes: Record<'A' | 'B', ShimNode | undefined> = { A: undefined, B: undefined };
  const times = { A: { add: [] as number[], del: [] as number[] }, B: { add: [] as number[], del: [] as number[] } };
  try {
    nodes.A = await startShimNode(
      path.join(work, 'a'),
      'aba',
      { WARM_IP_TARGET: '20', ...envOf(values.a) },
      mainOf(values['a-dist']),
    );
    nodes.B = await startShimNode(
      path.join(work, 'b'),
      'abb',
      { WARM_IP_TARGET: '20', ...envOf(values.b) },
      mainOf(values['b-dist']),
    );
    for (const n of [nodes.A, nodes.B])
      for (let t = 0; t < 100 && (await n.available()) < 20; t++) await new Promise((r) => setTimeout(r, 100));
    const rounds = Number(values.rounds);
    for (let i = -3; i < rounds; i++) {
      for (const who of (i % 2 ? ['A', 'B'] : ['B', 'A']) as Array<'A' | 'B'>) {
        const pod = await createNamedNetns(`shim-ab-${who}-${process.pid}`);
        try {
          const env = {
            CNI_CONTAINERID: `ab${who}${process.pid}x${i}`,
            CNI_NETNS: pod.path,
            CNI_IFNAME: 'eth0',
            CNI_PATH: '/usr/lib/cni',
            CNI_ARGS: `K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-${i}`,
          };
          const add = await runShim(nodes[who]!, { ...env, CNI_COMMAND: 'ADD', ENI_IPAM_SHIM_DEBUG: '1' });
          if (Number(values['gap-ms']) > 0) await new Promise((r) => setTimeout(r, Number(values['gap-ms'])));
          const del = await runShim(nodes[who]!, { ...env, CNI_COMMAND: 'DEL' });
          if (i >= 0) {
            times[who].add.push(add);
            times[who].del.push(del);
          }
        } finally {
          await pod.remove();
        }
      }
    }
  } finally {
    for (const n of [nodes.B, nodes.A]) await n?.stop().catch((e: Error) => console.error(`cleanup: ${e.message}`));
    await rm(work, { recursive: true, force: true });
  }
  const cell = (v: number[]) => {
    const s = summarize(v);
    return `${ms(s.median)} / ${ms(s.p90)}`;
  };
  console.log(
    `shim ADD/DEL A/B, ${times.A.add.length} rounds each, load average ${os.loadavg()[0]!.toFixed(1)}; A: ${[values['a-dist'] ?? '', ...values.a].join(' ').trim() || '(defaults)'}; B: ${[values['b-dist'] ?? '', ...values.b].join(' ').trim() || '(defaults)'}`,
  );
  console.log('| ms, median / p90 | A | B | B/A |');
  console.log('|---|---|---|---|');
  for (const k of ['add', 'del'] as const) {
    console.log(
      `| ${k.toUpperCase()} | ${cell(times.A[k])} | ${cell(times.B[k])} | ${(summarize(times.B[k]).median / summarize(times.A[k]).median).toFixed(2)}× |`,
    );
  }
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(e.stack);
    process.exit(1);
  },
);
