/**
 * bench: EC2 calls (by action) per 1,000 pod ADD/DEL cycles inside the warm band, for
 * three pool configurations: `WARM_ENI_TARGET=1`; `WARM_IP_TARGET=5 MINIMUM_IP_TARGET=10`;
 * prefix delegation (`ENABLE_PREFIX_DELEGATION=true`, printed as "not available in this
 * build" when ipamd refuses it). Prints figures, no pass/fail.
 *
 * Each row: its own simulated cloud (EC2 latency uniform 5–30 ms) and an m5.xlarge node
 * running the real ipamd in this process (startDaemon, real gRPC socket, checkpoint on
 * disk) with a CRI stand-in, so releases are allowed as on a healthy node. `--pods`
 * pods are started and the pool left to settle; then each cycle ADDs one new pod and
 * DELs the oldest, so the pod count stays in [pods, pods + 1] — inside the warm band.
 * Only calls made during the cycles are counted.
 *
 * Time is compressed by `--compress` (default 60): IP_COOLDOWN_PERIOD (30 s),
 * ENI_IPAM_SHRINK_DELAY (60 s), ENI_IPAM_POOL_INTERVAL (5 s) and
 * ENI_IPAM_RECONCILE_INTERVAL (60 s) are divided by it, and `--rate` cycles/s then
 * stand for rate/compress cycles/s on a real node. The 60 s minimum ENI age is not
 * compressed (not configurable), which makes ENI deletion rarer here than in real time.
 *
 *   node dist/bench/pool-ec2-calls.js [--cycles 1000] [--rate 20] [--compress 60] [--pods 10]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { SimCloud } from '../sim/index.js';
import { ipamdClient } from '../kit/ipamd-client.js';
import { createSimNode } from '../kit/sim-node.js';
import { callsByAction, machineLine, row, sleep } from './bench-util.js';
import { quantile } from './stats.js';

interface RowResult {
  name: string;
  /** undefined when the build refuses the configuration. */
  calls?: Map<string, number>;
  cycles: number;
  failedAdds: number;
  addP99Ms: number;
  seconds: number;
  note?: string;
}

const CONFIGS: Array<{ name: string; env: Record<string, string> }> = [
  { name: 'WARM_ENI_TARGET=1', env: { WARM_ENI_TARGET: '1' } },
  { name: 'WARM_IP_TARGET=5 MINIMUM_IP_TARGET=10', env: { WARM_IP_TARGET: '5', MINIMUM_IP_TARGET: '10' } },
  {
    name: 'ENABLE_PREFIX_DELEGATION=true (WARM_PREFIX_TARGET=1)',
    env: { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1' },
  },
];

async function runRow(
  cfg: { name: string; env: Record<string, string> },
  o: { cycles: number; rate: number; compress: number; pods: number },
): Promise<RowResult> {
  const sim = new SimCloud({ seed: 7 });
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/20' });
  sim.faults.setLatency('*', { min: 5, max: 30 });
  const secs = (s: number) => `${Math.max(1, Math.round((s * 1000) / o.compress))}ms`;
  const node = await createSimNode({
    sim,
    subnetId: subnet.subnetId,
    instanceType: 'm5.xlarge',
    env: {
      ...cfg.env,
      IP_COOLDOWN_PERIOD: secs(30),
      ENI_IPAM_SHRINK_DELAY: secs(60),
      ENI_IPAM_POOL_INTERVAL: secs(5),
      ENI_IPAM_RECONCILE_INTERVAL: secs(60),
    },
  });
  const c = ipamdClient(node.socket);
  try {
    try {
      await node.start();
    } catch (e) {
      return {
        name: cfg.name,
        cycles: 0,
        failedAdds: 0,
        addP99Ms: NaN,
        seconds: 0,
        note: `not available in this build (${(e as Error).message.split('\n')[0]})`,
      };
    }
    const live: string[] = [];
    let seq = 0;
    const addPod = async (lat?: number[]) => {
      const id = `pod${seq++}`;
      node.cri?.add({ id, name: `pod-${id}`, namespace: 'bench', uid: `uid-${id}` });
      const t0 = performance.now();
      const r = await c.add(id);
      lat?.push(performance.now() - t0);
      node.cri?.setIp(id, r.ipv4_addr);
      live.push(id);
    };
    for (let i = 0; i < o.pods; i++) await addPod();
    // Settle: wait until no EC2 call for two shrink delays (or 20 s).
    const quietMs = (2 * 60_000) / o.compress + 200;
    for (const until = Date.now() + 20_000; Date.now() < until;) {
      const last = sim.calls.at(-1)?.at ?? 0;
      if (Date.now() - last > quietMs) break;
      await sleep(50);
    }
    const from = sim.calls.length;
    const lat: number[] = [];
    let failed = 0;
    const t0 = Date.now();
    for (let k = 0; k < o.cycles; k++) {
      const due = t0 + (k * 1000) / o.rate;
      if (due > Date.now()) await sleep(due - Date.now());
      try {
        await addPod(lat);
      } catch {
        failed++;
      }
      const old = live.shift()!;
      await c.del(old);
      node.cri?.remove(old);
    }
    const seconds = (Date.now() - t0) / 1000;
    const calls = callsByAction(sim.calls.slice(from).filter((x) => !x.instanceId || x.instanceId === node.instanceId));
    const per1000 = new Map([...calls].map(([a, n]) => [a, (n * 1000) / o.cycles]));
    return {
      name: cfg.name,
      calls: per1000,
      cycles: o.cycles,
      failedAdds: failed,
      addP99Ms: quantile(lat, 0.99),
      seconds,
    };
  } finally {
    c.close();
    await node.close();
    await sim.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      cycles: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '20' },
      compress: { type: 'string', default: '60' },
      pods: { type: 'string', default: '10' },
    },
  });
  const o = {
    cycles: Number(values.cycles),
    rate: Number(values.rate),
    compress: Number(values.compress),
    pods: Number(values.pods),
  };
  delete process.env.NODE_EXTRA_CA_CERTS;
  // Rows run side by side: each has its own simulated cloud and ipamd, and mostly waits.
  const results = await Promise.all(CONFIGS.map((cfg) => runRow(cfg, o)));
  const actions = [...new Set(results.flatMap((r) => [...(r.calls?.keys() ?? [])]))].sort();
  console.log(
    `EC2 calls per 1,000 ADD/DEL cycles in the warm band (${o.pods}–${o.pods + 1} pods, m5.xlarge), ${o.cycles} cycles at ${o.rate}/s, time compressed ${o.compress}× ` +
      `(≙ ${(o.rate / o.compress).toFixed(2)} cycles/s with the default timers), ${machineLine(os.cpus().length)}`,
  );
  console.log(row(['config', ...actions, 'total', 'mutating', 'failed ADDs', 'ADD p99 ms']));
  console.log(row(Array(actions.length + 5).fill('---')));
  for (const r of results) {
    if (!r.calls) {
      console.log(row([r.name, ...actions.map(() => '–'), r.note ?? '', '', '', '']));
      continue;
    }
    const total = [...r.calls.values()].reduce((a, b) => a + b, 0);
    const mutating = [...r.calls].filter(([a]) => !a.startsWith('Describe')).reduce((s, [, n]) => s + n, 0);
    console.log(
      row([
        r.name,
        ...actions.map((a) => (r.calls!.get(a) ?? 0).toFixed(0)),
        total.toFixed(0),
        mutating.toFixed(0),
        r.failedAdds,
        r.addP99Ms.toFixed(1),
      ]),
    );
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
