/**
 * Every path-valued setting is checked once, in one place (ipamd/config-paths.ts), before
 * anything is opened (docs/design.md#bounds-on-bad-input). The variables come from the
 * config spec itself (`pathSettings(configSpecs())`: each schema built by
 * ipamd/config-path-fields.ts carries its kind), never from a list here, so a path variable
 * added later is covered by these tests without anyone remembering it.
 *
 * Each path variable is tried literally under /proc and /sys, through a symlink that
 * resolves into /proc, through a file that stands where a directory must be, and with a
 * good value; the real ipamd binary is started with the symlinked value of each and must
 * exit 1 at once with one line naming the variable (it used to spin at one core, never
 * serving, and some cases ignored SIGTERM).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';
import { checkConfigOnDisk, ConfigError, configSpecs, loadConfig } from '../../ipamd/config.js';
import { pathSettings, type PathSetting } from '../../ipamd/config-paths.js';

const SETTINGS = pathSettings(configSpecs());
/** The settings whose paths can never be under /proc, /sys or /dev (all but network namespace files). */
const CHECKED = SETTINGS.filter((s) => s.kind !== 'netns');

/** A value of `s`'s kind under directory `dir` (a short name: socket paths stay within 107 bytes). */
const under = (s: PathSetting, dir: string): string => path.join(dir, s.kind === 'dir' ? 'd' : `${s.kind}.x`);

/** The error `f` throws, asserted to be a ConfigError for `s` with one line naming `value`. */
function refusal(s: PathSetting, value: string, f: () => void): string {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ConfigError, `${s.name}=${value} was accepted`);
  assert.equal(err.variable, s.name);
  assert.doesNotMatch(err.message, /\n/);
  assert.ok(err.message.startsWith(`${s.name}=${JSON.stringify(value)} is invalid: `), err.message);
  assert.match(err.message, /expected /, 'the line says what is accepted');
  return err.message;
}

test('the spec declares every setting ipamd uses as a path, with its kind', () => {
  const byName = Object.fromEntries(SETTINGS.map((s) => [s.name, s.kind]));
  // The list (docs/design.md#bounds-on-bad-input); the spec may hold more.
  assert.deepEqual(
    {
      ENI_IPAM_SOCKET: byName.ENI_IPAM_SOCKET,
      ENI_IPAM_CNI_EXEC_SOCKET: byName.ENI_IPAM_CNI_EXEC_SOCKET,
      AWS_VPC_K8S_CNI_LOG_FILE: byName.AWS_VPC_K8S_CNI_LOG_FILE,
      AWS_VPC_K8S_PLUGIN_LOG_FILE: byName.AWS_VPC_K8S_PLUGIN_LOG_FILE,
      ENI_IPAM_CNI_CONF_DIR: byName.ENI_IPAM_CNI_CONF_DIR,
      ENI_IPAM_CNI_BIN_DIR: byName.ENI_IPAM_CNI_BIN_DIR,
      ENI_IPAM_CHECKPOINT_PATH: byName.ENI_IPAM_CHECKPOINT_PATH,
    },
    {
      ENI_IPAM_SOCKET: 'socket',
      ENI_IPAM_CNI_EXEC_SOCKET: 'socket',
      AWS_VPC_K8S_CNI_LOG_FILE: 'log',
      AWS_VPC_K8S_PLUGIN_LOG_FILE: 'file',
      ENI_IPAM_CNI_CONF_DIR: 'dir',
      ENI_IPAM_CNI_BIN_DIR: 'dir',
      ENI_IPAM_CHECKPOINT_PATH: 'file',
    },
  );
  // A variable that looks like a path but was declared with a plain text schema would escape the check.
  const looksLikePath = configSpecs().filter(
    (s) => /(_PATH|_DIR|_SOCKET|_FILE|_NETNS|_ENDPOINT)$/.test(s.name) && !/^AWS_EC2_|METADATA/.test(s.name),
  );
  const undeclared = looksLikePath.filter((s) => !SETTINGS.some((p) => p.name === s.name)).map((s) => s.name);
  assert.deepEqual(undeclared, [], 'path-like variables without a path kind');
  assert.deepEqual(
    configSpecs()
      .filter((s) => s.def?.startsWith('/') && !SETTINGS.some((p) => p.name === s.name))
      .map((s) => s.name),
    [],
    'variables with a path default but no path kind',
  );
  // Only network namespace files may live under /proc.
  assert.deepEqual(
    SETTINGS.filter((s) => s.kind === 'netns').map((s) => s.name),
    ['ENI_IPAM_CNI_EXEC_NETNS'],
  );
  assert.equal(loadConfig({ ENI_IPAM_CNI_EXEC_NETNS: '/proc/self/ns/net' }).cniExecNetns, '/proc/self/ns/net');
});

