/**
 * "While throttled, ADDs keep being served from the pool" (docs/design.md#10-the-warm-pool-at-depth item 5), end to end:
 * the real ipamd binary against the simulated cloud whose mutating EC2 actions are
 * throttled to a token bucket of burst 1, refill 0.5/s (EC2-style RequestLimitExceeded).
 *
 * A warm pool takes bursts of ADDs and DELs over gRPC while the pool controller tries
 * to grow through the throttle. Checked: every ADD succeeds at once with a unique IP;
 * ipamd's EC2 attempts back off (spacing after a throttle, growing within a run, and a
 * bounded rate, counted in the simulated cloud's call log over time); and /metrics,
 * scraped over HTTP with fetch and parsed, shows exactly the throttled attempts the cloud
 * saw, the retries, the waits, and the ADD/DEL counts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { parsePrometheusText, sample, sumSamples, type PromSample } from '../helpers/prom-text.js';
import type { ApiCallRecord } from '../../sim/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const isMutating = (c: ApiCallRecord) => !c.action.startsWith('Describe');

/** The metrics port ipamd logged in its "ipamd serving" line. */
async function metricsPort(h: NodeHarness): Promise<number> {
  return waitFor('metricsPort in the ipamd log', async () => {
    const log = await readFile(path.join(h.dir, 'ipamd.log'), 'utf8').catch(() => '');
    for (const line of log.split('\n')) {
      try {
        const o = JSON.parse(line) as { msg?: string; metricsPort?: number };
        if (o.msg === 'ipamd serving' && o.metricsPort) return o.metricsPort;
      } catch {
        /* not JSON */
      }
    }
    return undefined;
  });
}

/**
 * Container IDs whose ADD found the pool empty and waited on EC2 (ipamd's "ADD: pool empty:
 * waiting for a refill" lines). An ADD served from the warm pool never logs it: the test's
 * "served from memory" is this set being empty, not a latency bound a loaded machine breaks.
 */
async function addsThatWaited(h: NodeHarness): Promise<string[]> {
  const log = await readFile(path.join(h.dir, 'ipamd.log'), 'utf8').catch(() => '');
  const ids: string[] = [];
  for (const line of log.split('\n')) {
    try {
      const o = JSON.parse(line) as { msg?: string; containerID?: string };
      if (o.msg === 'ADD: pool empty: waiting for a refill' && o.containerID) ids.push(o.containerID);
    } catch {
      /* not JSON */
    }
  }
  return ids;
}

async function scrape(port: number): Promise<PromSample[]> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(r.status, 200);
  return parsePrometheusText(await r.text());
}

/** ADD with its client-side latency. */
async function timedAdd(c: TestIpamdClient, id: string): Promise<{ id: string; ip: string; ms: number }> {
  const t0 = performance.now();
  const r = await c.add(id);
  assert.equal(r.success, true);
  return { id, ip: r.ipv4_addr, ms: performance.now() - t0 };
}

