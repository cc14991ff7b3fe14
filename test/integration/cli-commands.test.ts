/**
 * The operator CLI against a real ipamd on the simulated cloud: status, pods, enis, plan
 * and support-bundle answer from it (tables and `--output json`); and bad input — a wrong
 * socket path, a user without the node's permissions, an unknown flag, a stopped ipamd —
 * gives ONE clear line on stderr and a non-zero exit code, never a stack trace.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { createNode } from '../../kit/node-harness.js';
import { runCli, type CliRun } from '../helpers/cli-run.js';
import { waitFor } from '../../kit/wait.js';

/** One line on stderr, naming `what`, no stack frame. */
function oneLine(r: CliRun, what: RegExp): void {
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `expected one line on stderr, got:\n${r.stderr}`);
  assert.match(lines[0]!, /^eni-ipam: /);
  assert.match(lines[0]!, what);
  assert.doesNotMatch(r.stderr, /\n\s+at |Error: .*\n/);
}

test(
  'status, pods, enis, plan and support-bundle read a running ipamd; bad input is one line and a non-zero exit',
  { timeout: 120_000 },
  async (t) => {
    const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '3', AWS_SECRET_ACCESS_KEY: 'must-not-leak' } });
    t.after(() => h.close());
    const ipamdLog = path.join(h.dir, 'ipamd-file.log');
    const d = await h.startIpamd({ AWS_VPC_K8S_CNI_LOG_FILE: ipamdLog });
    const base = [
      '--introspection',
      `127.0.0.1:${d.introspectionPort}`,
      '--socket',
      h.socket,
      '--checkpoint',
      h.checkpoint,
      '--cri-endpoint',
      'unix:///nonexistent/cri.sock',
    ];
    await waitFor('the warm pool', async () => ((await d.status()).counts.available >= 3 ? true : undefined));
    const client = ipamdClient(h.socket);
    t.after(() => client.close());
    const reply = await client.add('f'.repeat(64), { k8s_pod_name: 'web-1', k8s_pod_namespace: 'shop' });
    const add = { ipv4: reply.ipv4_addr };

    const st = await runCli(['status', ...base]);
    assert.equal(st.code, 0, st.stderr);
    assert.match(st.stdout, new RegExp(`node ${h.instanceId} \\(m5\\.large\\), ipamd SERVING`));
    assert.match(st.stdout, /pool \(warm-ip\): total \d+, assigned 1, available \d+/);
    assert.match(st.stdout, /releases: FROZEN: .*cri/i);
    const stj = JSON.parse((await runCli(['status', '-o', 'json', ...base])).stdout) as {
      health: string;
      counts: { assigned: number };
      limits: { ipv4PerEni: number };
    };
    assert.equal(stj.health, 'SERVING');
    assert.equal(stj.counts.assigned, 1);
    assert.equal(stj.limits.ipv4PerEni, 10);

    const pods = await runCli(['pods', '-o', 'json', ...base]);
    assert.equal(pods.code, 0, pods.stderr);
    const rows = JSON.parse(pods.stdout) as Array<{
      namespace: string;
      pod: string;
      ip: string;
      deviceNumber: number;
      routeTable: string;
    }>;
    assert.deepEqual(
      rows.map((r) => [r.namespace, r.pod, r.ip, r.deviceNumber, r.routeTable]),
      [['shop', 'web-1', add.ipv4, 0, 'main']],
    );
    const podsTable = await runCli(['pods', ...base]);
    assert.match(
      podsTable.stdout,
      new RegExp(`shop\\s+web-1\\s+${add.ipv4.replace(/\./g, '\\.')}\\s+eni-\\w+\\s+0\\s+main`),
    );
    const enis = await runCli(['enis', ...base]);
    assert.match(enis.stdout, new RegExp(`shop/web-1 ${add.ipv4.replace(/\./g, '\\.')}`));

    const plan = await runCli(['plan', ...base]);
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(plan.stdout, /binding: WARM_IP_TARGET=3/);
    assert.match(plan.stdout, /limit: 1 of 3 ENIs \(instance type m5\.large allows 3\), 9 secondary IPs per ENI/);

    const bundle = path.join(h.dir, 'bundle.tar.gz');
    const sb = await runCli(['support-bundle', '--out', bundle, '--log', path.join(h.dir, 'ipamd.log'), ...base]);
    assert.equal(sb.code, 0, sb.stderr);
    const list = (await promisify(execFile)('tar', ['-tzf', bundle])).stdout;
    for (const f of [
      'MANIFEST.json',
      'introspection/status.json',
      'introspection/allocations.json',
      'state/ipam.json',
      'state/ipam.json.journal',
      'state/ipam.json.journal.b',
      'kernel/ip-rule.txt',
      'kernel/ip-route-all.txt',
      'kernel/iptables-save.txt',
      'introspection/ipamd-env-settings.json',
      'introspection/networkutils-env-settings.json',
      'cli-env.txt',
      'logs/0-ipamd.log',
    ]) {
      assert.match(list, new RegExp(`/${f.replace(/\./g, '\\.')}\\n`), `${f} missing from the bundle:\n${list}`);
    }
    const env = (await promisify(execFile)('tar', ['-xzOf', bundle, '--wildcards', '*/cli-env.txt'])).stdout;
    assert.doesNotMatch(env, /must-not-leak/);
    // ipamd's settings come from ipamd, not from the shell the CLI runs in.
    const settings = JSON.parse(
      (await promisify(execFile)('tar', ['-xzOf', bundle, '--wildcards', '*/introspection/ipamd-env-settings.json']))
        .stdout,
    ) as Record<string, unknown>;
    assert.equal(settings.WARM_IP_TARGET, 3);
    assert.equal(settings.AWS_VPC_K8S_CNI_LOG_FILE, ipamdLog);
    // Without --log, the logs are the files ipamd's settings name.
    const bundle2 = path.join(h.dir, 'bundle2.tar.gz');
    const sb2 = await runCli(['support-bundle', '--out', bundle2, ...base], {
      AWS_VPC_K8S_CNI_LOG_FILE: '/elsewhere.log',
    });
    assert.equal(sb2.code, 0, sb2.stderr);
    const list2 = (await promisify(execFile)('tar', ['-tzf', bundle2])).stdout;
    assert.match(list2, /\/logs\/0-ipamd-file\.log\n/, list2);
    const manifest = JSON.parse(
      (await promisify(execFile)('tar', ['-xzOf', bundle2, '--wildcards', '*/MANIFEST.json'])).stdout,
    ) as { logsFrom: string };
    assert.match(manifest.logsFrom, /^ipamd's settings/);
    await rm(bundle2, { force: true });

    // Bad input.
    const wrongSocket = await runCli(['status', ...base, '--socket', path.join(h.dir, 'nope.sock')]);
    assert.equal(wrongSocket.code, 3);
    oneLine(wrongSocket, /socket .*nope\.sock does not exist/);
    const nobody = await runCli(['status', ...base], {}, [
      'setpriv',
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
    ]);
    assert.equal(nobody.code, 4, nobody.stderr);
    oneLine(nobody, /permission denied .*run eni-ipam as root/);
    const flag = await runCli(['status', '--bogus-flag', ...base]);
    assert.equal(flag.code, 2);
    oneLine(flag, /bogus-flag/);
    const cmd = await runCli(['stauts', ...base]);
    assert.notEqual(cmd.code, 0);
    assert.match(cmd.stderr, /stauts/);

    await d.stop(5000);
    h.ipamd = undefined;
    // plan needs ipamd; status and pods answer from the other sources (test/integration/cli-offline.test.ts) and still exit 3.
    const plan2 = await runCli(['plan', ...base]);
    assert.equal(plan2.code, 3, `plan against a stopped ipamd: ${plan2.stdout}${plan2.stderr}`);
    oneLine(plan2, /cannot reach ipamd introspection at http:\/\/127\.0\.0\.1:\d+ \(connection refused\)/);
    for (const c of ['status', 'pods']) {
      const r = await runCli([c, ...base]);
      assert.equal(r.code, 3, `${c} against a stopped ipamd: ${r.stdout}${r.stderr}`);
      oneLine(
        r,
        /cannot reach ipamd introspection \(connection refused at http:\/\/127\.0\.0\.1:\d+\): answered from /,
      );
      assert.match(r.stdout, /^sources read: /m);
    }
    await rm(bundle, { force: true });
  },
);
