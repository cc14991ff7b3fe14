/**
 * Start-up validation of ipamd's path settings (docs/design.md#bounds-on-bad-input): a checkpoint under
 * /proc (ipamd used to spin at ~90 % CPU and never serve), a checkpoint path that is a
 * directory (EISDIR without the variable), a Unix socket path over the 107-byte sun_path
 * limit (a misleading ENOENT chmod and a stray socket under a truncated name). The real
 * ipamd binary is started with each bad value and must exit 1 at once with one line
 * naming the variable, having created nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';
import { checkConfigOnDisk, ConfigError, loadConfig } from '../../ipamd/config.js';

const execFileP = promisify(execFile);

/**
 * Runs ipamd with `env` (nothing else of the test's environment that ipamd reads); resolves with its exit code and
 * stderr, or fails after `ms`. `mounts` (shell commands) run first in a private mount namespace of ipamd's own
 * (`unshare -m`), which ends with it: nothing is mounted on the machine.
 */
function runIpamd(
  env: NodeJS.ProcessEnv,
  ms = 10_000,
  mounts: string[] = [],
): Promise<{ code: number | null; stderr: string }> {
  const [cmd, args] = mounts.length
    ? [
        'unshare',
        [
          '-m',
          '--propagation',
          'private',
          'sh',
          '-ec',
          `${mounts.join('; ')}; exec "$0" "$1"`,
          process.execPath,
          IPAMD_PATH,
        ],
      ]
    : [process.execPath, [IPAMD_PATH]];
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, {
      env: { PATH: process.env.PATH, AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://127.0.0.1:9', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`ipamd did not exit within ${ms} ms; stderr: ${stderr.slice(0, 500)}`));
    }, ms);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

test('a bad path setting stops ipamd at start with one line naming the variable', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-cfg-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sockDir = path.join(dir, 's'.repeat(100));
  await mkdir(sockDir);
  await mkdir(path.join(dir, 'ckpt-dir'));
  const ok = { ENI_IPAM_SOCKET: path.join(dir, 'ipamd.sock'), ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json') };
  const cases: Array<{ env: NodeJS.ProcessEnv; variable: string; why: RegExp }> = [
    {
      env: { ENI_IPAM_CHECKPOINT_PATH: '/proc/self/ipam.json' },
      variable: 'ENI_IPAM_CHECKPOINT_PATH',
      why: /\/proc is a pseudo filesystem/,
    },
    {
      env: { ENI_IPAM_CHECKPOINT_PATH: '/sys/kernel/ipam.json' },
      variable: 'ENI_IPAM_CHECKPOINT_PATH',
      why: /\/sys is a pseudo filesystem/,
    },
    {
      env: { ENI_IPAM_CHECKPOINT_PATH: '/var/../proc/x' },
      variable: 'ENI_IPAM_CHECKPOINT_PATH',
      why: /under \/proc, a pseudo filesystem/,
    },
    {
      env: { ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ckpt-dir') },
      variable: 'ENI_IPAM_CHECKPOINT_PATH',
      why: /is a directory/,
    },
    {
      env: { ENI_IPAM_SOCKET: path.join(sockDir, 'ipamd.sock') },
      variable: 'ENI_IPAM_SOCKET',
      why: /at most 107 bytes.*this one is 1\d\d/,
    },
    {
      env: { ENI_IPAM_CNI_EXEC_SOCKET: path.join(sockDir, 'x.sock') },
      variable: 'ENI_IPAM_CNI_EXEC_SOCKET',
      why: /at most 107 bytes/,
    },
    {
      env: { ENI_IPAM_SOCKET: path.join(dir, `${'s'.repeat(107 - dir.length - 9)}`, 'ipam.sk') },
      variable: 'ENI_IPAM_SOCKET',
      why: /exec socket beside it .* too long/,
    },
    {
      env: { CRI_RUNTIME_ENDPOINT: `unix://${path.join(sockDir, 'cri.sock')}` },
      variable: 'CRI_RUNTIME_ENDPOINT',
      why: /at most 107 bytes/,
    },
  ];
  for (const c of cases) {
    const r = await runIpamd({ ...ok, ...c.env });
    assert.equal(r.code, 1, `${JSON.stringify(c.env)}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, new RegExp(`^eni-ipamd: ${c.variable}=".*" is invalid: `), r.stderr);
    assert.match(lines[0]!, c.why, r.stderr);
  }
  // Nothing was created: no socket under a truncated name, no checkpoint.
  assert.deepEqual(await readdir(sockDir), []);
  assert.deepEqual((await readdir(dir)).sort(), ['ckpt-dir', 's'.repeat(100)]);
});

test('a path reached through a bind-mounted /proc, a read-only directory, a netns that is not one: ipamd names the variable', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-cfg-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const d of ['proc', 'ro', 'run']) await mkdir(path.join(dir, d));
  await writeFile(path.join(dir, 'hostname'), 'node-1\n');
  const ok = {
    ENI_IPAM_SOCKET: path.join(dir, 'run/ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'run/ipam.json'),
  };
  const bindProc = `mount --bind /proc ${dir}/proc`;
  const readOnly = `mount --bind ${dir}/ro ${dir}/ro && mount -o remount,bind,ro ${dir}/ro`;
  const cases: Array<{ env: NodeJS.ProcessEnv; mounts?: string[]; variable: string; why: RegExp }> = [
    {
      env: { ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'proc/x/ipam.json') },
      mounts: [bindProc],
      variable: 'ENI_IPAM_CHECKPOINT_PATH',
      why: /on a proc filesystem .* a pseudo filesystem that can never hold it/,
    },
    {
      env: { ENI_IPAM_CNI_EXEC_SOCKET: path.join(dir, 'proc/cni-exec.sock') },
      mounts: [bindProc],
      variable: 'ENI_IPAM_CNI_EXEC_SOCKET',
      why: /on a proc filesystem/,
    },
    {
      env: { ENI_IPAM_CNI_EXEC_NETNS: path.join(dir, 'hostname') },
      variable: 'ENI_IPAM_CNI_EXEC_NETNS',
      why: /it is a regular file, not a network namespace/,
    },
    {
      env: { ENI_IPAM_CNI_EXEC_NETNS: '/proc/self/ns/mnt' },
      variable: 'ENI_IPAM_CNI_EXEC_NETNS',
      why: /it is a mnt namespace, not a network namespace/,
    },
    {
      env: { ENI_IPAM_CNI_EXEC_NETNS: dir },
      variable: 'ENI_IPAM_CNI_EXEC_NETNS',
      why: /it is a directory, not a network namespace/,
    },
    {
      env: { ENI_IPAM_CNI_EXEC_NETNS: path.join(dir, 'no-such-netns') },
      variable: 'ENI_IPAM_CNI_EXEC_NETNS',
      why: /it does not exist/,
    },
  ];
  for (const c of cases) {
    const r = await runIpamd({ ...ok, ...c.env }, 10_000, c.mounts);
    assert.equal(r.code, 1, `${JSON.stringify(c.env)}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, new RegExp(`^eni-ipamd: ${c.variable}=".*" is invalid: `), r.stderr);
    assert.match(lines[0]!, c.why, r.stderr);
  }
  // The network namespace ipamd runs in is one: accepted (ipamd goes on to wait for IMDS, so stop it).
  assert.doesNotThrow(() => checkConfigOnDisk({ ...loadConfig(ok), cniExecNetns: '/proc/self/ns/net' }));
  // A named netns (`ip netns add`: an nsfs bind mount, whose open file reads back as its path) is one too;
  // a bind mount of another namespace type is not.
  const named = `eni-cfg-${process.pid}`;
  await execFileP('ip', ['netns', 'add', named]);
  t.after(() => execFileP('ip', ['netns', 'delete', named]).catch(() => undefined));
  assert.doesNotThrow(() => checkConfigOnDisk({ ...loadConfig(ok), cniExecNetns: `/var/run/netns/${named}` }));
  assert.doesNotThrow(() => checkConfigOnDisk({ ...loadConfig(ok), cniExecNetns: `/run/netns/${named}` }));
  const uts = path.join(dir, 'uts');
  await writeFile(uts, '');
  await execFileP('mount', ['--bind', '/proc/self/ns/uts', uts]);
  try {
    assert.throws(
      () => checkConfigOnDisk({ ...loadConfig(ok), cniExecNetns: uts }),
      (e: unknown) => e instanceof ConfigError && /it is a uts namespace, not a network namespace/.test(e.message),
    );
  } finally {
    await execFileP('umount', [uts]);
  }
  // A read-only directory passes the start check (nothing is wrong with the path); the write fails at start and
  // the error names the variable, not only the path.
  const ro = await runIpamd({ ...ok, ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ro/sub/ipam.json') }, 20_000, [
    readOnly,
  ]);
  assert.equal(ro.code, 1, ro.stderr);
  assert.match(
    ro.stderr.trim().split('\n').at(-1)!,
    new RegExp(`^eni-ipamd: ENI_IPAM_CHECKPOINT_PATH="${dir}/ro/sub/ipam.json": .*EROFS`),
    ro.stderr,
  );
  assert.deepEqual(await readdir(path.join(dir, 'ro')), [], 'nothing written through the read-only mount');
});

test('loadConfig/checkConfigOnDisk accept the defaults and a 107-byte socket path', () => {
  const c = loadConfig({});
  assert.equal(c.checkpointPath, '/var/run/eni-ipam/ipam.json');
  const sock = `/${'a'.repeat(106)}`;
  assert.equal(Buffer.byteLength(sock), 107);
  assert.equal(loadConfig({ ENI_IPAM_SOCKET: sock, ENI_IPAM_CNI_EXEC_SOCKET: '/run/x.sock' }).socketPath, sock);
  assert.throws(
    () => loadConfig({ ENI_IPAM_SOCKET: `${sock}b` }),
    (e: unknown) => e instanceof ConfigError && e.variable === 'ENI_IPAM_SOCKET',
  );
  // A multi-byte path counts bytes, not characters.
  assert.throws(() => loadConfig({ ENI_IPAM_SOCKET: `/${'é'.repeat(54)}` }), ConfigError);
  checkConfigOnDisk({ ...c, checkpointPath: '/nonexistent/dir/ipam.json' });
  assert.throws(() => checkConfigOnDisk({ ...c, checkpointPath: '/dev/null' }), /under \/dev/);
});
