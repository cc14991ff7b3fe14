/**
 * Metrics that mean what they say (docs/design.md#14-operability item 1), end to end: the real ipamd binary
 * on the simulated cloud (real SDK, real gRPC, real HTTP scrape). A small workload on a
 * /28 subnet — fill the pool, one ADD too many (the subnet is full), DELs, an address
 * EC2 loses out of band while IMDS still lists it — and then:
 * - `promtool check metrics` on the scrape: no error, and no lint finding outside the
 *   amazon-vpc-cni-k8s names kept on purpose (ALLOWED below);
 * - every new or changed metric moved where its concept happened: ADD failures by
 *   reason, the upstream counters, per-ENI/per-CIDR gauges, subnet free addresses (equal
 *   to what EC2 reports), reconcile counters, force-removed IPs, IMDS↔EC2 drift,
 *   start-up histograms, process metrics, EC2 latency histogram.
 * A second node at MAX_ENI=1 shows failures{reason="eni_limit"}.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { UnassignPrivateIpAddressesCommand } from '@aws-sdk/client-ec2';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient, type GrpcError, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { parsePrometheusText, sample, type PromSample } from '../helpers/prom-text.js';
import { promtoolCheckMetrics } from '../helpers/promtool.js';
import { ec2ClientFor } from '../helpers/sim-fixture.js';
import { createLifecycleNode, waitUnfrozen } from '../helpers/lifecycle-node.js';
import { rm } from 'node:fs/promises';

/**
 * promtool lint findings accepted on purpose: amazon-vpc-cni-k8s's names, kept so its
 * users' dashboards work (counters without `_total`, a latency in ms). Nothing else.
 */
const COUNTER_NAMES =
  /^(counter metrics should have "_total" suffix|non-histogram and non-summary metrics should not have "_count" suffix)$/;
const ALLOWED: Record<string, RegExp> = {
  awscni_add_ip_req_count: COUNTER_NAMES,
  awscni_del_ip_req_count: COUNTER_NAMES,
  awscni_no_available_ip_addresses: COUNTER_NAMES,
  awscni_ipamd_error_count: COUNTER_NAMES,
  awscni_reconcile_count: COUNTER_NAMES,
  awscni_force_removed_ips: COUNTER_NAMES,
  awscni_force_removed_enis: COUNTER_NAMES,
  awscni_ec2api_req_count: COUNTER_NAMES,
  awscni_ec2api_error_count: COUNTER_NAMES,
  awscni_aws_api_error_count: COUNTER_NAMES,
  awscni_aws_api_latency_ms: /^metric names should not contain abbreviated units$/,
};

const COMMON = {
  DISABLE_METRICS: 'false',
  METRICS_BIND_ADDRESS: '127.0.0.1:0',
  ENI_IPAM_INSTALL_CNI: 'false',
  ENI_IPAM_ADD_WAIT_TIMEOUT: '30s',
};

/** The metrics port ipamd logged in the "ipamd serving" line of its `start`-th start. */
async function metricsPort(h: NodeHarness, start = 1): Promise<number> {
  return waitFor(`metricsPort of start ${start} in the ipamd log`, async () => {
    const ports: number[] = [];
    for (const line of (await readFile(path.join(h.dir, 'ipamd.log'), 'utf8').catch(() => '')).split('\n')) {
      try {
        const o = JSON.parse(line) as { msg?: string; metricsPort?: number };
        if (o.msg === 'ipamd serving' && o.metricsPort) ports.push(o.metricsPort);
      } catch {
        /* not JSON */
      }
    }
    return ports[start - 1];
  });
}

async function scrapeText(port: number): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(r.status, 200);
  return r.text();
}
const scrape = async (port: number): Promise<PromSample[]> => parsePrometheusText(await scrapeText(port));

