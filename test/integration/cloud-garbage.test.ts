/**
 * IMDS and EC2 answers that fail to parse (issue 28 item 6;
 * docs/design.md#bounds-on-bad-input): the real ipamd against the simulated cloud over real
 * HTTP, with the simulator's garbage knobs (sim/garbage.ts) turned on while ipamd runs.
 * Each refused answer is logged at warn naming the field and counted
 * (`eni_ipam_imds_parse_errors_total{field}`, `eni_ipam_ec2_parse_errors_total{action,field}`), and
 * never replaces the last good view: ipamd's addresses stay what EC2 holds, ADDs keep
 * getting real addresses, nothing is released or marked unverified.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isIPv4 } from 'node:net';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { parsePrometheusText, sample } from '../helpers/prom-text.js';

async function metric(port: number, name: string, labels: Record<string, string>): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  return sample(parsePrometheusText(await r.text()), name, labels) ?? 0;
}

/** ipamd's warn lines saying an answer did not parse, with their fields. */
async function parseWarnings(h: NodeHarness): Promise<Array<{ source: string; field: string }>> {
  const text = await readFile(path.join(h.dir, 'ipamd.log'), 'utf8').catch(() => '');
  const out = [];
  for (const line of text.split('\n')) {
    try {
      const o = JSON.parse(line) as { level?: string; msg?: string; source?: string; field?: string };
      if (o.level === 'warn' && /did not parse/.test(o.msg ?? '')) out.push({ source: o.source!, field: o.field! });
    } catch {
      /* not JSON */
    }
  }
  return out;
}

/** ipamd's addresses by ENI (introspection), sorted, for comparing views. */
async function view(h: NodeHarness): Promise<string> {
  const s = await h.ipamd!.status();
  return JSON.stringify({ total: s.counts.total, unverified: s.counts.unverified ?? 0, enis: s.enis?.length });
}

test('garbage from IMDS and EC2 is refused, warned with the field, counted, and never replaces the last good view', async (t) => {
  const h = await createNode({
    ipamdEnv: {
      WARM_IP_TARGET: '4',
      DISABLE_METRICS: 'false',
      METRICS_BIND_ADDRESS: '127.0.0.1:0',
      ENI_IPAM_RECONCILE_INTERVAL: '300ms',
    },
  });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const port = d.metricsPort!;
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await waitFor('a warm pool', async () => (await d.status()).counts.available >= 4);
  const before = await view(h);
  const sim = h.sim.faults.garbage;

  // IMDS answers an HTML error page for every ENI's address list.
  sim.setImds('local-ipv4s', '<html><body>503 Service Unavailable</body></html>');
  await waitFor('an IMDS parse error counted', async () =>
    (await metric(port, 'eni_ipam_imds_parse_errors_total', { field: 'local-ipv4s' })) >= 2 ? true : undefined,
  );
  await waitFor('a warn line naming the IMDS field', async () =>
    (await parseWarnings(h)).some((w) => w.source === 'imds' && w.field === 'local-ipv4s'),
  );
  assert.equal(await view(h), before, 'the last good view is kept');
  const a = await c.add('garbage-imds');
  assert.equal(a.success, true);
  assert.ok(isIPv4(a.ipv4_addr));
  sim.setImds('local-ipv4s', null);

  // EC2 answers DescribeNetworkInterfaces with addresses that are not addresses.
  sim.setEc2('DescribeNetworkInterfaces', 1_000);
  await waitFor('an EC2 parse error counted', async () =>
    (await metric(port, 'eni_ipam_ec2_parse_errors_total', {
      action: 'DescribeNetworkInterfaces',
      field: 'PrivateIpAddress',
    })) >= 2
      ? true
      : undefined,
  );
  await waitFor('a warn line naming the EC2 field', async () =>
    (await parseWarnings(h)).some((w) => w.source === 'ec2' && w.field === 'PrivateIpAddress'),
  );
  const b = await c.add('garbage-ec2');
  assert.equal(b.success, true);
  assert.ok(isIPv4(b.ipv4_addr));
  const now = await h.ipamd!.status();
  assert.equal(now.counts.unverified ?? 0, 0, 'nothing marked unverified');
  assert.ok(now.counts.total >= JSON.parse(before).total, 'no address dropped from the view');
  const held = new Set(h.sim.state.enis.size ? [...h.sim.state.enis.values()].flatMap((e) => e.secondaryIps) : []);
  for (const ip of [a.ipv4_addr, b.ipv4_addr]) assert.ok(held.has(ip), `${ip} is held in EC2`);
  sim.setEc2('DescribeNetworkInterfaces', null);
});
