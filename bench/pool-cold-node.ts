/**
 * bench: a cold node. ipamd starts on a fresh m5.xlarge (4 ENIs × 14 secondary IPs)
 * whose EC2 answers CreateNetworkInterface in 0.5 s and takes 3 s from
 * AttachNetworkInterface to `attached` (sim faults: latency + attachment delay); as
 * soon as it serves, 30 pod ADDs arrive spread evenly over 1 s. Prints the time until
 * all 30 have IPs, ADD latency quantiles, and the EC2 calls made (mutating ones
 * separately) until then and until the pool settles. Prints figures, no pass/fail.
 *
 * ipamd is the real binary in a child process (`--in-process` runs startDaemon here).
 *
 *   node dist/bench/pool-cold-node.js [--pods 30] [--spread-ms 1000] [--in-process]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { SimCloud, type ApiCallRecord } from '../sim/index.js';
import { ipamdClient, type GrpcError } from '../kit/ipamd-client.js';
import { createSimNode } from '../kit/sim-node.js';
import { callsByAction, isMutating, machineLine, row, sleep } from './bench-util.js';
import { quantile } from './stats.js';

interface ColdResult {
  name: string;
  allServedMs: number;
  failed: string[];
  addMs: number[];
  untilServed: ApiCallRecord[];
  untilSettled: ApiCallRecord[];
  settledMs: number;
}

async function coldRun(
  name: string,
  env: Record<string, string>,
  o: { pods: number; spreadMs: number; inProcess: boolean },
): Promise<ColdResult> {
  const sim = new SimCloud({ seed: 11 });
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/20' });
  sim.faults.setLatency('CreateNetworkInterface', 500);
  sim.faults.setAttachmentDelays({ attachMs: 3000 });
  const node = await createSimNode({
    sim,
    subnetId: subnet.subnetId,
    instanceType: 'm5.xlarge',
    env,
    mode: o.inProcess ? 'in-process' : 'child',
  });
  const c = ipamdClient(node.socket);
  try {
    const callsBefore = sim.calls.length;
    await node.start();
    const t0 = Date.now();
    const addMs: number[] = [];
    const failed: string[] = [];
    await Promise.all(
      Array.from({ length: o.pods }, async (_, i) => {
        await sleep((i * o.spreadMs) / o.pods);
        const id = `cold${i}`;
        node.cri?.add({ id, name: `pod-${id}`, namespace: 'bench', uid: `uid-${id}` });
        const s = Date.now();
        try {
          const r = await c.add(id);
          node.cri?.setIp(id, r.ipv4_addr);
          addMs.push(Date.now() - s);
        } catch (e) {
          failed.push(`${id}: ${(e as GrpcError).details ?? (e as Error).message}`);
        }
      }),
    );
    const allServedMs = Date.now() - t0;
    const untilServed = sim.calls.slice(callsBefore);
    // Settled: no EC2 call for 3 s (or 60 s passed).
    for (const until = Date.now() + 60_000; Date.now() < until && Date.now() - (sim.calls.at(-1)?.at ?? 0) < 3000;)
      await sleep(100);
    const settledMs = (sim.calls.at(-1)?.at ?? t0) - t0;
    return { name, allServedMs, failed, addMs, untilServed, untilSettled: sim.calls.slice(callsBefore), settledMs };
  } finally {
    c.close();
    await node.close();
    await sim.stop();
  }
}

const fmtCalls = (calls: readonly ApiCallRecord[]) =>
  [...callsByAction(calls.filter((x) => isMutating(x.action)))].map(([a, n]) => `${a} ${n}`).join(', ');

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '30' },
      'spread-ms': { type: 'string', default: '1000' },
      'in-process': { type: 'boolean', default: false },
    },
  });
  const o = {
    pods: Number(values.pods),
    spreadMs: Number(values['spread-ms']),
    inProcess: values['in-process'] ?? false,
  };
  delete process.env.NODE_EXTRA_CA_CERTS;
  const runs = [
    await coldRun('WARM_ENI_TARGET=1 (default)', {}, o),
    await coldRun('WARM_IP_TARGET=5 MINIMUM_IP_TARGET=10', { WARM_IP_TARGET: '5', MINIMUM_IP_TARGET: '10' }, o),
  ];
  console.log(
    `Cold node: ${o.pods} ADDs within ${o.spreadMs} ms of ipamd serving, m5.xlarge, CreateNetworkInterface 0.5 s, attach 3 s, ipamd ${o.inProcess ? 'in-process' : 'as a child process'}, ${machineLine(os.cpus().length)}`,
  );
  console.log(
    row([
      'config',
      'all served (ms after start)',
      'ADD p50 / p90 / max ms',
      'failed',
      'mutating calls until all served',
      'calls until settled (mutating / all)',
      'settled at ms',
    ]),
  );
  console.log(row(Array(7).fill('---')));
  for (const r of runs) {
    const mut = (xs: readonly ApiCallRecord[]) => xs.filter((x) => isMutating(x.action)).length;
    console.log(
      row([
        r.name,
        r.failed.length ? `not all: ${r.failed.length} failed (last answer at ${r.allServedMs})` : r.allServedMs,
        `${quantile(r.addMs, 0.5).toFixed(0)} / ${quantile(r.addMs, 0.9).toFixed(0)} / ${Math.max(...r.addMs).toFixed(0)} (served ADDs)`,
        r.failed.length,
        `${mut(r.untilServed)} (${fmtCalls(r.untilServed)})`,
        `${mut(r.untilSettled)} / ${r.untilSettled.length}`,
        r.settledMs,
      ]),
    );
    for (const f of r.failed) console.log(`  failed: ${f}`);
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
