/**
 * bench: what one kubelet probe of ipamd costs the node, per run: the Node probe the chart
 * ran until issue 29 (`node dist/ipamd/probe.js`) against the static C probe it runs now
 * (`dist/cni-plugin/eni-ipam-probe`, docs/design.md#17-probes-without-node), both against
 * the same real ipamd (simulated cloud) serving on its Unix socket, in the same run,
 * rounds alternating which goes first. `/bin/true` is the floor of the method.
 *
 * CPU: user + sys of the probe process (bash's `time`, 1 ms resolution; bench/timed-exec.ts),
 * so the median of a static probe reads 0 or 1 ms and the mean over all runs is the finer
 * figure. RSS: the probe's peak resident set (GNU time's %M, `ru_maxrss` of the child, KiB),
 * measured in a separate run of the same command so GNU time's own start is never in the
 * CPU figure. Every run must exit 0 (SERVING), or the bench stops. Prints figures, no
 * pass/fail.
 *
 *   node dist/bench/probe-cost.js [--runs 30]
 */
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { createNode } from '../kit/node-harness.js';
import { machineLine, row } from './bench-util.js';
import { quantile } from './stats.js';
import { timedExec } from './timed-exec.js';

const NODE_PROBE = fileURLToPath(new URL('../ipamd/probe.js', import.meta.url));
const NATIVE_PROBE = fileURLToPath(new URL('../cni-plugin/eni-ipam-probe', import.meta.url));

/** Peak RSS (KiB) of one run of `argv` (GNU time %M). @throws Error when it exits non-zero. */
function maxRssKiB(argv: string[]): Promise<number> {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  return new Promise((resolve, reject) => {
    const p = spawn('/usr/bin/time', ['-f', 'maxrss %M', ...argv], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (b: Buffer) => (err += b.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      const m = /maxrss (\d+)/.exec(err);
      if (code !== 0 || !m) return reject(new Error(`${argv.join(' ')} exited ${code}: ${err.trim()}`));
      resolve(Number(m[1]));
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '30' } } });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`--runs "${values.runs}" is invalid: expected a whole number >= 1`);
  const h = await createNode();
  try {
    await h.startIpamd();
    const args = ['--socket', h.socket, '--timeout', '5000'];
    const probes: Array<[string, string[]]> = [
      ['node dist/ipamd/probe.js', [process.execPath, NODE_PROBE, ...args]],
      ['dist/cni-plugin/eni-ipam-probe', [NATIVE_PROBE, ...args]],
      ['/bin/true (floor)', ['/bin/true']],
    ];
    const cpu = probes.map(() => [] as number[]);
    const wall = probes.map(() => [] as number[]);
    const rss = probes.map(() => [] as number[]);
    for (let r = 0; r < runs; r++) {
      const order = r % 2 === 0 ? [0, 1, 2] : [1, 0, 2];
      for (const i of order) {
        const t = await timedExec(probes[i]![1]);
        if (t.code !== 0) throw new Error(`${probes[i]![0]} exited ${t.code}: ${t.stdout}${t.stderr}`);
        cpu[i]!.push(t.cpuMs);
        wall[i]!.push(t.wallMs);
        rss[i]!.push(await maxRssKiB(probes[i]![1]));
      }
    }
    console.log(
      `probe cost per run, ${runs} runs each against a serving ipamd; ${machineLine(os.cpus().length)}, load ${os.loadavg()[0]!.toFixed(1)}`,
    );
    console.log(row(['probe', 'CPU median ms', 'CPU p90 ms', 'CPU mean ms', 'wall median ms', 'peak RSS median MiB']));
    console.log(row(['---', '---', '---', '---', '---', '---']));
    probes.forEach(([name], i) => {
      const mean = cpu[i]!.reduce((a, b) => a + b, 0) / runs;
      console.log(
        row([
          name,
          quantile(cpu[i]!, 0.5).toFixed(0),
          quantile(cpu[i]!, 0.9).toFixed(0),
          mean.toFixed(2),
          quantile(wall[i]!, 0.5).toFixed(1),
          (quantile(rss[i]!, 0.5) / 1024).toFixed(1),
        ]),
      );
    });
  } finally {
    await h.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