test('every path setting is refused under /proc and /sys, literally or through a symlink, naming the variable', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-paths-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await symlink('/proc/self', path.join(dir, 'p'));
  await symlink('/sys/kernel', path.join(dir, 's'));
  await writeFile(path.join(dir, 'f'), 'a file, not a directory');
  assert.ok(CHECKED.length >= 9, `path settings found in the spec: ${CHECKED.map((s) => s.name).join(' ')}`);
  for (const s of CHECKED) {
    for (const root of ['/proc/x', '/sys/x', '/dev/x']) {
      const value = under(s, root);
      assert.match(
        refusal(s, value, () => checkConfigOnDisk(loadConfig({ [s.name]: value }))),
        /pseudo filesystem/,
      );
    }
    for (const [link, fs] of [
      ['p', '/proc'],
      ['s', '/sys'],
    ] as const) {
      const value = under(s, path.join(dir, link, 'x'));
      const c = loadConfig({ [s.name]: value }); // the literal path is fine: only the disk tells
      const msg = refusal(s, value, () => checkConfigOnDisk(c));
      assert.ok(msg.includes(`under ${fs}`), msg);
    }
    const blocked = under(s, path.join(dir, 'f'));
    assert.match(
      refusal(s, blocked, () => checkConfigOnDisk(loadConfig({ [s.name]: blocked }))),
      /is in the way and is not a directory/,
    );
    const good = under(s, path.join(dir, 'ok'));
    const c = loadConfig({ [s.name]: good });
    checkConfigOnDisk(c);
    assert.equal(c[s.key], good);
  }
  // What exists must be of the kind's type: a directory where a file goes, a file where a directory goes.
  for (const s of CHECKED.filter((x) => x.kind === 'file' || x.kind === 'log'))
    assert.match(
      refusal(s, dir, () => checkConfigOnDisk(loadConfig({ [s.name]: dir }))),
      /is a directory/,
    );
  for (const s of CHECKED.filter((x) => x.kind === 'dir'))
    assert.match(
      refusal(s, path.join(dir, 'f'), () => checkConfigOnDisk(loadConfig({ [s.name]: path.join(dir, 'f') }))),
      /not a directory/,
    );
  // stdout stays a log target, as amazon-vpc-cni-k8s accepts it.
  checkConfigOnDisk(loadConfig({ AWS_VPC_K8S_CNI_LOG_FILE: 'stdout' }));
});

/** Runs the real ipamd with `env` only; resolves with its exit code, stderr and the time it took (ms). */
function runIpamd(env: NodeJS.ProcessEnv, ms = 10_000): Promise<{ code: number | null; stderr: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [IPAMD_PATH], {
      env: { PATH: process.env.PATH, AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://127.0.0.1:9', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(
        new Error(`ipamd did not exit within ${ms} ms with ${JSON.stringify(env)}; stderr: ${stderr.slice(0, 500)}`),
      );
    }, ms);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, ms: performance.now() - t0 });
    });
  });
}

test('ipamd exits 1 at once with one line for each path setting resolving into /proc', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-paths-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await symlink('/proc/self', path.join(dir, 'p'));
  const ok = {
    ENI_IPAM_SOCKET: path.join(dir, 'ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ck', 'ipam.json'),
    ENI_IPAM_CNI_CONF_DIR: path.join(dir, 'net.d'),
    ENI_IPAM_CNI_BIN_DIR: path.join(dir, 'bin'),
    ENI_IPAM_AWS_NODE_CHECKPOINT_PATH: path.join(dir, 'aws-node.json'),
    AWS_VPC_K8S_PLUGIN_LOG_FILE: path.join(dir, 'plugin.log'),
    ENI_IPAM_INSTALL_CNI: 'true',
  };
  for (const s of CHECKED) {
    const value = under(s, path.join(dir, 'p', 'x'));
    const r = await runIpamd({ ...ok, [s.name]: value });
    assert.equal(r.code, 1, `${s.name}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0]!.startsWith(`eni-ipamd: ${s.name}=${JSON.stringify(value)} is invalid: `), r.stderr);
    assert.match(lines[0]!, /under \/proc/);
  }
});
