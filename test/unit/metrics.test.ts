/**
 * ipamd metrics: names and labels (amazon-vpc-cni-k8s compatible where the concept is
 * the same), gauges sampled from the datastore and release gate at scrape time, the
 * EC2 and RPC hooks, the config of the EC2 budget, and the HTTP endpoint on loopback.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { createMetrics } from '../../ipamd/observability/metrics.js';
import { startMetricsServer } from '../../ipamd/observability/metrics-server.js';
import { loadConfig } from '../../ipamd/config.js';
import { parsePrometheusText, sample } from '../helpers/prom-text.js';

function node() {
  const t = { now: 1_000_000 };
  const ds = new Datastore(30_000);
  ds.upsertEni({
    eniId: 'eni-1',
    mac: '02:00:00:00:00:01',
    deviceNumber: 0,
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.10',
    isPrimary: true,
    createdAtMs: 0,
    capacity: 9,
  });
  ds.addIps('eni-1', ['10.0.0.11', '10.0.0.12', '10.0.0.13', '10.0.0.14']);
  return { t, ds };
}

test('gauges follow the datastore and the release gate at scrape time', async () => {
  const { t, ds } = node();
  const gate = new ReleaseGate();
  const m = createMetrics({
    ds,
    gate,
    pool: { waiting: 2 },
    limits: () => ({ maxEni: 3, ipMax: 27 }),
    now: () => t.now,
    version: '9.9.9',
  });
  const key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });
  assert.equal(ds.assign(key('a'), undefined, t.now).kind, 'assigned');
  assert.equal(ds.assign(key('b'), undefined, t.now).kind, 'assigned');
  ds.unassign(key('b'), t.now);

  let s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'awscni_total_ip_addresses'), 4);
  assert.equal(sample(s, 'awscni_assigned_ip_addresses'), 1);
  assert.equal(sample(s, 'awscni_eni_allocated'), 1);
  assert.equal(sample(s, 'awscni_eni_max'), 3);
  assert.equal(sample(s, 'awscni_ip_max'), 27);
  assert.equal(sample(s, 'eni_ipam_cooling_ip_addresses'), 1);
  assert.equal(sample(s, 'eni_ipam_ip_addresses', { state: 'available' }), 2, 'cooling is not available');
  assert.equal(sample(s, 'eni_ipam_ip_addresses', { state: 'cooling' }), 1);
  assert.equal(sample(s, 'eni_ipam_waiting_adds'), 2);
  assert.equal(sample(s, 'eni_ipam_releases_frozen'), 0);
  assert.equal(sample(s, 'awscni_build_info', { version: '9.9.9', goversion: '', nodeversion: process.version }), 1);

  gate.freeze('cri', 'ListPodSandbox failed: deadline exceeded');
  t.now += 31_000;
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_releases_frozen'), 1);
  assert.equal(
    sample(s, 'eni_ipam_release_freeze_reason', { source: 'cri', reason: 'ListPodSandbox failed: deadline exceeded' }),
    1,
  );
  assert.equal(sample(s, 'eni_ipam_cooling_ip_addresses'), 0, 'the cooldown ended');
  gate.lift('cri');
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_releases_frozen'), 0);
  assert.equal(s.filter((x) => x.name === 'eni_ipam_release_freeze_reason').length, 0, 'lifted reasons disappear');
});

test('EC2 and RPC hooks feed the awscni_* counters with their real label names', async () => {
  const m = createMetrics();
  m.ec2.observe('AssignPrivateIpAddresses', 'ok', 12, { attempt: 1, httpStatus: 200 });
  m.ec2.observe('AssignPrivateIpAddresses', 'RequestLimitExceeded', 3, {
    attempt: 1,
    httpStatus: 503,
    kind: 'throttle',
  });
  m.ec2.onRetry('AssignPrivateIpAddresses', 'RequestLimitExceeded', 1, 500);
  m.ec2.onWait('AssignPrivateIpAddresses', 500);
  m.ec2.observe('AssignPrivateIpAddresses', 'ok', 10, { attempt: 2, httpStatus: 200 });
  m.observeRpc('add', 'ok', 1.2);
  m.observeRpc('add', 'RESOURCE_EXHAUSTED', 10_000);
  m.addFailed('subnet_full', true);
  m.observeRpc('del', 'ok', 0.8);
  m.delRequested('cni-del');
  m.delRequested('something a client made up');
  m.observeRpc('status', 'ok', 0.1);
  m.reconciled({
    ok: true,
    adoptedEnis: [],
    removedEnis: ['eni-9'],
    addedIps: [],
    removedIps: ['10.0.0.7', '10.0.0.8'],
    heldMissing: ['10.0.0.9'],
    imdsOnly: [],
    imdsMissing: ['10.0.0.5'],
  });
  m.reconciled({
    ok: false,
    adoptedEnis: [],
    addedIps: [],
    removedIps: [],
    heldMissing: [],
    imdsOnly: [],
    imdsMissing: [],
  });
  m.ipamdError('pool_step');
  const s = parsePrometheusText(await m.text());
  const fn = { fn: 'AssignPrivateIpAddresses' };
  assert.equal(sample(s, 'awscni_ec2api_req_count', fn), 3);
  assert.equal(sample(s, 'awscni_ec2api_error_count', fn), 1);
  assert.equal(
    sample(s, 'awscni_aws_api_error_count', { api: 'AssignPrivateIpAddresses', error: 'RequestLimitExceeded' }),
    1,
  );
  assert.equal(
    sample(s, 'awscni_aws_api_latency_ms_count', { api: 'AssignPrivateIpAddresses', error: 'false', status: '200' }),
    2,
  );
  assert.equal(
    sample(s, 'awscni_aws_api_latency_ms_sum', { api: 'AssignPrivateIpAddresses', error: 'false', status: '200' }),
    22,
  );
  assert.equal(
    sample(s, 'awscni_aws_api_latency_ms_count', { api: 'AssignPrivateIpAddresses', error: 'true', status: '503' }),
    1,
  );
  assert.equal(
    sample(s, 'eni_ipam_ec2_requests_total', { action: 'AssignPrivateIpAddresses', outcome: 'RequestLimitExceeded' }),
    1,
  );
  assert.equal(sample(s, 'eni_ipam_ec2_requests_total', { action: 'AssignPrivateIpAddresses', outcome: 'ok' }), 2);
  assert.equal(sample(s, 'eni_ipam_ec2_throttled_total', { action: 'AssignPrivateIpAddresses' }), 1);
  assert.equal(
    sample(s, 'eni_ipam_ec2_retries_total', { action: 'AssignPrivateIpAddresses', code: 'RequestLimitExceeded' }),
    1,
  );
  assert.equal(sample(s, 'eni_ipam_ec2_budget_wait_seconds_total', { action: 'AssignPrivateIpAddresses' }), 0.5);
  assert.equal(sample(s, 'eni_ipam_ec2_request_duration_seconds_count', { action: 'AssignPrivateIpAddresses' }), 3);
  assert.equal(sample(s, 'awscni_add_ip_req_count'), 2);
  assert.equal(sample(s, 'awscni_del_ip_req_count', { reason: 'cni-del' }), 1);
  assert.equal(sample(s, 'awscni_del_ip_req_count', { reason: 'other' }), 1, 'unknown reasons do not make new series');
  assert.equal(sample(s, 'eni_ipam_add_failures_total', { reason: 'subnet_full' }), 1);
  assert.equal(
    sample(s, 'eni_ipam_add_failures_total', { reason: 'eni_limit' }),
    0,
    'every reason is exported from the start',
  );
  assert.equal(sample(s, 'awscni_no_available_ip_addresses'), 1);
  assert.equal(sample(s, 'eni_ipam_add_latency_seconds_count', { outcome: 'ok' }), 1);
  assert.equal(sample(s, 'eni_ipam_add_latency_seconds_bucket', { outcome: 'ok', le: '0.0025' }), 1);
  assert.equal(sample(s, 'eni_ipam_add_latency_seconds_bucket', { outcome: 'ok', le: '0.001' }), 0);
  assert.equal(sample(s, 'eni_ipam_del_latency_seconds_count', { outcome: 'ok' }), 1);
  assert.equal(sample(s, 'eni_ipam_rpc_requests_total', { verb: 'status', outcome: 'ok' }), 1);
  assert.equal(sample(s, 'awscni_reconcile_count', { fn: 'eniIPPoolReconcileDel' }), 2);
  assert.equal(sample(s, 'awscni_reconcile_count', { fn: 'eniReconcileDel' }), 1);
  assert.equal(sample(s, 'awscni_force_removed_enis'), 1);
  assert.equal(sample(s, 'eni_ipam_ec2_missing_held_ips'), 1);
  assert.equal(sample(s, 'eni_ipam_imds_ec2_drift_addresses', { kind: 'imds_missing' }), 1);
  assert.equal(sample(s, 'eni_ipam_reconcile_passes_total', { result: 'failed' }), 1);
  assert.equal(sample(s, 'awscni_ipamd_error_count', { fn: 'reconcile' }), 1);
  assert.equal(sample(s, 'awscni_ipamd_error_count', { fn: 'pool_step' }), 1);
  assert.equal(sample(s, 'awscni_force_removed_ips'), 2);
  // Without sources, gauges read 0 rather than failing the scrape.
  assert.equal(sample(s, 'awscni_total_ip_addresses'), 0);
});

test('metrics endpoint: GET /metrics over real HTTP on loopback, 404 elsewhere', async (t) => {
  const { ds } = node();
  const m = createMetrics({ ds, gate: new ReleaseGate() });
  const srv = await startMetricsServer('127.0.0.1:0', m);
  t.after(() => srv.close());
  const r = await fetch(`http://127.0.0.1:${srv.port}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  assert.equal(sample(parsePrometheusText(await r.text()), 'awscni_total_ip_addresses'), 4);
  assert.equal((await fetch(`http://127.0.0.1:${srv.port}/other`)).status, 404);
  assert.equal((await fetch(`http://127.0.0.1:${srv.port}/metrics`, { method: 'POST' })).status, 404);
});

test('config: EC2 budget variables, defaults and validation', () => {
  const c = loadConfig({});
  assert.equal(c.ec2RatePerSecond, 5);
  assert.equal(c.ec2Burst, 20);
  assert.equal(c.ec2TimeoutMs, 10_000);
  assert.equal(c.ec2MaxAttempts, 5);
  const d = loadConfig({
    ENI_IPAM_EC2_RATE: '0.5',
    ENI_IPAM_EC2_BURST: '1',
    ENI_IPAM_EC2_TIMEOUT: '1500ms',
    ENI_IPAM_EC2_MAX_ATTEMPTS: '1',
  });
  assert.deepEqual([d.ec2RatePerSecond, d.ec2Burst, d.ec2TimeoutMs, d.ec2MaxAttempts], [0.5, 1, 1500, 1]);
  for (const [name, value] of [
    ['ENI_IPAM_EC2_RATE', '0'],
    ['ENI_IPAM_EC2_RATE', '-1'],
    ['ENI_IPAM_EC2_RATE', 'fast'],
    ['ENI_IPAM_EC2_RATE', '1e3'],
    ['ENI_IPAM_EC2_BURST', '0'],
    ['ENI_IPAM_EC2_BURST', '2.5'],
    ['ENI_IPAM_EC2_TIMEOUT', '0'],
    ['ENI_IPAM_EC2_MAX_ATTEMPTS', '0'],
    ['ENI_IPAM_EC2_MAX_ATTEMPTS', '21'],
  ] as const) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      (e: Error) => e.message.startsWith(`${name}=`),
      `${name}=${value}`,
    );
  }
});

test('eni_ipam_node_sysctl_ok: 1 per right node sysctl, 0 per wrong one, sampled at scrape time', async () => {
  const { ds } = node();
  let checks = [
    { sysctl: 'net.ipv4.ip_forward', ok: false },
    { sysctl: 'net.ipv4.conf.eth0.rp_filter', ok: true },
  ];
  const m = createMetrics({ ds, gate: new ReleaseGate(), sysctls: () => checks });
  let s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_node_sysctl_ok', { sysctl: 'net.ipv4.ip_forward' }), 0);
  assert.equal(sample(s, 'eni_ipam_node_sysctl_ok', { sysctl: 'net.ipv4.conf.eth0.rp_filter' }), 1);
  checks = [{ sysctl: 'net.ipv4.ip_forward', ok: true }];
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_node_sysctl_ok', { sysctl: 'net.ipv4.ip_forward' }), 1);
  assert.equal(
    sample(s, 'eni_ipam_node_sysctl_ok', { sysctl: 'net.ipv4.conf.eth0.rp_filter' }),
    undefined,
    'a setting no longer checked is gone',
  );
});

test('per-subnet gauges: free addresses from the last describe, exhausted 1 while marked, 0 after', async () => {
  const m = createMetrics({ processMetrics: false });
  m.subnetFree('subnet-a', 57);
  m.subnetExhausted('subnet-a', true);
  let s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_subnet_free_addresses', { subnet: 'subnet-a' }), 57);
  assert.equal(sample(s, 'eni_ipam_subnet_exhausted', { subnet: 'subnet-a' }), 1);
  m.subnetExhausted('subnet-a', false);
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_subnet_exhausted', { subnet: 'subnet-a' }), 0);
});

test('awscni_connmark_backend and awscni_connmark_reconcile_total: read from the host networking at scrape time', async () => {
  const { ds } = node();
  let c: { success: number; error: number } | undefined;
  const m = createMetrics({ ds, gate: new ReleaseGate(), connmark: () => c });
  let s = parsePrometheusText(await m.text());
  assert.equal(
    sample(s, 'awscni_connmark_backend', { backend: 'iptables' }),
    undefined,
    'absent without host networking',
  );
  c = { success: 2, error: 1 };
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'awscni_connmark_backend', { backend: 'iptables' }), 1);
  assert.equal(sample(s, 'awscni_connmark_reconcile_total', { result: 'success' }), 2);
  assert.equal(sample(s, 'awscni_connmark_reconcile_total', { result: 'error' }), 1);
});
