/**
 * The init container's command (dist/ipamd/node-init.js) in a network namespace standing
 * for the node: installs the shim and the chained plugins (portmap, bandwidth) atomically and sets ip_forward=1 and rp_filter=2 (all
 * and the default route's interface); with /proc/sys read-only (an unprivileged
 * container, as runc mounts it) it fails with one line naming the setting.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const INIT = fileURLToPath(new URL('../../ipamd/node-init.js', import.meta.url));
const ns = `eni-init-${process.pid}`;
const inNs = (...cmd: string[]): string =>
  execFileSync('ip', ['netns', 'exec', ns, ...cmd], { encoding: 'utf8' }).trim();

function run(cmd: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('ip', ['netns', 'exec', ns, ...cmd], { timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, out: `${stdout}${stderr}`.trim() });
    });
  });
}

test('node-init installs the shim and sets the sysctls; read-only /proc/sys fails naming the setting', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-init-'));
  execFileSync('ip', ['netns', 'add', ns]);
  t.after(async () => {
    try {
      execFileSync('ip', ['netns', 'del', ns]);
    } catch {
      /* already gone */
    }
    await rm(dir, { recursive: true, force: true });
  });
  inNs('ip', 'link', 'add', 'ens5', 'type', 'veth', 'peer', 'name', 'ens5p'); // no dummy module here
  inNs('ip', 'link', 'set', 'ens5', 'up');
  inNs('ip', 'addr', 'add', '10.0.0.10/24', 'dev', 'ens5');
  inNs('ip', 'route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'ens5');
  for (const k of ['net/ipv4/ip_forward', 'net/ipv4/conf/all/rp_filter', 'net/ipv4/conf/ens5/rp_filter'])
    inNs('sh', '-c', `echo 0 > /proc/sys/${k}`);
  const shim = path.join(dir, 'shim');
  await writeFile(shim, '#!/bin/sh\necho shim\n');
  const bin = path.join(dir, 'bin');
  execFileSync('mkdir', [bin]);

  // read-only /proc/sys first (nothing written, one clear line, exit 1)
  const ro = await run([
    'unshare',
    '--mount',
    '--propagation',
    'private',
    'sh',
    '-c',
    `mount -o bind,ro /proc/sys /proc/sys && exec ${process.execPath} ${INIT} --shim ${shim} --cni-bin-dir ${bin}`,
  ]);
  assert.equal(ro.code, 1, ro.out);
  assert.match(ro.out, /cannot set net\.ipv4\.ip_forward=1: .*(read-only|EROFS).*privileged/);
  assert.equal(inNs('cat', '/proc/sys/net/ipv4/ip_forward'), '0');

  const ok = await run([process.execPath, INIT, '--shim', shim, '--cni-bin-dir', bin]);
  assert.equal(ok.code, 0, ok.out);
  assert.equal(await readFile(path.join(bin, 'eni-ipam'), 'utf8'), '#!/bin/sh\necho shim\n');
  assert.equal((await stat(path.join(bin, 'eni-ipam'))).mode & 0o777, 0o755);
  // The chained plugins, from Debian's containernetworking-plugins (the image's /usr/lib/cni).
  assert.deepEqual((await readdir(bin)).sort(), ['bandwidth', 'eni-ipam', 'portmap'], 'no temp file left behind');
  for (const p of ['portmap', 'bandwidth']) {
    assert.ok((await readFile(path.join(bin, p))).equals(await readFile(path.join('/usr/lib/cni', p))), p);
    assert.equal((await stat(path.join(bin, p))).mode & 0o777, 0o755);
  }
  assert.equal(inNs('cat', '/proc/sys/net/ipv4/ip_forward'), '1');
  assert.equal(inNs('cat', '/proc/sys/net/ipv4/conf/all/rp_filter'), '2');
  assert.equal(inNs('cat', '/proc/sys/net/ipv4/conf/ens5/rp_filter'), '2');

  const missing = await run([process.execPath, INIT, '--shim', path.join(dir, 'nope'), '--cni-bin-dir', bin]);
  assert.equal(missing.code, 1);
  assert.match(missing.out, /cannot read the CNI shim .*nope \(--shim\)/);
  const noPlugin = await run([
    process.execPath,
    INIT,
    '--shim',
    shim,
    '--cni-bin-dir',
    bin,
    '--chained-plugins-dir',
    dir,
  ]);
  assert.equal(noPlugin.code, 1);
  assert.match(noPlugin.out, /cannot read the chained plugin portmap .*\/portmap \(--chained-plugins-dir\)/);
  const badName = await run([
    process.execPath,
    INIT,
    '--shim',
    shim,
    '--cni-bin-dir',
    bin,
    '--chained-plugins',
    '../x',
  ]);
  assert.equal(badName.code, 1);
  assert.match(badName.out, /--chained-plugins: "\.\.\/x" is not a plugin file name/);
  const badIf = await run([process.execPath, INIT, '--shim', shim, '--cni-bin-dir', bin, '--primary-if', '../x']);
  assert.equal(badIf.code, 1);
  assert.match(badIf.out, /--primary-if "\.\.\/x" is invalid/);
});