/** The next ADD fails with RESOURCE_EXHAUSTED. */
async function addFails(c: TestIpamdClient, id: string): Promise<void> {
  await assert.rejects(c.add(id), (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED);
}

async function started(t: { after(fn: () => Promise<void> | void): void }, p: Parameters<typeof createNode>[0]) {
  const h = await createNode({ ...p, ipamdEnv: { ...COMMON, ...p?.ipamdEnv } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  return { h, d, c, port: await metricsPort(h) };
}

test('a real scrape passes promtool, and each metric moves where its concept happens', async (t) => {
  // /28: 11 usable addresses; the instance takes 1, the primary ENI 9: no room for a second ENI.
  const { h, d, c, port } = await started(t, {
    subnetCidr: '10.0.0.0/28',
    ipamdEnv: { IP_COOLDOWN_PERIOD: '1', ENI_IPAM_RECONCILE_INTERVAL: '1s' },
  });
  const m0 = await scrape(port);
  assert.equal(
    sample(m0, 'awscni_ipamd_startup_duration_seconds_count', {
      success: 'true',
      with_api_server: 'false',
      failure_reason: '',
    }),
    1,
  );
  assert.equal(sample(m0, 'awscni_ipamd_node_initialization_duration_seconds_count', { success: 'true' }), 1);
  assert.ok((sample(m0, 'process_cpu_user_seconds_total') ?? -1) >= 0, 'process metrics');
  assert.ok(
    m0.some((s) => s.name === 'nodejs_eventloop_lag_seconds'),
    'Node.js runtime metrics',
  );
  for (const reason of ['no_ip', 'subnet_full', 'eni_limit', 'throttled', 'frozen', 'timeout']) {
    assert.equal(
      sample(m0, 'eni_ipam_add_failures_total', { reason }),
      0,
      `failures{reason="${reason}"} exported from the start`,
    );
  }

  await Promise.all(Array.from({ length: 9 }, (_, i) => c.add(`p${i}`)));
  await addFails(c, 'one-too-many');
  let m = await scrape(port);
  assert.equal(
    sample(m, 'eni_ipam_add_failures_total', { reason: 'subnet_full' }),
    1,
    'the ADD failed because the subnet is full',
  );
  assert.equal(sample(m, 'awscni_no_available_ip_addresses'), 1);
  assert.equal(sample(m, 'awscni_add_ip_req_count'), 10);
  assert.equal(sample(m, 'eni_ipam_add_latency_seconds_count', { outcome: 'ok' }), 9);
  assert.equal(sample(m, 'eni_ipam_add_latency_seconds_count', { outcome: 'RESOURCE_EXHAUSTED' }), 1);
  assert.ok(
    (sample(m, 'awscni_ipamd_error_count', { fn: 'grow_subnet_full' }) ?? 0) >= 1,
    'the failed grow is an ipamd error',
  );
  assert.ok(
    (sample(m, 'eni_ipam_ec2_request_duration_seconds_count', { action: 'AssignPrivateIpAddresses' }) ?? 0) >= 1,
  );
  const primary = (await d.status()).enis[0].eniId as string;
  assert.equal(sample(m, 'awscni_assigned_ip_per_eni', { eni: primary }), 9);
  assert.equal(sample(m, 'eni_ipam_eni_ip_addresses', { eni: primary, state: 'assigned' }), 9);
  assert.equal(sample(m, 'eni_ipam_eni_ip_addresses', { eni: primary, state: 'available' }), 0);
  const perCidr = m.filter((s) => s.name === 'awscni_assigned_ip_per_cidr');
  assert.equal(perCidr.length, 9, 'one /32 per secondary IP');
  assert.ok(perCidr.every((s) => s.labels.cidr!.endsWith('/32') && s.value === 1));
  assert.equal(sample(m, 'awscni_total_ipv4_prefixes'), 0);

  // DELs: counted by reason; the addresses cool, then become available.
  await c.del('p0', { reason: 'cni-del' });
  await c.del('p1', { reason: 'cni-del' });
  m = await scrape(port);
  assert.equal(sample(m, 'awscni_del_ip_req_count', { reason: 'cni-del' }), 2);
  assert.equal(sample(m, 'eni_ipam_del_latency_seconds_count', { outcome: 'ok' }), 2);
  assert.equal(sample(m, 'awscni_assigned_ip_per_eni', { eni: primary }), 7);
  await waitFor(
    'the released IPs out of cooldown',
    async () => sample(await scrape(port), 'eni_ipam_eni_ip_addresses', { eni: primary, state: 'available' }) === 2,
  );

  // EC2 loses an unheld address out of band while IMDS still lists it: the reconcile drops it and sees the drift.
  h.sim.faults.setImdsLag('unassign', 120_000);
  const eni = h.sim.state.enis.get(primary)!;
  const held = new Set(
    (
      (await (await fetch(`http://127.0.0.1:${d.introspectionPort}/v1/allocations`)).json()) as Array<{ ipv4: string }>
    ).map((a) => a.ipv4),
  );
  const lost = eni.secondaryIps.find((ip) => !held.has(ip))!;
  assert.ok(lost, 'an unheld secondary IP to lose');
  const ec2 = ec2ClientFor(h.sim);
  t.after(() => ec2.destroy());
  await ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: primary, PrivateIpAddresses: [lost] }));
  m = await waitFor('the reconcile removed the lost IP', async () => {
    const s = await scrape(port);
    return (sample(s, 'awscni_force_removed_ips') ?? 0) >= 1 ? s : undefined;
  });
  assert.ok((sample(m, 'awscni_reconcile_count', { fn: 'eniIPPoolReconcileDel' }) ?? 0) >= 1);
  assert.ok((sample(m, 'eni_ipam_reconcile_passes_total', { result: 'ok' }) ?? 0) >= 1);
  assert.ok(
    (sample(m, 'eni_ipam_imds_ec2_drift_addresses', { kind: 'imds_only' }) ?? 0) >= 1,
    'IMDS still lists the IP EC2 lost',
  );

  // Free addresses per subnet: what EC2 reports (DescribeSubnets after a reconcile pass).
  await waitFor("eni_ipam_subnet_free_addresses equal to the subnet's free count", async () => {
    const v = sample(await scrape(port), 'eni_ipam_subnet_free_addresses', { subnet: h.subnetId });
    return v !== undefined && v === h.sim.state.subnets.get(h.subnetId)!.addresses.freeCount();
  });

  // promtool on the final scrape.
  const r = promtoolCheckMetrics(await scrapeText(port));
  t.diagnostic(`promtool check metrics (exit ${r.status}):\n${r.output || '(no output)'}`);
  const unexpected = r.problems.filter((p) => !ALLOWED[p.metric]?.test(p.text));
  assert.deepEqual(unexpected, [], `promtool findings outside the allow-list:\n${r.output}`);
  assert.ok(r.status === 0 || r.status === 3, `promtool exit ${r.status} (1 = parse error):\n${r.output}`);
});

