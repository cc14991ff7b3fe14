/**
 * The CLI on a bad day: ipamd is down (stopped after serving pods), and `status`, `pods`,
 * `enis` and `audit` answer from the checkpoint ipamd left, the kernel (pods wired by the
 * real plugin in real network namespaces) and the simulated cloud's EC2 and IMDS over HTTP,
 * each saying which sources it read. pods filters by NAMESPACE/NAME and sorts naturally;
 * -o yaml parses to the same document as -o json.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import yaml from 'yaml';
import { startCniNode } from '../helpers/cni-node.js';
import { runCli } from '../helpers/cli-run.js';

test('status, pods, enis and audit work with ipamd down, naming the sources read', { timeout: 120_000 }, async (t) => {
  const n = await startCniNode(t, 'clioff', { ipamdEnv: { CRI_RUNTIME_ENDPOINT: 'unix:///nonexistent/cri.sock' } });
  const ips: Record<string, string> = {};
  for (const [ns, name, id] of [
    ['shop', 'web-10', 'a'],
    ['shop', 'web-2', 'b'],
    ['shop', 'web-1', 'c'],
    ['ops', 'web-3', 'd'],
  ] as const) {
    const pod = await n.pod();
    const add = await n.call({
      command: 'ADD',
      containerId: id.repeat(64),
      netns: pod.path,
      ifName: 'eth0',
      args: {
        K8S_POD_NAME: name,
        K8S_POD_NAMESPACE: ns,
        K8S_POD_INFRA_CONTAINER_ID: id.repeat(64),
        IgnoreUnknown: '1',
      },
    });
    assert.equal(add.code, 0, `ADD ${ns}/${name}: ${add.stdout} ${add.stderr}`);
    ips[`${ns}/${name}`] = String(add.json.ips[0].address).split('/')[0]!;
  }
  await n.d.stop(5000);
  n.h.ipamd = undefined;

  const base = [
    '--introspection',
    `127.0.0.1:${n.d.introspectionPort}`,
    '--socket',
    n.h.socket,
    '--checkpoint',
    n.h.checkpoint,
    '--cri-endpoint',
    'unix:///nonexistent/cri.sock',
    '--netns',
    n.node.path,
  ];
  const env = { AWS_EC2_ENDPOINT: n.h.sim.ec2Endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT: n.h.sim.imdsEndpoint };
  const sourcesRead = new RegExp(
    `^sources read: ${n.h.checkpoint.replace(/[.]/g, '\\.')} \\(4 allocations\\); the kernel \\(netns .*\\) \\(4 pod routes\\); IMDS .* \\(${n.h.instanceId} m5\\.large\\); EC2 .* \\(\\d+ ENIs\\)$`,
    'm',
  );

  // pods: from the checkpoint, naturally sorted, filtered, each address wired per the kernel.
  const pods = await runCli(['pods', 'shop/', ...base], env);
  assert.equal(pods.code, 3, pods.stderr);
  assert.match(pods.stdout, sourcesRead);
  assert.match(pods.stdout, /^not read: ipamd \(connection refused at http:\/\/127\.0\.0\.1:\d+\)$/m);
  assert.match(
    pods.stderr,
    /^eni-ipam: cannot reach ipamd introspection \(connection refused .*\): answered from the checkpoint, the kernel, IMDS, EC2 instead/,
  );
  const rows = pods.stdout.split('\n').filter((l) => /^shop\s/.test(l));
  assert.deepEqual(
    rows.map((l) => l.split(/\s+/).slice(0, 3)),
    [
      ['shop', 'web-1', ips['shop/web-1']],
      ['shop', 'web-2', ips['shop/web-2']],
      ['shop', 'web-10', ips['shop/web-10']],
    ],
  );
  for (const l of rows) assert.match(l, /\s0\s+main\s.*\syes$/, `device 0, main table, wired: ${l}`);
  const one = JSON.parse((await runCli(['pods', 'web-3', '-o', 'json', ...base], env)).stdout) as Array<{
    namespace: string;
    pod: string;
    deviceNumber: number;
  }>;
  assert.deepEqual(
    one.map((r) => [r.namespace, r.pod, r.deviceNumber]),
    [['ops', 'web-3', 0]],
  );
  const y = await runCli(['pods', 'shop/web-*', '-o', 'yaml', ...base], env);
  const j = await runCli(['pods', 'shop/web-*', '-o', 'json', ...base], env);
  assert.deepEqual(yaml.parse(y.stdout), JSON.parse(j.stdout));
  assert.equal((JSON.parse(j.stdout) as unknown[]).length, 3);

  // status: counts from the checkpoint, wiring from the kernel, ENIs from EC2.
  const st = await runCli(['status', ...base], env);
  assert.equal(st.code, 3, st.stderr);
  assert.match(st.stdout, /^ipamd UNREACHABLE \(connection refused/);
  assert.match(st.stdout, new RegExp(`^node ${n.h.instanceId} \\(m5\\.large\\)$`, 'm'));
  assert.match(st.stdout, /^checkpoint: 4 allocations, 0 cooling$/m);
  assert.match(st.stdout, /^kernel: 4 pod routes, 0 rule-only IPs; 4 of the checkpoint's 4 allocations wired$/m);
  assert.match(st.stdout, sourcesRead);
  assert.match(st.stdout, /^eni-\w+\s+0\s+main\s+\d+\s+0\s+4\s+4$/m);
  const sty = yaml.parse((await runCli(['status', '-o', 'yaml', ...base], env)).stdout) as {
    health: string;
    allocations: number;
  };
  assert.deepEqual([sty.health, sty.allocations], ['UNREACHABLE', 4]);

  // enis -o wide: one row per address EC2 has, the checkpoint's pods beside theirs.
  const wide = await runCli(['enis', '-o', 'wide', ...base], env);
  assert.equal(wide.code, 3, wide.stderr);
  for (const [who, ip] of Object.entries(ips))
    assert.match(wide.stdout, new RegExp(`\\s${ip.replace(/\./g, '\\.')}\\s+assigned\\s+${who}$`, 'm'));
  assert.ok(wide.stdout.split('\n').filter((l) => /\sfree\s/.test(l)).length >= 1, wide.stdout);

  // audit: the checkpoint is the reference; every source agrees with it, the CRI cannot be read.
  const audit = await runCli(['audit', ...base], env);
  assert.equal(audit.code, 5, `${audit.stdout}${audit.stderr}`);
  assert.match(
    audit.stdout,
    /^ipamd\s+unreadable\s+ipamd introspection http:\/\/127\.0\.0\.1:\d+\s+.*the checkpoint's 4 allocations stand in for it$/m,
  );
  assert.match(audit.stdout, /^checkpoint\s+skipped\s/m);
  assert.match(audit.stdout, /^kernel\s+ok\s+.*4 wired pod IPs/m);
  assert.match(audit.stdout, /^ec2\s+ok\s+.*1 ENIs described/m);
  assert.match(audit.stdout, /no mismatch among the sources read, but the audit is incomplete/);
});
