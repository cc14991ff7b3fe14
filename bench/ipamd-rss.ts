/**
 * bench: ipamd's resident memory (VmRSS from /proc/<pid>/status, MiB) — the figure the
 * chart's memory request and limit come from. ipamd is the real binary in a child
 * process on the simulated cloud, with metrics, introspection and the CRI source on
 * (a CRI stand-in listing the sandboxes), in prefix mode on an m5.large so it can hold
 * 250 allocations. Samples: idle after start, after 250 ADDs, then after `--churn`
 * seconds of DEL+ADD pairs (about 4 a second, the default 30 s cooldown on) at 250 held
 * (growth, if any, shows as the difference).
 * Prints figures, no pass/fail.
 *
 *   node dist/bench/ipamd-rss.js [--pods 250] [--churn 60]
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { SimCloud } from '../sim/index.js';
import { ipamdClient } from '../test/helpers/ipamd-client.js';
import { createSimNode } from '../test/property/sim-node.js';
import { machineLine, row, sleep } from './bench-util.js';

/** VmRSS of `pid` in MiB (Linux /proc). @throws Error when the process is gone. */
function vmRssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Math.round((Number(m[1]) / 1024) * 10) / 10;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { pods: { type: 'string', default: '250' }, churn: { type: 'string', default: '60' } } });
  const pods = Number(values.pods);
  const churnS = Number(values.churn);
  delete process.env.NODE_EXTRA_CA_CERTS;
  const sim = new SimCloud({ seed: 7 });
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/19' });
  const node = await createSimNode({
    sim, subnetId: subnet.subnetId, instanceType: 'm5.large', mode: 'child',
    env: { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1', DISABLE_METRICS: 'false', METRICS_BIND_ADDRESS: '127.0.0.1:0' },
  });
  const c = ipamdClient(node.socket);
  try {
    await node.start();
    await sleep(2000);
    const pid = node.pid!;
    const idle = vmRssMiB(pid);
    for (let i = 0; i < pods; i++) {
      await c.add(`pod${i}`).catch(async (e: Error) => {
        const st = await node.status();
        throw new Error(`ADD ${i + 1} of ${pods} failed: ${e.message}; counts ${JSON.stringify(st.counts)}`);
      });
    }
    await sleep(2000);
    const held = vmRssMiB(pid);
    let pairs = 0;
    for (const until = Date.now() + churnS * 1000; Date.now() < until; pairs++) {
      const k = `pod${pairs % pods}`;
      await c.del(k);
      await c.add(k);
      await sleep(250); // ~4 pairs/s: with the default 30 s cooldown, 120 cooling + 250 held fit the 432
    }
    await sleep(2000);
    const after = vmRssMiB(pid);
    const s = await node.status();
    console.log(machineLine(os.cpus().length));
    console.log(row(['ipamd RSS (MiB)', 'idle', `${pods} held`, `after ${churnS} s churn`, 'churn pairs', 'assigned']));
    console.log(row(['m5.large, prefix mode', idle, held, after, pairs, s.counts.assigned]));
  } finally {
    c.close();
    await node.close();
    await sim.stop();
  }
}

await main();
