/**
 * A node mount namespace whose file bind sits in a directory it must cover later: the cover
 * keeps the file's mount (kit/mount-scaffold.ts). On the machine where /run/xtables.lock
 * exists (any iptables-legacy run in the host's mount namespace leaves it, as
 * test/integration/host-network.test.ts's does) and /run/eni-ipam too, the cluster binds the
 * lock file and then covers /run for a missing /run/aws-node; the cover bound the file's
 * mount onto a directory and every cluster start failed ("mount --rbind /run/xtables.lock
 * …/keep/2: Not a directory"). Here the same order with paths every machine has: the file
 * /etc/hostname bound, then a missing directory beside it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { createNodeMountNs } from '../../kit/node-mountns.js';

test('a file bind survives the cover of its directory for a missing sibling', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-mntns-keep-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const missing = `/etc/eni-ipam-keep-${process.pid}`;
  const hostname = readFileSync('/etc/hostname', 'utf8');
  const ns = await createNodeMountNs({
    root: dir,
    binds: [{ nodePath: '/etc/hostname', kind: 'file' }, { nodePath: missing }],
  });
  t.after(() => ns.close());
  await ns.exec(['sh', '-c', 'printf node-1 >/etc/hostname && printf x >"$1/owner"', 'sh', missing]);
  assert.equal(await ns.exec(['cat', '/etc/hostname']), 'node-1', 'the file bind is still in place after the cover');
  assert.equal(readFileSync(ns.hostPathOf('/etc/hostname')!, 'utf8'), 'node-1');
  assert.equal(readFileSync(ns.hostPathOf(`${missing}/owner`)!, 'utf8'), 'x');
  assert.equal(readFileSync('/etc/hostname', 'utf8'), hostname, "the machine's file is unchanged");
  assert.equal(existsSync(missing), false, 'nothing created on the machine');
});
