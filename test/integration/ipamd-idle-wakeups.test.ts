/**
 * An idle ipamd sleeps: its main thread wakes a few times a second, not on a 10 ms timer.
 * prom-client's default event-loop lag sampler (`monitorEventLoopDelay`, 10 ms) woke every
 * ipamd 100 times a second, ~8 ms of CPU per second on every node; ipamd samples every
 * EVENT_LOOP_LAG_SAMPLE_MS (100 ms) and not at all with DISABLE_METRICS
 * (docs/design.md#16-footprint-and-latency). Real ipamd child process on the simulated
 * cloud, metrics on as the chart runs it; wake-ups read from the kernel
 * (`/proc/<pid>/task/<pid>/status`, voluntary_ctxt_switches: one per blocking wait).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { SimCloud } from '../../sim/index.js';
import { startedSimNode } from '../../kit/sim-node.js';
import { sleep } from '../helpers/sim-fixture.js';
import { waitFor } from '../../kit/wait.js';

/** Voluntary context switches of the main thread of `pid` so far. */
function mainThreadSleeps(pid: number): number {
  const m = /voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no voluntary_ctxt_switches in /proc/${pid}/task/${pid}/status`);
  return Number(m[1]);
}

/**
 * Wake-ups per second of `pid`'s main thread over `windowMs` in which the cloud saw no EC2
 * call (a window with one is measured again: the pool was still settling).
 */
async function idleWakeupsPerSecond(pid: number, sim: SimCloud, windowMs: number): Promise<number> {
  const { rate } = await waitFor(
    'a window of idle ipamd without EC2 calls',
    async () => {
      const calls = sim.calls.length;
      const s0 = mainThreadSleeps(pid);
      const t0 = performance.now();
      await sleep(windowMs); // not a wait: the measuring window
      const rate = ((mainThreadSleeps(pid) - s0) * 1000) / (performance.now() - t0);
      return sim.calls.length === calls ? { rate } : undefined;
    },
    60_000,
  );
  return rate;
}

test('an idle ipamd with metrics on wakes its main thread fewer than 40 times a second', async (t) => {
  const { sim, node } = await startedSimNode(t, 48, {
    mode: 'child',
    env: { DISABLE_METRICS: 'false', METRICS_BIND_ADDRESS: '127.0.0.1:0' },
  });
  const rate = await idleWakeupsPerSecond(node.pid!, sim, 3000);
  t.diagnostic(`main thread wake-ups while idle: ${rate.toFixed(1)}/s`);
  // 100 ms lag sampling is 10 a second; periodic work (evidence passes, ENI reconcile) adds a few.
  assert.ok(rate < 40, `main thread woke ${rate.toFixed(1)} times a second while idle`);
});
