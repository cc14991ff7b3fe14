/**
 * The conflist ipamd installs with chained plugins (docs/design.md#chained-plugins):
 * portmap when the bin dir holds it, bandwidth with ENABLE_BANDWIDTH_PLUGIN (refused when
 * missing), and a custom conflist: completed with ipamd's fields, or refused with one line
 * while the node's working conflist stays as it was.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../ipamd/config.js';
import { parseCustomConflist } from '../../ipamd/startup/cni-conflist.js';
import { checkCustomConflist } from '../../ipamd/startup/cni-install-report.js';
import { CONFLIST_NAME, installCni, type CniInstallOptions } from '../../ipamd/startup/cni-install.js';

async function fixture(t: { after(fn: () => Promise<void>): void }, plugins: string[] = []) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'cni-conflist-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const src = path.join(dir, 'src');
  await writeFile(src, '#!/bin/sh\n');
  const binDir = path.join(dir, 'bin');
  await mkdir(binDir);
  for (const p of plugins) {
    await writeFile(path.join(binDir, p), '#!/bin/sh\n');
    await chmod(path.join(binDir, p), 0o755);
  }
  const opts: CniInstallOptions = {
    confDir: path.join(dir, 'net.d'),
    binDir,
    networkName: 'aws-cni',
    podMtu: 9001,
    vethPrefix: 'eni',
    ipamdSocket: '/s',
    execSocket: '/e',
    pluginSource: src,
    shimSource: src,
  };
  return { dir, opts };
}

const types = async (file: string): Promise<string[]> =>
  (JSON.parse(await readFile(file, 'utf8')) as { plugins: Array<{ type: string }> }).plugins.map((p) => p.type);

test('portmap is chained only when the bin dir holds it; bandwidth only when asked', async (t) => {
  const bare = await fixture(t);
  assert.deepEqual(await types((await installCni(bare.opts)).conflist), ['eni-ipam']);
  const { opts } = await fixture(t, ['portmap', 'bandwidth']);
  const r = await installCni(opts);
  assert.deepEqual(r.plugins, ['eni-ipam', 'portmap']);
  const doc = JSON.parse(await readFile(r.conflist, 'utf8'));
  assert.equal(doc.cniVersion, '1.0.0');
  assert.deepEqual(doc.plugins[1], { type: 'portmap', capabilities: { portMappings: true }, snat: true });
  const bw = await installCni({ ...opts, enableBandwidthPlugin: true });
  assert.deepEqual(bw.plugins, ['eni-ipam', 'portmap', 'bandwidth']);
  assert.deepEqual(JSON.parse(await readFile(bw.conflist, 'utf8')).plugins[2], {
    type: 'bandwidth',
    capabilities: { bandwidth: true },
  });
  assert.deepEqual(bw.missingPlugins, []);
});

test('ENABLE_BANDWIDTH_PLUGIN with no bandwidth in the bin dir: refused, the working conflist kept', async (t) => {
  const { opts } = await fixture(t, ['portmap']);
  const first = await installCni(opts);
  const before = await readFile(first.conflist, 'utf8');
  await assert.rejects(
    installCni({ ...opts, enableBandwidthPlugin: true }),
    /ENABLE_BANDWIDTH_PLUGIN=true but .*\/bin\/bandwidth is missing .*the conflist was not changed/,
  );
  assert.equal(await readFile(first.conflist, 'utf8'), before);
  assert.deepEqual(await readdir(opts.confDir), [CONFLIST_NAME], 'no temp file');
});

test('a custom conflist is installed as written, its eni-ipam entry completed by ipamd', async (t) => {
  const { dir, opts } = await fixture(t, ['portmap', 'tuning']);
  const file = path.join(dir, 'custom.conflist');
  const custom = {
    cniVersion: '0.4.0',
    plugins: [
      { type: 'eni-ipam', mtu: 9001 },
      { type: 'tuning', sysctl: { 'net.core.somaxconn': '512' } },
      { type: 'cilium-cni', chainingMode: 'aws-cni' },
    ],
  };
  await writeFile(file, JSON.stringify(custom));
  const r = await installCni({ ...opts, customConflist: file, enableBandwidthPlugin: true });
  const doc = JSON.parse(await readFile(r.conflist, 'utf8'));
  assert.equal(doc.cniVersion, '0.4.0');
  assert.equal(doc.name, 'aws-cni', 'name defaulted to ENI_IPAM_NETWORK_NAME');
  assert.deepEqual(
    doc.plugins.slice(1),
    custom.plugins.slice(1),
    'other plugins as written, no portmap or bandwidth added',
  );
  assert.deepEqual(doc.plugins[0], {
    type: 'eni-ipam',
    mtu: 9001,
    vethPrefix: 'eni',
    ipamdSocket: '/s',
    execSocket: '/e',
  });
  assert.deepEqual(r.missingPlugins, ['cilium-cni']);
});

test('a bad custom conflist is refused with one line naming the file and why; the working conflist stays', async (t) => {
  const { dir, opts } = await fixture(t, ['portmap']);
  const working = await installCni(opts);
  const before = await readFile(working.conflist, 'utf8');
  const file = path.join(dir, 'custom.conflist');
  const cases: Array<[string, RegExp]> = [
    ['{"cniVersion": "1.0.0", "plugins": [', /is refused: not valid JSON \(/],
    ['[]', /expected a CNI network configuration list/],
    ['{"cniVersion":"1.0.0","plugins":[{"type":"portmap"}]}', /is refused: it names no eni-ipam plugin$/],
    ['{"cniVersion":"1.0.0","plugins":[{"type":"eni-ipam"},{"type":"eni-ipam"}]}', /eni-ipam plugin 2 times/],
    ['{"cniVersion":"9.9.9","plugins":[{"type":"eni-ipam"}]}', /cniVersion "9\.9\.9" is not one of 0\.3\.0, /],
    ['{"cniVersion":"1.0.0","plugins":[{"type":"../sh"},{"type":"eni-ipam"}]}', /plugins\[0\] needs a "type"/],
    [
      '{"cniVersion":"1.0.0","plugins":[{"type":"eni-ipam","mtu":1500}]}',
      /sets mtu=1500, but ipamd writes mtu=9001 \(set by POD_MTU \/ AWS_VPC_ENI_MTU\); remove it/,
    ],
  ];
  for (const [text, re] of cases) {
    await writeFile(file, text);
    const e = await installCni({ ...opts, customConflist: file }).then(
      () => assert.fail(`accepted ${text}`),
      (x: Error) => x,
    );
    assert.match(e.message, new RegExp(`^custom conflist ${file} `));
    assert.match(e.message, re);
    assert.ok(!e.message.includes('\n'), 'one line');
    assert.equal(await readFile(working.conflist, 'utf8'), before, `working conflist kept (${text})`);
  }
  assert.deepEqual(await readdir(opts.confDir), [CONFLIST_NAME], 'no temp file');
  await assert.rejects(installCni({ ...opts, customConflist: path.join(dir, 'absent') }), /cannot be read: ENOENT/);
  assert.throws(() => parseCustomConflist('{}', 'x'), /custom conflist x is refused/);
});

test('ipamd checks the custom conflist at start: a ConfigError naming ENI_IPAM_CNI_CONFLIST_FILE', async (t) => {
  const { dir } = await fixture(t);
  const file = path.join(dir, 'c.conflist');
  await writeFile(file, '{"cniVersion":"1.0.0","plugins":[{"type":"bandwidth"}]}');
  const c = loadConfig({ ENI_IPAM_CNI_CONFLIST_FILE: file, ENI_IPAM_CNI_BIN_DIR: dir });
  assert.throws(
    () => checkCustomConflist(c),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.variable === 'ENI_IPAM_CNI_CONFLIST_FILE' &&
      /^ENI_IPAM_CNI_CONFLIST_FILE: custom conflist .* is refused: it names no eni-ipam plugin$/.test(e.message),
  );
  await writeFile(file, '{"cniVersion":"1.0.0","plugins":[{"type":"eni-ipam"},{"type":"bandwidth"}]}');
  checkCustomConflist(c);
  checkCustomConflist(loadConfig({ ENI_IPAM_INSTALL_CNI: 'false', ENI_IPAM_CNI_CONFLIST_FILE: '/nonexistent' }));
});