test('throttled EC2: ADDs are served from the warm pool, EC2 retries back off, metrics show the throttled calls', async (t) => {
  const h = await createNode({
    ipamdEnv: { WARM_IP_TARGET: '12', DISABLE_METRICS: 'false', METRICS_BIND_ADDRESS: '127.0.0.1:0' },
  });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const port = await metricsPort(h);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await waitFor('a warm pool of 12 available IPs', async () => (await d.status()).counts.available >= 12);
  await waitFor('no EC2 call in flight', () => h.sim.calls.every((x) => x.durationMs !== undefined)); // the pool controller settled
  const before = h.sim.calls.length;
  const m0 = await scrape(port);

  // The account's mutating bucket: one call now, then one every 2 s.
  h.sim.faults.setThrottle('mutating', { burst: 1, refillPerSecond: 0.5 });
  const t0 = Date.now();
  const held = new Map<string, string>();
  const adds: Array<{ id: string; ip: string; ms: number }> = [];
  const addWave = async (ids: string[]) => {
    for (const r of await Promise.all(ids.map((id) => timedAdd(c, id)))) {
      adds.push(r);
      assert.ok(![...held.values()].includes(r.ip), `${r.ip} handed to ${r.id} is already held`);
      held.set(r.id, r.ip);
    }
  };
  const delWave = async (ids: string[]) => {
    for (const r of await Promise.all(ids.map((id) => c.del(id)))) assert.equal(r.released, true);
    for (const id of ids) held.delete(id);
  };
  // 12 available: 6 ADDs, then 3 DELs with 3 ADDs, then 3 ADDs: at most 12 addresses
  // assigned or cooling, so every ADD can be served from what the pool already holds.
  // The waves are 1.5 s apart on purpose (not a wait): demand arriving while the bucket refills.
  await addWave(['a1', 'a2', 'a3', 'a4', 'a5', 'a6']);
  await sleep(1500);
  await Promise.all([delWave(['a1', 'a2', 'a3']), addWave(['b1', 'b2', 'b3'])]);
  await sleep(1500);
  await addWave(['c1', 'c2', 'c3']);
  // The pool controller keeps trying to grow through the throttle: wait until it has retried a throttled call.
  await waitFor(
    'a throttled mutating call retried into the throttle again',
    () => {
      const m = h.sim.calls.slice(before).filter((x) => x.at >= t0 && isMutating(x) && x.durationMs !== undefined);
      return m.some((x, i) => i > 0 && x.errorCode === 'RequestLimitExceeded' && m[i - 1]!.errorCode === x.errorCode);
    },
    30_000,
  );
  const t1 = Date.now();

  // Every ADD was served from memory, none waited on EC2.
  assert.equal(adds.length, 12);
  assert.deepEqual(await addsThatWaited(h), [], 'ADDs that waited on EC2 while it was throttled');
  t.diagnostic(`ADD latency while throttled: max ${Math.round(Math.max(...adds.map((a) => a.ms)))} ms`);

  // The cloud saw throttled attempts, and ipamd backed off.
  const window = h.sim.calls.slice(before).filter((x) => x.at >= t0 && x.at <= t1 && isMutating(x));
  const throttled = window.filter((x) => x.errorCode === 'RequestLimitExceeded');
  assert.ok(
    throttled.length >= 2,
    `expected throttled attempts, saw ${throttled.length} in ${window.length} mutating calls`,
  );
  const seconds = (t1 - t0) / 1000;
  t.diagnostic(
    `${window.length} mutating calls in ${seconds.toFixed(1)} s, ${throttled.length} throttled: ${window.map((x) => `+${x.at - t0}ms ${x.action}${x.errorCode ? `!${x.errorCode}` : ''}`).join(', ')}`,
  );
  t.diagnostic(`ADD latency ms: ${adds.map((a) => Math.round(a.ms)).join(', ')}`);
  assert.ok(
    window.length <= 3 * seconds + 3,
    `${window.length} mutating calls in ${seconds.toFixed(1)} s: not backing off`,
  );
  for (let i = 1; i < window.length; i++) {
    if (window[i - 1]!.errorCode !== 'RequestLimitExceeded') continue;
    const gap = window[i]!.at - window[i - 1]!.at;
    assert.ok(gap >= 200, `a mutating call followed a throttled one after only ${gap} ms (backoff is >= 250 ms)`);
  }
  // Within a run of consecutive throttles the spacing grows (equal-jitter doubling).
  let run: number[] = [];
  let longestRun = 0;
  for (const x of window) {
    if (x.errorCode === 'RequestLimitExceeded') {
      run.push(x.at);
      longestRun = Math.max(longestRun, run.length);
      for (let i = 2; i < run.length; i++) {
        const g1 = run[i - 1]! - run[i - 2]!,
          g2 = run[i]! - run[i - 1]!;
        assert.ok(g2 >= g1 - 50, `backoff shrank within a throttled run: gaps ${g1} ms then ${g2} ms`);
      }
    } else run = [];
  }
  assert.ok(longestRun >= 2, 'expected at least one retry of a throttled call');

  // Lift the throttle: the pool catches up, so nothing is left in flight.
  h.sim.faults.setThrottle('mutating', null);
  await waitFor('the pool back at 12 available', async () => (await d.status()).counts.available >= 12, 30_000);
  // Wait until ipamd has counted every attempt the cloud answered (the state compared below), not a fixed time.
  await waitFor('no EC2 call in flight', () => h.sim.calls.every((x) => x.durationMs !== undefined));
  // The scrape and the cloud's log are compared as one snapshot: the pool loop may make another
  // call at any time, so a scrape is kept only when no call was logged while it was read.
  let m1: PromSample[] = [];
  let upTo = 0;
  await waitFor('every EC2 attempt counted', async () => {
    const logged = h.sim.calls.length;
    const m = await scrape(port);
    const counted = sumSamples(m, 'awscni_ec2api_req_count') - sumSamples(m0, 'awscni_ec2api_req_count');
    if (h.sim.calls.length !== logged || counted !== logged - before) return false;
    [m1, upTo] = [m, logged];
    return true;
  });

  // /metrics agrees with the cloud's own call log.
  const calls = h.sim.calls.slice(before, upTo);
  const delta = (name: string, labels: Record<string, string> = {}) =>
    sumSamples(m1, name, labels) - sumSamples(m0, name, labels);
  const cloudThrottled = calls.filter((x) => x.errorCode === 'RequestLimitExceeded').length;
  assert.equal(delta('eni_ipam_ec2_throttled_total'), cloudThrottled, 'throttled attempts counted once each');
  assert.equal(delta('eni_ipam_ec2_requests_total', { outcome: 'RequestLimitExceeded' }), cloudThrottled);
  assert.equal(delta('awscni_aws_api_error_count', { error: 'RequestLimitExceeded' }), cloudThrottled);
  assert.ok(delta('awscni_ec2api_error_count') >= cloudThrottled);
  assert.equal(delta('awscni_ec2api_req_count'), calls.length, 'every EC2 attempt counted (retries included)');
  assert.ok(delta('eni_ipam_ec2_retries_total', { code: 'RequestLimitExceeded' }) >= 1);
  assert.ok(delta('eni_ipam_ec2_budget_wait_seconds_total') > 0, 'attempts waited out the back-off hold');
  assert.equal(delta('awscni_add_ip_req_count'), 12);
  assert.equal(delta('awscni_del_ip_req_count'), 3);
  assert.equal(delta('eni_ipam_add_latency_seconds_count', { outcome: 'ok' }), 12);
  assert.equal(
    delta('eni_ipam_add_latency_seconds_bucket', { outcome: 'ok', le: '1' }),
    12,
    'all ADDs under 1 s in the histogram too',
  );
  assert.equal(delta('awscni_no_available_ip_addresses'), 0);
  assert.equal(sample(m1, 'awscni_assigned_ip_addresses'), 9);
  const s = await d.status();
  assert.equal(sample(m1, 'eni_ipam_releases_frozen'), s.releasesFrozen ? 1 : 0);
  assert.equal(
    sumSamples(m1, 'eni_ipam_release_freeze_reason'),
    s.freezeReasons.length,
    'one series per freeze reason',
  );
  assert.equal(sample(m1, 'awscni_total_ip_addresses'), s.counts.total);
  assert.equal(sample(m1, 'eni_ipam_cooling_ip_addresses'), s.counts.cooling);
  assert.equal(sample(m1, 'awscni_eni_allocated'), s.counts.enis);
  assert.equal(sample(m1, 'awscni_eni_max'), 3, 'm5.large attaches 3 ENIs');
  assert.equal(sample(m1, 'awscni_ip_max'), 27, '3 ENIs x 9 secondary IPs');
});

