/**
 * bench: CNI ADD/DEL in ipamd's IPv6 mode against its IPv4 mode, in one run (issue #31,
 * item 6: IPv6 ADD within 1.1× of IPv4 ADD; no EC2 call per pod churned). Two shim nodes
 * (bench/shim-node.ts: ipamd + its own sim process in a throw-away node netns each):
 *
 * - IPv4 mode: secondary IPs, warm pool WARM_IP_TARGET=20;
 * - IPv6 mode: ENABLE_IPv6=true, ENABLE_IPv4=false, ENABLE_PREFIX_DELEGATION=true, the
 *   instance in a dual-stack subnet (sim `--vpc-ipv6-cidr`), ipamd assigns the primary
 *   ENI a /80 once and hands out /128s from it;
 * - with `--dual`, a third node in dual-stack mode (both true, prefix delegation, WARM_IP_TARGET=20).
 *
 * The plugin config is the one ipamd installs (no `ipFamily`, i.e. `auto`: the plugin
 * starts wiring IPv4 while it waits for ipamd's answer, and wires again when the answer is
 * IPv6). `--explicit-family` gives the IPv6 and dual nodes' config `ipFamily: ipv6` / `dual`.
 *
 * Each pod is a fresh named netns; the real shim (dist/cni-plugin/eni-ipam → ipamd's CNI
 * exec socket) runs ADD then DEL, timed from inside bash (bench/timed-exec.ts: wall from
 * `$EPOCHREALTIME`, µs; CPU user+sys of the shim process, 1 ms). Rounds rotate the order
 * of the nodes so all see the same machine load. After 3 warm-up rounds and the IPv4 pool
 * settled, each node's sim call log is read; read again after the measured rounds, the
 * difference is the EC2 calls made during the churn. Every ADD's result is checked for
 * the family the mode serves (an IPv6 /128 first in IPv6 mode).
 *
 * Prints a markdown table: median / p90 (ms) of ADD and DEL wall and CPU, ratios against
 * IPv4 mode, and the EC2 calls during the churn by action. Needs root; NODE_EXTRA_CA_CERTS
 * is removed from every child's environment. Everything created is removed.
 *
 *   node dist/bench/ipv6-add.js [--pods 50] [--dual] [--explicit-family]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createNamedNetns } from '../kit/netns.js';
import type { ApiCallRecord } from '../sim/index.js';
import { callsByAction, cpuMsOf, machineLine, sleep } from './bench-util.js';
import { startShimNode, type ShimNode } from './shim-node.js';
import type { StageSummary } from './shim-trace.js';
import { ms, summarize, timedExec, type Summary } from './timed-exec.js';

/** The VPC's IPv6 /56 in the IPv6-mode and dual-mode sims. */
const VPC6 = '2600:1f14:abc:de00::/56';
const WARM = '20';

type Mode = 'ipv4' | 'ipv6' | 'dual';

/** One mode's shim node, what its ADDs must return, and its samples (ms). */
interface Side {
  mode: Mode;
  node: ShimNode;
  /** The plugin config its pods get. */
  config: Record<string, unknown>;
  /** The families of the ADD result's `ips`, in order. */
  families: Array<'4' | '6'>;
  add: number[];
  del: number[];
  addCpu: number[];
  delCpu: number[];
  /** Length of the sim's call log when the measured rounds start. */
  callsBefore: number;
  /** The calls made during the measured rounds. */
  churnCalls: ApiCallRecord[];
  /** ipamd's CPU time (ms, 10 ms ticks) over the measured rounds. */
  ipamdCpuMs: number;
  /** ipamd's stage marks (`GET /v1/stage-trace`) read after the measured rounds. */
  trace: Record<string, StageSummary>;
}

/** ipamd environment and extra sim flags of each mode. */
const SETUP: Record<Mode, { env: NodeJS.ProcessEnv; sim: string[]; families: Array<'4' | '6'> }> = {
  ipv4: { env: { WARM_IP_TARGET: WARM }, sim: [], families: ['4'] },
  ipv6: {
    env: { ENABLE_IPv6: 'true', ENABLE_IPv4: 'false', ENABLE_PREFIX_DELEGATION: 'true' },
    sim: ['--vpc-ipv6-cidr', VPC6],
    families: ['6', '4'], // the /128, then the node-local IPv4 egress address (169.254.172.0/22)
  },
  dual: {
    env: { ENABLE_IPv6: 'true', ENABLE_IPv4: 'true', ENABLE_PREFIX_DELEGATION: 'true', WARM_IP_TARGET: WARM },
    sim: ['--vpc-ipv6-cidr', VPC6],
    families: ['4', '6'],
  },
};

/**
 * One pod's ADD and DEL through `side`'s shim in a fresh netns; recorded when `record`.
 * @throws Error when either fails, the shim fell back to the Node plugin, or the ADD's
 *   addresses are not of the families the mode serves.
 */
