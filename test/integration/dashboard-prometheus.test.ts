/**
 * The shipped Grafana dashboard and alert rules, proven against the real Prometheus
 * server (Debian's `prometheus` package) scraping two real ipamd processes on the
 * simulated cloud every second:
 *
 * - node A (a /28 subnet, IP_COOLDOWN_PERIOD 600 s): 9 ADDs fill the subnet, two ADDs
 *   fail with `subnet_full`, two DELs leave their addresses cooling: the pool is empty
 *   and cannot grow (EniIpamNodeCannotAllocate). Then ipamd restarts on the same metrics
 *   port with its CRI runtime unreadable: releases freeze (EniIpamReleasesFrozen) and the
 *   restart shows on the Restarts panel.
 * - node B (a /24, WARM_IP_TARGET 1, IP_COOLDOWN_PERIOD 600 s): every EC2 grow takes 2.5 s while a burst of ADDs
 *   waits for it (waiting ADDs, ADD p99 > 1 s: EniIpamAddLatencyHigh); then EC2 answers
 *   RequestLimitExceeded to every grow (EniIpamEc2Throttled); DELs. Its releases are
 *   never frozen (a stand-in CRI runtime answers), so no alert of A's fires on B.
 *
 * Then every panel target's PromQL, read from config/grafana/eni-ipam-dashboard.json with
 * the Grafana variables replaced ($job: the scrape job, $instance: both targets,
 * $__rate_interval and $__range: 5m, longer than the test, so every rate sees the whole
 * workload), is evaluated through /api/v1/query: each must return a non-empty result
 * with a finite value, and each panel must have shown a non-zero value at some point in
 * the run (max_over_time over a 1 s subquery). Every alert must fire, on the node built
 * for it, in /api/v1/alerts, and never on the other node (ALERTS over the run).
 *
 * The one thing the test changes in the shipped rules: every `for:` (2 to 10 minutes as
 * shipped) is 2s here, so a rule goes pending then firing within the run. Expressions,
 * windows ([5m]), thresholds and labels are as shipped. The shipped `for:` values are
 * what config/prometheus/eni-ipam-rules.yaml says; `promtool test rules` in
 * dashboard-rules.test.ts shows each alert firing after its shipped `for:`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { createLifecycleNode, waitUnfrozen, type LifecycleNode } from '../helpers/lifecycle-node.js';
import type { GrpcError } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { freePort, startPrometheus, type PrometheusServer, type PromSeries } from '../helpers/prometheus-server.js';
import { dashboardTargets, loadDashboard, substituteVariables, writeRulesWithFor } from '../helpers/dashboard.js';

const JOB = 'eni-ipam';
const TEST_FOR = '2s';
const COMMON = { DISABLE_METRICS: 'false', ENI_IPAM_INSTALL_CNI: 'false' };

/** Where each alert must fire. */
const EXPECTED_ALERTS: Record<string, 'A' | 'B'> = {
  EniIpamNodeCannotAllocate: 'A',
  EniIpamReleasesFrozen: 'A',
  EniIpamEc2Throttled: 'B',
  EniIpamAddLatencyHigh: 'B',
};

const fmt = (s: PromSeries[]): string =>
  s.map((x) => `${JSON.stringify(x.metric)}=${Number.isFinite(x.value) ? +x.value.toFixed(4) : x.value}`).join(', ');

/** Waits until `alert` is firing for `instance`. @throws naming the alert and what /api/v1/alerts showed. */
async function waitFiring(
  prom: PrometheusServer,
  alert: string,
  instance: string,
  timeoutMs = 30_000,
): Promise<string> {
  let seen = '';
  try {
    return await waitFor(
      `alert ${alert} firing for ${instance}`,
      async () => {
        const mine = (await prom.alerts()).filter((a) => a.labels.alertname === alert);
        seen = mine.map((a) => `${a.labels.instance}:${a.state}`).join(', ') || 'none active';
        const a = mine.find((x) => x.labels.instance === instance && x.state === 'firing');
        return a ? `${a.state} (value ${a.value}, active since ${a.activeAt}) — ${a.annotations.summary}` : undefined;
      },
      timeoutMs,
      250,
    );
  } catch (e) {
    throw new Error(`alert ${alert} never fired for ${instance} (active: ${seen}): ${(e as Error).message}`);
  }
}

