/**
 * The shipped alert rules (config/prometheus/eni-ipam-rules.yaml) pass Prometheus's own
 * checker, `promtool check rules` (Debian's prometheus package), and its unit tests,
 * `promtool test rules`, with the shipped `for:` durations; the shipped Grafana dashboard
 * parses with a PromQL expression on every panel target. What each
 * query returns against a real Prometheus is test/integration/dashboard-prometheus.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { RULES_FILE, dashboardTargets, loadDashboard, substituteVariables } from '../helpers/dashboard.js';

test('promtool check rules passes on the shipped rules file', (t) => {
  const r = spawnSync('promtool', ['check', 'rules', RULES_FILE], { encoding: 'utf8', timeout: 30_000 });
  if (r.error)
    throw new Error(
      `promtool could not run (install Debian's prometheus package: scripts/ensure-deps.sh --containerd): ${r.error.message}`,
    );
  const out = `${r.stdout}${r.stderr}`.trim();
  for (const line of [`promtool check rules ${RULES_FILE} (exit ${r.status}):`, ...out.split('\n')]) t.diagnostic(line);
  assert.equal(r.status, 0, out);
  assert.match(out, /SUCCESS: 4 rules found/);
});

test('every dashboard panel (rows aside) has at least one PromQL target', async () => {
  const d = await loadDashboard();
  const targets = dashboardTargets(d);
  for (const p of d.panels.filter((x) => x.type !== 'row')) {
    assert.ok(
      targets.some((x) => x.panel === p.title),
      `panel "${p.title}" has no target with an expr`,
    );
  }
  assert.ok(targets.length >= 15, `${targets.length} targets`);
  // Every variable a query uses is declared by the dashboard or built into Grafana.
  const declared = Object.fromEntries(d.templating.list.map((v) => [v.name, 'x']));
  assert.deepEqual(Object.keys(declared).sort(), ['datasource', 'instance', 'job']);
  const builtins = { __rate_interval: '1m', __range: '1h', __interval: '15s' };
  for (const x of targets)
    assert.doesNotThrow(
      () => substituteVariables(x.expr, { ...declared, ...builtins }),
      `panel "${x.panel}" ${x.refId}`,
    );
});

/**
 * The shipped `for:` durations and thresholds, on synthetic series at 1 min resolution
 * (`promtool test rules`): what dashboard-prometheus.test.ts cannot wait for. The rules
 * are the shipped ones with their annotations removed (promtool compares annotations
 * verbatim; expressions, `for:` and labels are untouched).
 */
test('promtool test rules: each alert fires after its shipped for: and not on a healthy node', async (t) => {
  const { mkdtemp, readFile, rm, writeFile } = await import('node:fs/promises');
  const os = await import('node:os');
  const path = await import('node:path');
  const { parse, stringify } = await import('yaml');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-rules-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const doc = parse(await readFile(RULES_FILE, 'utf8')) as { groups: Array<{ rules: Array<Record<string, unknown>> }> };
  for (const g of doc.groups) for (const r of g.rules) delete r.annotations;
  await writeFile(path.join(dir, 'rules.yaml'), stringify(doc));

  const n = (instance: string) => `job="eni-ipam", instance="${instance}"`;
  const firing = (alertname: string, instance: string, severity: string, at: string[], never: string[]) => [
    ...at.map((eval_time) => ({
      eval_time,
      alertname,
      exp_alerts: [{ exp_labels: { severity, job: 'eni-ipam', instance } }],
    })),
    ...never.map((eval_time) => ({ eval_time, alertname, exp_alerts: [] })),
  ];
  // Buckets of one ADD-latency histogram: `per` observations a minute, all at or below `le`.
  const hist = (instance: string, le: number, per: number) =>
    ['0.5', '1', '2.5', '+Inf'].map((b) => ({
      series: `eni_ipam_add_latency_seconds_bucket{${n(instance)}, outcome="ok", le="${b}"}`,
      values: b === '+Inf' || Number(b) >= le ? `0+${per}x30` : '0x30',
    }));
  const tests = {
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: [
          // full: no free address, one subnet_full ADD failure a minute. busy: the same failures but addresses free.
          // slow: no free address, failures only for a slow refill (timeout): not "cannot allocate".
          { series: `eni_ipam_ip_addresses{${n('full')}, state="available"}`, values: '0x30' },
          { series: `eni_ipam_add_failures_total{${n('full')}, reason="subnet_full"}`, values: '0+1x30' },
          { series: `eni_ipam_ip_addresses{${n('busy')}, state="available"}`, values: '3x30' },
          { series: `eni_ipam_add_failures_total{${n('busy')}, reason="subnet_full"}`, values: '0+1x30' },
          { series: `eni_ipam_ip_addresses{${n('slow')}, state="available"}`, values: '0x30' },
          { series: `eni_ipam_add_failures_total{${n('slow')}, reason="timeout"}`, values: '0+1x30' },
          // frozen from minute 0; thawed frozen for 9 minutes only.
          { series: `eni_ipam_releases_frozen{${n('frozen')}}`, values: '1x30' },
          { series: `eni_ipam_releases_frozen{${n('thawed')}}`, values: '1x8 0x21' },
          // throttled 2 calls a minute (10 per 5 min); rarely 1 call every 2 minutes.
          {
            series: `eni_ipam_ec2_throttled_total{${n('throttled')}, action="AssignPrivateIpAddresses"}`,
            values: '0+2x30',
          },
          {
            series: `eni_ipam_ec2_throttled_total{${n('rarely')}, action="AssignPrivateIpAddresses"}`,
            values: '0+0.5x30',
          },
          // ADDs of ~2.5 s (p99 over 1 s) against ADDs of under 0.5 s.
          ...hist('slowadd', 2.5, 10),
          ...hist('fastadd', 0.5, 10),
        ],
        alert_rule_test: [
          // for: 2m after increase()>0 holds (from minute 1).
          ...firing('EniIpamNodeCannotAllocate', 'full', 'critical', ['4m', '20m'], ['2m']),
          // for: 10m.
          ...firing('EniIpamReleasesFrozen', 'frozen', 'warning', ['11m', '25m'], ['9m']),
          // >= 5 throttles per 5 min (from about minute 3), for: 10m.
          ...firing('EniIpamEc2Throttled', 'throttled', 'warning', ['15m', '25m'], ['10m']),
          // p99 over 1 s, for: 10m.
          ...firing('EniIpamAddLatencyHigh', 'slowadd', 'warning', ['13m', '25m'], ['9m']),
        ],
      },
    ],
  };
  await writeFile(path.join(dir, 'tests.yaml'), stringify(tests));
  const r = spawnSync('promtool', ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
  const out = `${r.stdout}${r.stderr}`.trim();
  for (const line of [`promtool test rules (exit ${r.status}):`, ...out.split('\n')]) t.diagnostic(line);
  assert.equal(r.status, 0, out);
  assert.match(out, /SUCCESS/);
});
