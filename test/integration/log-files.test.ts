/**
 * docs/design.md#12-running-on-a-cluster item 7: AWS_VPC_K8S_CNI_LOG_FILE and the plugin's log file work as
 * amazon-vpc-cni-k8s users expect. The real ipamd binary with its log set to a file in a
 * directory that does not exist yet and a 1 KiB rotation size: it writes JSON lines
 * there (nothing on stdout but the one line saying where), rotates to `<file>.1.gz`,
 * `.2.gz` (gzip, keeping ENI_IPAM_LOG_FILE_MAX_FILES), and the live file keeps its name.
 * The plugin log of invocations run inside ipamd goes through the same rotation
 * (PluginLogFiles, the exec server's `appendLog`): tested on the class and the invocation hook.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';
import { runInvocation } from '../../cni-plugin/invocation.js';
import { PluginLogFiles } from '../../ipamd/observability/log-files.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { testSimNode } from '../../kit/sim-node.js';

const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map(
      (l) => JSON.parse(l) as { msg?: string; level?: string; verb?: string; containerId?: string; outcome?: string },
    );

test('AWS_VPC_K8S_CNI_LOG_FILE: ipamd logs JSON lines to the file, creating its dir, rotated to .1.gz… keeping MAX_FILES', async (t) => {
  const { node } = await testSimNode(t, { seed: 3, mode: 'child' });
  const logFile = path.join(node.dir, 'aws-routed-eni', 'ipamd.log');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...node.env,
    INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0',
    AWS_VPC_K8S_CNI_LOGLEVEL: 'debug',
    WARM_IP_TARGET: '2',
    IP_COOLDOWN_PERIOD: '0',
    AWS_VPC_K8S_CNI_LOG_FILE: logFile,
    ENI_IPAM_LOG_FILE_MAX_SIZE: '2K',
    ENI_IPAM_LOG_FILE_MAX_FILES: '2',
  };
  delete env.NODE_EXTRA_CA_CERTS;
  const child = spawn(process.execPath, [IPAMD_PATH], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  t.after(async () => {
    if (child.exitCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const live = () => readFile(logFile, 'utf8').catch(() => '');
  const rotated = async () =>
    (await readdir(path.dirname(logFile)).catch(() => [] as string[])).filter((f) => f !== 'ipamd.log').sort();
  await waitFor(
    'ipamd serving (in the log file or a rotated one)',
    async () => (await live()).includes('"ipamd serving"') || (await rotated()).length > 0,
    30_000,
    100,
  );
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  await waitFor(
    'a warm IP',
    async () => {
      try {
        await c.add('warm-probe');
        return true;
      } catch {
        return false;
      }
    },
    20_000,
    200,
  );
  for (let i = 0; i < 30; i++) {
    await c.add(`p${i}`);
    await c.del(`p${i}`);
  }
  await waitFor('two rotations', async () => (await rotated()).length >= 2, 10_000, 100);
  child.kill('SIGTERM');
  assert.equal(await exited, 0, stdout + stderr);

  assert.deepEqual(
    stdout.trim().split('\n'),
    [`eni-ipamd: logging to ${logFile} (rotated at 2K, 2 kept)`],
    'nothing else on stdout',
  );
  assert.deepEqual(await rotated(), ['ipamd.log.1.gz', 'ipamd.log.2.gz'], 'two rotated files kept, gzip');
  // The last line may itself cross MAX_SIZE, and rotate into .1.gz right after it is written.
  const current = jsonLines(await live());
  const newest = jsonLines(
    gunzipSync(await readFile(path.join(path.dirname(logFile), 'ipamd.log.1.gz'))).toString('utf8'),
  );
  assert.ok(
    current.some((l) => l.msg === 'ipamd stopped') ||
      (current.length === 0 && newest.some((l) => l.msg === 'ipamd stopped')),
    'the live file keeps its name and gets the last lines',
  );
  for (const f of await rotated()) {
    const lines = jsonLines(gunzipSync(await readFile(path.join(path.dirname(logFile), f))).toString('utf8'));
    assert.ok(lines.length > 3, `${f} holds JSON lines`);
    assert.ok(
      lines.every((l) => typeof l.level === 'string'),
      f,
    );
  }
});

test('plugin log: invocations run in ipamd write their line through the rotating PluginLogFiles', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'plugin-log-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'aws-routed-eni', 'plugin.log');
  const logs = new PluginLogFiles({ maxSize: '1K', maxFiles: 10 });
  const conf = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'aws-cni',
    type: 'eni-ipam',
    ipamdSocket: '/nonexistent.sock',
    logFile: file,
  });
  for (let i = 0; i < 20; i++) {
    // A CHECK for a container with no netns: fails fast (no ipamd needed), and is logged.
    const code = await runInvocation(
      {},
      {
        env: {
          CNI_COMMAND: 'CHECK',
          CNI_CONTAINERID: `c${i}`,
          CNI_IFNAME: 'eth0',
          CNI_NETNS: '/nonexistent',
          CNI_PATH: '/opt/cni/bin',
        },
        readStdin: () => conf,
        writeStdout: () => undefined,
        writeStderr: () => undefined,
        appendLog: (f, line) => logs.append(f, line),
      },
    );
    assert.equal(code, 1);
  }
  await logs.close();
  const names = (await readdir(path.dirname(file))).sort();
  assert.ok(names.includes('plugin.log') && names.includes('plugin.log.1.gz'), `rotated: ${names}`);
  const lines: Array<{ verb?: string; containerId?: string; outcome?: string }> = [];
  for (const n of names) {
    const buf = await readFile(path.join(path.dirname(file), n));
    lines.push(...jsonLines(n.endsWith('.gz') ? gunzipSync(buf).toString('utf8') : buf.toString('utf8')));
  }
  assert.ok(
    lines.every((l) => l.verb === 'CHECK' && l.outcome === 'error'),
    JSON.stringify(lines),
  );
  assert.deepEqual(
    lines.map((l) => l.containerId).sort(),
    Array.from({ length: 20 }, (_, i) => `c${i}`).sort(),
    'every invocation logged once, none lost in a rotation',
  );
  // Plain appends (no hook, as the Node plugin run as a process) still write the line.
  const plain = path.join(dir, 'plain.log');
  await runInvocation(
    {},
    {
      env: { CNI_COMMAND: 'CHECK', CNI_CONTAINERID: 'x', CNI_IFNAME: 'eth0', CNI_NETNS: '/nonexistent', CNI_PATH: '/' },
      readStdin: () => conf.replace(file, plain),
      writeStdout: () => undefined,
      writeStderr: () => undefined,
    },
  );
  assert.equal(jsonLines(await readFile(plain, 'utf8')).length, 1);
});
