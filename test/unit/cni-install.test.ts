/**
 * CNI install order (docs/design.md#12-running-on-a-cluster item 6): ipamd's conflist sorts before a leftover
 * amazon-vpc-cni-k8s `10-aws.conflist`, which is left in place and reported; our former
 * `10-eni-ipam.conflist` is removed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AWS_CONFLIST_NAME, CONFLIST_NAME, installCni, LEGACY_CONFLIST_NAME } from '../../ipamd/startup/cni-install.js';

async function fixture(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'cni-install-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const src = path.join(dir, 'src');
  await writeFile(src, '#!/bin/sh\n');
  const confDir = path.join(dir, 'net.d');
  const opts = {
    confDir,
    binDir: path.join(dir, 'bin'),
    networkName: 'aws-cni',
    podMtu: 9001,
    vethPrefix: 'eni',
    ipamdSocket: '/s',
    execSocket: '/e',
    pluginSource: src,
    shimSource: src,
  };
  return { confDir, opts };
}

/** The network config libcni would use: the first `.conf`/`.conflist`/`.json` file in byte order (Go sort.Strings). */
function firstLoaded(names: string[]): string | undefined {
  return names
    .filter((n) => /\.(conf|conflist|json)$/.test(n))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))[0];
}

test('our conflist sorts before a leftover 10-aws.conflist, which is kept and reported', async (t) => {
  const { confDir, opts } = await fixture(t);
  await mkdir(confDir, { recursive: true });
  const aws = '{"cniVersion":"0.4.0","name":"aws-cni","plugins":[{"type":"aws-cni"}]}';
  await writeFile(path.join(confDir, AWS_CONFLIST_NAME), aws);
  await writeFile(path.join(confDir, LEGACY_CONFLIST_NAME), '{}');
  const r = await installCni(opts);
  const names = await readdir(confDir);
  assert.deepEqual(
    names.sort(),
    [CONFLIST_NAME, AWS_CONFLIST_NAME].sort(),
    'legacy name removed, aws conflist kept, no temp file',
  );
  assert.equal(firstLoaded(names), CONFLIST_NAME, 'the runtime picks ours');
  assert.ok(CONFLIST_NAME < AWS_CONFLIST_NAME);
  assert.equal(await readFile(path.join(confDir, AWS_CONFLIST_NAME), 'utf8'), aws, 'aws conflist untouched');
  assert.deepEqual(r.shadowed, [AWS_CONFLIST_NAME]);
  assert.deepEqual(r.shadowedBy, []);
  assert.equal(r.removedLegacy, true);
  assert.equal(JSON.parse(await readFile(r.conflist, 'utf8')).plugins[0].type, 'eni-ipam');
});

test('a conflist sorting before ours is reported as shadowing it', async (t) => {
  const { confDir, opts } = await fixture(t);
  await mkdir(confDir, { recursive: true });
  await writeFile(path.join(confDir, '00-other.conf'), '{}');
  await writeFile(path.join(confDir, 'README'), 'not a network config');
  const r = await installCni(opts);
  assert.deepEqual(r.shadowedBy, ['00-other.conf']);
  assert.deepEqual(r.shadowed, []);
  assert.equal(r.removedLegacy, false);
});

test('the eni-ipam entry names the family for ipv6 and dual nodes, not for ipv4; a custom entry that disagrees is refused', async () => {
  const { renderPluginEntry } = await import('../../ipamd/startup/cni-install.js');
  const { completeCustomConflist } = await import('../../ipamd/startup/cni-conflist.js');
  const base = {
    confDir: '/c',
    binDir: '/b',
    networkName: 'aws-cni',
    podMtu: 9001,
    vethPrefix: 'eni',
    ipamdSocket: '/run/s',
    execSocket: '/run/e',
  };
  assert.equal('ipFamily' in renderPluginEntry(base), false);
  assert.equal('ipFamily' in renderPluginEntry({ ...base, ipFamily: 'ipv4' }), false);
  assert.equal(renderPluginEntry({ ...base, ipFamily: 'ipv6' }).ipFamily, 'ipv6');
  assert.equal(renderPluginEntry({ ...base, ipFamily: 'dual' }).ipFamily, 'dual');
  const custom = { cniVersion: '1.0.0', plugins: [{ type: 'eni-ipam', ipFamily: 'ipv4' }] };
  assert.throws(
    () => completeCustomConflist(custom, renderPluginEntry({ ...base, ipFamily: 'ipv6' }), 'aws-cni', 'f.json'),
    /sets ipFamily="ipv4", but ipamd writes ipFamily="ipv6" \(set by ENABLE_IPv6 \/ ENABLE_IPv4\)/,
  );
});
