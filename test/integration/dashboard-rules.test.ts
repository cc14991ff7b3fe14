/**
 * The shipped alert rules (config/prometheus/eni-ipam-rules.yaml) pass Prometheus's own
 * checker, `promtool check rules` (Debian's prometheus package), and the shipped
 * Grafana dashboard parses with a PromQL expression on every panel target. What each
 * query returns against a real Prometheus is test/integration/dashboard-prometheus.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { RULES_FILE, dashboardTargets, loadDashboard, substituteVariables } from '../helpers/dashboard.js';

test('promtool check rules passes on the shipped rules file', (t) => {
  const r = spawnSync('promtool', ['check', 'rules', RULES_FILE], { encoding: 'utf8', timeout: 30_000 });
  if (r.error) throw new Error(`promtool could not run (install Debian's prometheus package: scripts/ensure-deps.sh --containerd): ${r.error.message}`);
  const out = `${r.stdout}${r.stderr}`.trim();
  for (const line of [`promtool check rules ${RULES_FILE} (exit ${r.status}):`, ...out.split('\n')]) t.diagnostic(line);
  assert.equal(r.status, 0, out);
  assert.match(out, /SUCCESS: 4 rules found/);
});

test('every dashboard panel (rows aside) has at least one PromQL target', async () => {
  const d = await loadDashboard();
  const targets = dashboardTargets(d);
  for (const p of d.panels.filter((x) => x.type !== 'row')) {
    assert.ok(targets.some((x) => x.panel === p.title), `panel "${p.title}" has no target with an expr`);
  }
  assert.ok(targets.length >= 15, `${targets.length} targets`);
  // Every variable a query uses is declared by the dashboard or built into Grafana.
  const declared = Object.fromEntries(d.templating.list.map((v) => [v.name, 'x']));
  assert.deepEqual(Object.keys(declared).sort(), ['datasource', 'instance', 'job']);
  const builtins = { __rate_interval: '1m', __range: '1h', __interval: '15s' };
  for (const x of targets) assert.doesNotThrow(() => substituteVariables(x.expr, { ...declared, ...builtins }), `panel "${x.panel}" ${x.refId}`);
});
