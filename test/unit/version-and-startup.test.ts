/**
 * Version and effective configuration, on the real processes: `eni-ipamd version`, the
 * CLI's `eni-ipam version` against a real metrics endpoint, the start-up log line with
 * the version, the Node version and every setting with its source, the warning for an
 * ignored aws-node variable, and a refused one ending ipamd with one line.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createMetrics } from '../../ipamd/observability/metrics.js';
import { packageVersion } from '../../ipamd/version.js';
import { runCli } from '../helpers/cli-run.js';
import { startSim } from '../helpers/sim-fixture.js';
import { waitFor } from '../../kit/wait.js';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';

const run = promisify(execFile);

test('eni-ipamd version prints the version and the Node.js version', async () => {
  const { stdout } = await run(process.execPath, [IPAMD_PATH, 'version']);
  assert.equal(stdout, `eni-ipamd ${packageVersion()} (Node.js ${process.version})\n`);
  assert.match(packageVersion(), /^\d+\.\d+\.\d+/);
});

test("eni-ipam version prints the CLI's and the running ipamd's, read from its metrics", async (t) => {
  const m = createMetrics({ version: '7.7.7', processMetrics: false });
  const srv = createServer((_req, res) => void m.text().then((b) => res.end(b)));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => srv.close());
  const port = (srv.address() as AddressInfo).port;
  const r = await runCli(['version', '--metrics', `127.0.0.1:${port}`]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    `eni-ipam ${packageVersion()} (Node.js ${process.version})\neni-ipamd 7.7.7 (Node.js ${process.version})\n`,
  );
  const j = JSON.parse((await runCli(['version', '-o', 'json', '--metrics', `127.0.0.1:${port}`])).stdout);
  assert.deepEqual(j.ipamd, { version: '7.7.7', node: process.version });
  srv.close();
  const down = await runCli(['version', '--metrics', `127.0.0.1:${port}`, '--timeout', '2000']);
  assert.equal(down.code, 3, 'ipamd unreachable');
  assert.match(down.stdout, /^eni-ipam \d/, "the CLI's own line still printed");
  assert.match(down.stderr, /^eni-ipam: cannot reach ipamd metrics/);
});

test('ipamd refuses ENABLE_IPv6=true without prefix delegation at start with one line naming it', async () => {
  const r = await run(process.execPath, [IPAMD_PATH], {
    env: { PATH: process.env.PATH, ENABLE_IPv6: 'true' },
    timeout: 10_000,
  }).catch((e: { code: number; stderr: string }) => e);
  assert.equal(r && 'code' in r ? r.code : 0, 1);
  assert.match(
    r.stderr,
    /^eni-ipamd: ENABLE_PREFIX_DELEGATION=false is refused: ENABLE_IPv6=true with ENABLE_IPv4=true \(dual mode\)[^\n]*needs ENABLE_PREFIX_DELEGATION=true\n$/,
  );
});

test('ipamd logs its version, Node version and every setting with its source once, then each ignored one', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-start-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // IMDS answers (ipamd reads which instance it is before its node guard and its log), EC2 does not.
  const { sim } = await startSim(t);
  const p = spawn(process.execPath, [IPAMD_PATH], {
    env: {
      PATH: process.env.PATH,
      AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
      // Nothing answers there: ipamd logs, then waits for EC2 until stopped.
      AWS_EC2_ENDPOINT: `http://127.0.0.1:${40000 + (process.pid % 20000)}`,
      AWS_ACCESS_KEY_ID: 'AKIDSIMULATED',
      AWS_SECRET_ACCESS_KEY: 'simulated-secret',
      ENI_IPAM_SOCKET: path.join(dir, 'ipamd.sock'),
      ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json'),
      ENI_IPAM_AWS_NODE_CHECKPOINT_PATH: path.join(dir, 'aws-node.json'),
      ENI_IPAM_INSTALL_CNI: 'false',
      ENI_IPAM_HOST_NETWORK: 'false',
      DISABLE_METRICS: 'true',
      DISABLE_INTROSPECTION: 'true',
      WARM_ENI_TARGET: '2',
      AWS_VPC_ENI_MTU: '1500',
      // aws-node's own default of it (the chart's too) is silent; another value is ignored with a warning.
      VPC_CNI_VERSION: 'v1.23.1',
      DISABLE_TCP_EARLY_DEMUX: 'true',
      ENI_IPAM_CHART_ENV: 'WARM_ENI_TARGET,VPC_CNI_VERSION',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => p.kill('SIGKILL'));
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any -- log lines
  const start = await waitFor('the start-up line', () => lines().find((l) => /starting$/.test(String(l.msg))), 20_000);
  assert.equal(start.version, packageVersion());
  assert.equal(start.node, process.version);
  assert.deepEqual(start.settings.WARM_ENI_TARGET, { key: 'warmEniTarget', value: 2, from: 'chart' });
  assert.deepEqual(start.settings.AWS_VPC_ENI_MTU, { key: 'eniMtu', value: 1500, from: 'env' });
  assert.deepEqual(start.settings.IP_COOLDOWN_PERIOD, { key: 'ipCooldownMs', value: 30_000, from: 'default' });
  const warn = await waitFor('the warning', () => lines().find((l) => l.setting === 'DISABLE_TCP_EARLY_DEMUX'), 5_000);
  assert.match(String(warn.msg), /^DISABLE_TCP_EARLY_DEMUX="true" is ignored: /);
  assert.equal(lines().filter((l) => l.setting === 'VPC_CNI_VERSION').length, 0, "aws-node's default does not warn");
  assert.equal(lines().filter((l) => /starting$/.test(String(l.msg))).length, 1, 'once');
  p.kill('SIGTERM');
});