test('an ADD refused at the ENI limit counts failures{reason="eni_limit"} and error_count{fn="grow_eni_limit"}', async (t) => {
  const { c, port } = await started(t, { ipamdEnv: { MAX_ENI: '1' } });
  await Promise.all(Array.from({ length: 9 }, (_, i) => c.add(`q${i}`)));
  await addFails(c, 'one-too-many');
  const m = await scrape(port);
  assert.equal(sample(m, 'eni_ipam_add_failures_total', { reason: 'eni_limit' }), 1);
  assert.equal(sample(m, 'eni_ipam_add_failures_total', { reason: 'subnet_full' }), 0);
  // Upstream-style dashboards (cni-metrics-helper's ipamdErr sums every fn) see the grow that stopped at the limit.
  assert.equal(sample(m, 'awscni_ipamd_error_count', { fn: 'grow_eni_limit' }), 1);
});

test('ADDs failing while EC2 throttles every refill count failures{reason="throttled"}', async (t) => {
  const { h, d, c, port } = await started(t, {
    ipamdEnv: { WARM_IP_TARGET: '2', ENI_IPAM_ADD_WAIT_TIMEOUT: '2s', ENI_IPAM_EC2_MAX_ATTEMPTS: '1' },
  });
  await waitFor('a warm pool of 2', async () => (await d.status()).counts.available === 2);
  for (const action of ['AssignPrivateIpAddresses', 'CreateNetworkInterface'])
    h.sim.faults.injectError({ action, code: 'RequestLimitExceeded', count: 10_000 });
  const n = (await d.status()).counts.available as number;
  await Promise.all(Array.from({ length: n }, (_, i) => c.add(`r${i}`)));
  await addFails(c, 'throttled-out');
  const m = await scrape(port);
  assert.equal(sample(m, 'eni_ipam_add_failures_total', { reason: 'throttled' }), 1);
  assert.ok((sample(m, 'eni_ipam_ec2_throttled_total', { action: 'AssignPrivateIpAddresses' }) ?? 0) >= 1);
  assert.ok((sample(m, 'awscni_ipamd_error_count', { fn: 'grow_throttled' }) ?? 0) >= 1);
});