test('injected RequestLimitExceeded on one action: retried with backoff inside one call, then succeeds', async (t) => {
  const h = await createNode({
    ipamdEnv: { WARM_IP_TARGET: '2', DISABLE_METRICS: 'false', METRICS_BIND_ADDRESS: '127.0.0.1:0' },
  });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const port = await metricsPort(h);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await waitFor('2 available IPs', async () => (await d.status()).counts.available >= 2);
  await waitFor('no EC2 call in flight', () => h.sim.calls.every((x) => x.durationMs !== undefined));
  const before = h.sim.calls.length;
  h.sim.faults.injectError({ action: 'AssignPrivateIpAddresses', code: 'RequestLimitExceeded', count: 3 });
  const r = await timedAdd(c, 'x1');
  assert.deepEqual(await addsThatWaited(h), [], 'served from the warm pool, not after the retried assign');
  t.diagnostic(`ADD latency while AssignPrivateIpAddresses was refused: ${Math.round(r.ms)} ms`);
  await waitFor('the pool back at 2 available', async () => (await d.status()).counts.available >= 2, 20_000);
  const assigns = h.sim.calls.slice(before).filter((x) => x.action === 'AssignPrivateIpAddresses');
  assert.deepEqual(
    assigns.map((x) => x.errorCode ?? 'ok'),
    ['RequestLimitExceeded', 'RequestLimitExceeded', 'RequestLimitExceeded', 'ok'],
  );
  const gaps = assigns.slice(1).map((x, i) => x.at - assigns[i]!.at);
  assert.ok(
    gaps[0]! >= 200 && gaps[1]! >= gaps[0]! - 50 && gaps[2]! >= gaps[1]! - 50,
    `retry gaps should grow: ${gaps.join(', ')} ms`,
  );
  const m = await scrape(port);
  assert.equal(
    sample(m, 'eni_ipam_ec2_retries_total', { action: 'AssignPrivateIpAddresses', code: 'RequestLimitExceeded' }),
    3,
  );
  assert.equal(sample(m, 'eni_ipam_ec2_throttled_total', { action: 'AssignPrivateIpAddresses' }), 3);
});