/** Node A: exhaust a /28 (the pool cannot grow), then restart with an unreadable CRI (releases freeze). */
async function scenarioA(
  n: LifecycleNode,
  prom: PrometheusServer,
  instance: string,
  log: (s: string) => void,
): Promise<void> {
  await waitUnfrozen(n);
  await Promise.all(Array.from({ length: 9 }, (_, i) => n.add(`a${i}`)));
  for (const id of ['a-full-1', 'a-full-2']) {
    await assert.rejects(
      n.client.add(id),
      (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED,
      `ADD ${id} on a full subnet`,
    );
  }
  await n.del('a0');
  await n.del('a1');
  log(`A EniIpamNodeCannotAllocate: ${await waitFiring(prom, 'EniIpamNodeCannotAllocate', instance)}`);

  // Restart on the same metrics port with the runtime unreadable: releases freeze.
  await n.h.ipamd!.stop();
  await n.start({ CRI_RUNTIME_ENDPOINT: `unix://${path.join(n.h.dir, 'dead-cri.sock')}` });
  assert.equal(
    (await n.status()).releasesFrozen,
    true,
    'releases frozen after a restart with the CRI runtime unreadable',
  );
  log(`A EniIpamReleasesFrozen: ${await waitFiring(prom, 'EniIpamReleasesFrozen', instance)}`);
}

/** Node B: slow EC2 grows with ADDs waiting (ADD p99 > 1 s), then EC2 throttles every grow. */
async function scenarioB(
  n: LifecycleNode,
  prom: PrometheusServer,
  instance: string,
  log: (s: string) => void,
): Promise<void> {
  const h = n.h;
  await waitUnfrozen(n);
  await waitFor('B: a warm pool of 1', async () => (await n.status()).counts.available >= 1);
  for (const action of ['AssignPrivateIpAddresses', 'CreateNetworkInterface']) h.sim.faults.setLatency(action, 2500);
  const t0 = Date.now();
  await Promise.all(Array.from({ length: 4 }, (_, i) => n.add(`b${i}`)));
  log(`B: 4 ADDs on a pool of 1 with 2.5 s EC2 grows took ${Date.now() - t0} ms`);
  await n.del('b0');
  log(`B EniIpamAddLatencyHigh: ${await waitFiring(prom, 'EniIpamAddLatencyHigh', instance)}`);

  for (const action of ['AssignPrivateIpAddresses', 'CreateNetworkInterface']) {
    h.sim.faults.setLatency(action, null);
    h.sim.faults.injectError({ action, code: 'RequestLimitExceeded', count: 100_000 });
  }
  // Take what the pool holds: it tries to grow back to its warm target, and EC2 throttles every attempt.
  const available = (await n.status()).counts.available as number;
  await Promise.all(Array.from({ length: available }, (_, i) => n.add(`bt${i}`)));
  await n.del('b1');
  log(`B EniIpamEc2Throttled: ${await waitFiring(prom, 'EniIpamEc2Throttled', instance)}`);
}

test('every dashboard panel and alert rule returns data from a real Prometheus scraping ipamd', async (t) => {
  const log = (s: string) => t.diagnostic(s);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-dash-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const rulesFile = path.join(dir, 'rules.yaml');
  const shipped = await writeRulesWithFor(rulesFile, TEST_FOR);
  assert.deepEqual(
    shipped.map((r) => r.alert).sort(),
    Object.keys(EXPECTED_ALERTS).sort(),
    'every shipped alert has a scenario here',
  );
  log(`rules as shipped except for: ${shipped.map((r) => `${r.alert} for ${r.for} -> ${TEST_FOR}`).join('; ')}`);

  const [portA, portB] = [await freePort(), await freePort()];
  const instA = `127.0.0.1:${portA}`;
  const instB = `127.0.0.1:${portB}`;

  const a = await createLifecycleNode({
    subnetCidr: '10.0.0.0/28',
    env: { ...COMMON, METRICS_BIND_ADDRESS: instA, IP_COOLDOWN_PERIOD: '600', ENI_IPAM_ADD_WAIT_TIMEOUT: '3s' },
  });
  t.after(() => a.close());
  const b = await createLifecycleNode({
    env: {
      ...COMMON,
      METRICS_BIND_ADDRESS: instB,
      WARM_IP_TARGET: '1',
      IP_COOLDOWN_PERIOD: '600',
      ENI_IPAM_ADD_WAIT_TIMEOUT: '10s',
    },
  });
  t.after(() => b.close());
  const prom = await startPrometheus({ targets: [instA, instB], job: JOB, ruleFiles: [rulesFile] });
  t.after(() => prom.stop());
  log(`Prometheus on ${prom.url} scraping ${instA} (A) and ${instB} (B)`);

  await Promise.all([a.start(), b.start()]);
  await waitFor(
    'both targets up in Prometheus',
    async () => {
      const ts = await prom.targets();
      return ts.length === 2 && ts.every((x) => x.health === 'up');
    },
    20_000,
    200,
  );

  await Promise.all([scenarioA(a, prom, instA, log), scenarioB(b, prom, instB, log)]);

  // Every panel target, from the shipped dashboard.
  const dashboard = await loadDashboard();
  const vars = {
    job: JOB,
    instance: `${instA.replace(/\./g, '\\\\.')}|${instB.replace(/\./g, '\\\\.')}`,
    __rate_interval: '5m',
    __range: '5m',
    __interval: '1s',
  };
  const targets = dashboardTargets(dashboard);
  const peak = new Map<string, number>();
  const results = new Map<string, PromSeries[]>();
  for (const target of targets) {
    const expr = substituteVariables(target.expr, vars);
    const what = `panel "${target.panel}" target ${target.refId}: ${expr}`;
    let last: PromSeries[] = [];
    try {
      await waitFor(
        what,
        async () => {
          last = await prom.query(expr);
          return last.some((s) => Number.isFinite(s.value));
        },
        15_000,
        250,
      );
    } catch {
      assert.fail(`${what} returned ${last.length ? `no finite value: ${fmt(last)}` : 'nothing'}`);
    }
    log(`panel "${target.panel}" ${target.refId}: ${fmt(last)}`);
    results.set(`${target.panel}/${target.refId}`, last);
    const max = (await prom.query(`max(max_over_time((${expr})[5m:1s]))`))[0]?.value ?? 0;
    peak.set(target.panel, Math.max(peak.get(target.panel) ?? 0, Number.isFinite(max) ? max : 0));
  }
  for (const p of dashboard.panels.filter((x) => x.type !== 'row')) {
    assert.ok(
      targets.some((x) => x.panel === p.title),
      `panel "${p.title}" has no PromQL target`,
    );
    assert.ok((peak.get(p.title) ?? 0) > 0, `panel "${p.title}" never showed a non-zero value during the workload`);
  }
  // What the scenarios put on the panels, node by node.
  const value = (panel: string, refId: string, labels: Record<string, string>): number | undefined =>
    results.get(`${panel}/${refId}`)?.find((x) => Object.entries(labels).every(([k, v]) => x.metric[k] === v))?.value;
  assert.equal(
    value('Pool per node (total / assigned / available / cooling)', 'A', { instance: instA }),
    9,
    'A holds the 9 addresses its /28 allows',
  );
  assert.equal(
    value('Pool per node (total / assigned / available / cooling)', 'C', { instance: instA, state: 'available' }),
    0,
    'A has no free address',
  );
  assert.equal(
    value('Pool per node (total / assigned / available / cooling)', 'C', { instance: instA, state: 'cooling' }),
    2,
    "A's two DELs cool",
  );
  assert.ok(
    (value('ADD failures by reason', 'A', { instance: instA, reason: 'subnet_full' }) ?? 0) > 0,
    'A: ADDs failed with subnet_full',
  );
  // 0 right after a grow got InsufficientFreeAddressesInSubnet, or EC2's own count once a
  // later describe ran (the restart's background confirm): 1 address no ENI can use alone.
  assert.ok(
    results.get('Subnet free addresses/A')!.some((x) => x.value <= 1),
    "A's subnet shows at most 1 free address (exhausted)",
  );
  assert.equal(value('Releases frozen', 'A', { instance: instA }), 1, 'A: releases frozen');
  assert.equal(value('Releases frozen', 'A', { instance: instB }), 0, 'B: releases not frozen');
  assert.equal(
    value('Why releases are frozen', 'A', { instance: instA, source: 'cri' }),
    1,
    'A: frozen because of the CRI runtime',
  );
  assert.equal(
    value('Why releases are frozen', 'B', { instance: instA, source: 'cri', state: 'unreadable' }),
    1,
    'A: the CRI source is unreadable',
  );
  assert.equal(value('Restarts', 'A', { instance: instA }), 1, 'A restarted once');
  assert.equal(value('Restarts', 'A', { instance: instB }), 0, 'B never restarted');
  assert.ok(
    (value('EC2 throttles by action', 'A', { action: 'AssignPrivateIpAddresses' }) ?? 0) > 0,
    'B: AssignPrivateIpAddresses throttled',
  );
  assert.ok((value('ADD latency p50 / p99', 'B', { instance: instB }) ?? 0) > 1, 'B: ADD p99 over 1 s');
  const waitingPeak = await prom.query(`max_over_time(eni_ipam_waiting_adds{instance="${instB}"}[5m:1s])`);
  assert.ok((waitingPeak[0]?.value ?? 0) >= 1, `B: ADDs waited for the slow refill (peak ${fmt(waitingPeak)})`);
  log(`panel peaks: ${[...peak].map(([k, v]) => `${k}=${+v.toFixed(4)}`).join('; ')}`);

  log(
    `B releases frozen over the run: ${fmt(await prom.query(`max_over_time(eni_ipam_releases_frozen{instance="${instB}"}[5m])`))}; samples ${fmt(await prom.query(`count_over_time(eni_ipam_releases_frozen{instance="${instB}"}[5m])`))}`,
  );
  // Each alert fired on the node built for it (waitFiring above), and never on the other one.
  for (const [alert, node] of Object.entries(EXPECTED_ALERTS)) {
    const other = node === 'A' ? instB : instA;
    const fired = await prom.query(`max_over_time(ALERTS{alertname="${alert}", instance="${other}"}[5m])`);
    assert.deepEqual(
      fired.map((x) => x.metric.alertstate),
      [],
      `alert ${alert} was active on the node not built for it (${other})`,
    );
  }
});