test('an ADD on a pool ipamd does not manage counts failures{reason="no_ip"}', async (t) => {
  const { h, d, c, port } = await started(t, {
    ipamdEnv: { DISABLE_NETWORK_RESOURCE_PROVISIONING: 'true', ENI_IPAM_ADD_WAIT_TIMEOUT: '1s' },
  });
  const n = (await d.status()).counts.available as number;
  await Promise.all(Array.from({ length: n }, (_, i) => c.add(`s${i}`)));
  await addFails(c, 'nothing-to-give');
  const m = await scrape(port);
  assert.equal(sample(m, 'eni_ipam_add_failures_total', { reason: 'no_ip' }), 1);
  // "Never assign, create or free": a waiting ADD must not start a grow either.
  assert.equal(h.sim.countCalls('AssignPrivateIpAddresses') + h.sim.countCalls('CreateNetworkInterface'), 0);
  assert.equal(sample(m, 'awscni_no_available_ip_addresses'), 1);
});

test('an ADD whose wait runs out while a slow refill is under way counts failures{reason="timeout"}', async (t) => {
  const { h, d, c, port } = await started(t, { ipamdEnv: { WARM_IP_TARGET: '1', ENI_IPAM_ADD_WAIT_TIMEOUT: '1s' } });
  await waitFor('a warm pool of 1', async () => (await d.status()).counts.available === 1);
  for (const action of ['AssignPrivateIpAddresses', 'CreateNetworkInterface']) h.sim.faults.setLatency(action, 4000);
  const n = (await d.status()).counts.available as number;
  await Promise.all(Array.from({ length: n }, (_, i) => c.add(`u${i}`)));
  await addFails(c, 'too-slow');
  const m = await scrape(port);
  assert.equal(sample(m, 'eni_ipam_add_failures_total', { reason: 'timeout' }), 1);
  assert.equal(
    sample(m, 'eni_ipam_add_latency_seconds_bucket', { outcome: 'RESOURCE_EXHAUSTED', le: '0.5' }),
    0,
    'it waited its 1 s',
  );
  assert.equal(sample(m, 'eni_ipam_add_latency_seconds_bucket', { outcome: 'RESOURCE_EXHAUSTED', le: '2.5' }), 1);
});

test('an ADD failing while the addresses are held unverified by a freeze counts failures{reason="frozen"}', async (t) => {
  const n = await createLifecycleNode({ env: { ...COMMON, MAX_ENI: '1', ENI_IPAM_ADD_WAIT_TIMEOUT: '2s' } });
  t.after(() => n.close());
  await n.start();
  await waitUnfrozen(n);
  await n.add('v0');
  await waitFor('the primary ENI full', async () => (await n.status()).counts.total === 9);
  // Restart without a checkpoint while the runtime cannot be read: every address is unverified and releases freeze.
  await n.h.ipamd!.stop();
  await rm(n.h.checkpoint, { force: true });
  await n.start({ CRI_RUNTIME_ENDPOINT: `unix://${path.join(n.h.dir, 'dead-cri.sock')}` });
  const s = await n.status();
  assert.equal(s.releasesFrozen, true);
  assert.ok(s.counts.unverified >= 8, JSON.stringify(s.counts));
  await assert.rejects(n.add('v1'), (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED);
  const m = await scrape(await metricsPort(n.h, 2));
  assert.equal(sample(m, 'eni_ipam_add_failures_total', { reason: 'frozen' }), 1);
  assert.equal(sample(m, 'eni_ipam_releases_frozen'), 1);
  assert.ok(
    m.some((x) => x.name === 'eni_ipam_release_freeze_reason' && x.labels.source === 'cri'),
    'the freeze names the runtime',
  );
});