async function cycle(side: Side, i: number, record: boolean): Promise<void> {
  const pod = await createNamedNetns(`eni-v6add-${side.mode}-${process.pid}`);
  try {
    const env = {
      CNI_CONTAINERID: `v6add${side.mode}${process.pid}x${i}`,
      CNI_NETNS: pod.path,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-${i};K8S_POD_INFRA_CONTAINER_ID=${side.mode}${i}`,
    };
    const o = { input: JSON.stringify(side.config), netns: side.node.netns.path };
    const a = await timedExec([side.node.plugin], {
      ...o,
      env: { ...env, CNI_COMMAND: 'ADD', ENI_IPAM_SHIM_DEBUG: '1' },
    });
    if (a.code !== 0) throw new Error(`${side.mode} ADD ${i} failed: ${a.stdout}${a.stderr}`);
    if (a.stderr.includes('eni-ipam.cjs')) throw new Error(`the shim fell back to the Node plugin: ${a.stderr}`);
    const ips = (JSON.parse(a.stdout) as { ips?: Array<{ address: string }> }).ips ?? [];
    const got = ips.map((x) => (x.address.includes(':') ? '6' : '4'));
    if (got.join() !== side.families.join())
      throw new Error(`${side.mode} ADD ${i} returned families ${got.join(',')}, want ${side.families.join(',')}`);
    const d = await timedExec([side.node.plugin], { ...o, env: { ...env, CNI_COMMAND: 'DEL' } });
    if (d.code !== 0) throw new Error(`${side.mode} DEL ${i} failed: ${d.stdout}${d.stderr}`);
    if (record) {
      side.add.push(a.wallMs);
      side.del.push(d.wallMs);
      side.addCpu.push(a.cpuMs);
      side.delCpu.push(d.cpuMs);
    }
  } finally {
    await pod.remove();
  }
}

/**
 * Waits (up to `ms`) until `n`'s sim call log has not grown for 2 s: ipamd's start-up and
 * pool top-up are over.
 * @throws Error when it keeps growing.
 */
async function ec2Quiet(n: ShimNode, label: string, limitMs = 60_000): Promise<void> {
  const t0 = Date.now();
  let last = -1;
  let since = Date.now();
  while (Date.now() - t0 < limitMs) {
    const c = (await n.ec2Calls()).length;
    if (c !== last) [last, since] = [c, Date.now()];
    else if (Date.now() - since >= 2000) return;
    await sleep(250); // polling interval of the call log, not a wait for an event
  }
  throw new Error(`${label}: ipamd kept calling EC2 for ${limitMs} ms after start`);
}

/** Starts the nodes, warms up, runs `pods` measured rounds; the sides with their samples. */
async function run(pods: number, modes: Mode[], work: string, explicitFamily: boolean): Promise<Side[]> {
  const sides: Side[] = [];
  try {
    for (const mode of modes) {
      const s = SETUP[mode];
      const node = await startShimNode(path.join(work, mode), `v6${mode.slice(-2)}`, s.env, undefined, s.sim);
      sides.push({
        mode,
        node,
        config: explicitFamily && mode !== 'ipv4' ? { ...node.config, ipFamily: mode } : node.config,
        families: s.families,
        add: [],
        del: [],
        addCpu: [],
        delCpu: [],
        callsBefore: 0,
        churnCalls: [],
        ipamdCpuMs: 0,
        trace: {},
      });
    }
    for (const s of sides) {
      // The IPv6 mode has its /80 at start; ADDs retry for 30 s while the IPv4 pools fill.
      for (let t = 0; ; t++) {
        try {
          await cycle(s, -1 - t, false);
          break;
        } catch (e) {
          if (t >= 60) throw e;
          await sleep(500); // ipamd not ready yet: retry interval
        }
      }
    }
    for (let i = 0; i < 3; i++) for (const s of sides) await cycle(s, -100 - i, false);
    for (const s of sides) await ec2Quiet(s.node, s.mode);
    for (const s of sides) s.callsBefore = (await s.node.ec2Calls()).length;
    const cpu0 = sides.map((s) => cpuMsOf(s.node.ipamdPid) ?? NaN);
    const orders = sides.map((_, k) => [...sides.slice(k), ...sides.slice(0, k)]);
    for (let i = 0; i < pods; i++) for (const s of orders[i % orders.length]!) await cycle(s, i, true);
    sides.forEach((s, k) => (s.ipamdCpuMs = (cpuMsOf(s.node.ipamdPid) ?? NaN) - cpu0[k]!));
    for (const s of sides) {
      s.churnCalls = (await s.node.ec2Calls()).slice(s.callsBefore);
      s.trace = (await s.node.introspect('/v1/stage-trace')) as Record<string, StageSummary>;
    }
    return sides;
  } finally {
    for (const s of [...sides].reverse())
      await s.node.stop().catch((e: Error) => console.error(`cleanup: ${e.message}`));
  }
}

const cell = (x: Summary) => `${ms(x.median)} / ${ms(x.p90)}`;
const TITLE: Record<Mode, string> = { ipv4: 'IPv4 mode', ipv6: 'IPv6 mode', dual: 'dual-stack mode' };

/** Prints the header line and the markdown table of `sides` (the first is the IPv4 baseline). */
function print(sides: Side[], pods: number, load0: number): void {
  const base = sides[0]!;
  const others = sides.slice(1);
  console.log(
    `shim CNI ADD/DEL, ipamd IPv6 mode vs IPv4 mode, ${pods} fresh netns each, ${machineLine(os.cpus().length)}, load average ${load0.toFixed(1)} → ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log('');
  console.log(
    `| ms, median / p90 | ${sides.map((s) => TITLE[s.mode]).join(' | ')} | ${others.map((s) => `ratio ${s.mode}/ipv4`).join(' | ')} | target |`,
  );
  console.log(`|---|${sides.map(() => '---|').join('')}${others.map(() => '---|').join('')}---|`);
  const rows: Array<[string, keyof Pick<Side, 'add' | 'del' | 'addCpu' | 'delCpu'>, string]> = [
    ['CNI ADD', 'add', 'IPv6 ≤ 1.1×'],
    ['CNI DEL', 'del', '–'],
    ['CNI ADD, CPU time of the shim', 'addCpu', '–'],
    ['CNI DEL, CPU time of the shim', 'delCpu', '–'],
  ];
  for (const [what, k, target] of rows) {
    const b = summarize(base[k]).median;
    console.log(
      `| ${what} | ${sides.map((s) => cell(summarize(s[k]))).join(' | ')} | ${others.map((s) => `${(summarize(s[k]).median / b).toFixed(2)}×`).join(' | ')} | ${target} |`,
    );
  }
  const calls = (s: Side) =>
    s.churnCalls.length === 0
      ? '0'
      : `${s.churnCalls.length} (${[...callsByAction(s.churnCalls)].map(([a, n]) => `${a} ${n}`).join(', ')})`;
  console.log(
    `| ipamd CPU time per pod (ADD + DEL; 10 ms ticks over the run) | ${sides.map((s) => ms(s.ipamdCpuMs / pods)).join(' | ')} | ${others.map((s) => `${(s.ipamdCpuMs / base.ipamdCpuMs).toFixed(2)}×`).join(' | ')} | – |`,
  );
  console.log(
    `| EC2 calls during the ${pods} measured pods | ${sides.map(calls).join(' | ')} | ${others.map(() => '–').join(' | ')} | IPv6: 0 |`,
  );
}

/**
 * Prints ipamd's stage marks side by side (p50 ms since the exec socket accepted the
 * connection for `cni.*`; handler times for `add.*`/`del.*`; `cni.spawn.*` per child the
 * spawn helper started), over its last ADDs/DELs incl. warm-up.
 */
function printStages(sides: Side[]): void {
  const keys = [...new Set(sides.flatMap((s) => Object.keys(s.trace)))]
    .filter((k) => /^(cni\.(add|del|spawn)\.|add\.|del\.)/.test(k))
    .sort();
  console.log('');
  console.log(
    "ipamd's stage marks (ms p50, count in brackets; `cni.*`: since the exec socket accepted the connection):",
  );
  console.log('');
  console.log(`| stage | ${sides.map((s) => TITLE[s.mode]).join(' | ')} |`);
  console.log(`|---|${sides.map(() => '---|').join('')}`);
  for (const k of keys) {
    const c = (s: Side) => (s.trace[k] ? `${ms(s.trace[k].p50)} (${s.trace[k].count})` : '–');
    console.log(`| ${k} | ${sides.map(c).join(' | ')} |`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '50' },
      dual: { type: 'boolean', default: false },
      'explicit-family': { type: 'boolean', default: false },
    },
  });
  const pods = Number(values.pods);
  if (!Number.isInteger(pods) || pods < 1) throw new Error(`--pods must be a positive integer, got '${values.pods}'`);
  delete process.env.NODE_EXTRA_CA_CERTS;
  const load0 = os.loadavg()[0]!;
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-v6add-'));
  let sides: Side[];
  try {
    sides = await run(pods, values.dual ? ['ipv4', 'ipv6', 'dual'] : ['ipv4', 'ipv6'], work, values['explicit-family']);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  print(sides, pods, load0);
  if (values['explicit-family']) console.log("\nThe IPv6 and dual nodes' plugin config names its family (`ipFamily`).");
  printStages(sides);
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(e.stack ?? e.message);
    process.exit(1);
  },
);
