/**
 * The support bundle's node parts (cli/bundle-node.ts) against a real ipamd on the
 * simulated cloud: the CNI configuration directory ipamd installed its conflist in (found
 * through ipamd's own settings), the sysctls ipamd relies on read in the node's network
 * namespace (a netns whose values differ from the machine's), and the kubelet's and
 * containerd's logs read as on an EKS node, from their journal units with the node's own
 * journalctl (a real journal written by systemd-journal-remote, read chrooted into the host
 * root), each unit's lines and no other's; then from log files given by flag; a host root
 * that is not a directory is one line and exit 2.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createNamedNetns, ipIn } from '../../kit/netns.js';
import { createNode } from '../../kit/node-harness.js';
import { runCli } from '../helpers/cli-run.js';

const sh = promisify(execFile);
const JOURNAL_REMOTE = '/lib/systemd/systemd-journal-remote';

/** One file of the bundle's tarball, by its path under the bundle's top directory. */
async function member(tgz: string, rel: string): Promise<string> {
  return (await sh('tar', ['-xzOf', tgz, '--wildcards', `*/${rel}`], { maxBuffer: 64 << 20 })).stdout;
}

/** A journal directory holding `entries` (unit, message), written by systemd-journal-remote from export format. */
async function journal(dir: string, entries: Array<[unit: string, message: string]>): Promise<void> {
  await mkdir(dir, { recursive: true });
  const now = Date.now() * 1000;
  const text = entries
    .map(
      ([unit, msg], i) =>
        `__REALTIME_TIMESTAMP=${now - 60_000_000 + i * 1000}\n_SYSTEMD_UNIT=${unit}.service\nSYSLOG_IDENTIFIER=${unit}\n_HOSTNAME=node-1\n_BOOT_ID=0123456789abcdef0123456789abcdef\nMESSAGE=${msg}\n\n`,
    )
    .join('');
  await writeFile(path.join(dir, 'in.export'), text);
  await sh(JOURNAL_REMOTE, [`--output=${path.join(dir, 'node.journal')}`, path.join(dir, 'in.export')]);
}

test('the bundle holds the conflists, the node netns sysctls, and the kubelet and containerd journal units', async (t) => {
  const h = await createNode();
  t.after(() => h.close());
  const d = await h.startIpamd();
  const confDir = h.env.ENI_IPAM_CNI_CONF_DIR!;
  // ipamd installs its conflist once it serves; another CNI's file beside it is evidence too.
  await writeFile(path.join(confDir, '10-aws.conflist'), '{"name":"aws-cni"}\n');
  const installed = (await readdir(confDir)).sort();
  assert.ok(
    installed.some((f) => f.endsWith('eni-ipam.conflist')),
    installed.join(', '),
  );

  const ns = await createNamedNetns(`eni-bundle-${process.pid}`);
  t.after(() => ns.remove());
  await ipIn(ns.path, ['link', 'add', 'eth9', 'type', 'veth', 'peer', 'name', 'eth9p']);
  await sh('nsenter', [`--net=${ns.path}`, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  await sh('nsenter', [`--net=${ns.path}`, 'sysctl', '-q', '-w', 'net.ipv4.conf.all.rp_filter=2']);
  await sh('nsenter', [`--net=${ns.path}`, 'sysctl', '-q', '-w', 'net.ipv4.conf.eth9.rp_filter=1']);

  const jdir = path.join(h.dir, 'journal');
  await journal(jdir, [
    ['kubelet', 'E1207 kubelet.go:1 "Failed to run kubelet" err="kubelet says hi"'],
    ['containerd', 'level=error msg="containerd says hi"'],
    ['kubelet', 'I1207 kubelet.go:2 second kubelet line'],
  ]);
  const base = [
    '--introspection',
    `127.0.0.1:${d.introspectionPort}`,
    '--socket',
    h.socket,
    '--checkpoint',
    h.checkpoint,
  ];
  const bundle = path.join(h.dir, 'b.tgz');
  const r = await runCli([
    'support-bundle',
    '--out',
    bundle,
    ...base,
    '--netns',
    ns.path,
    '--host-root',
    '/',
    '--journal-dir',
    jdir,
    '--cri-endpoint',
    'unix:///nonexistent/cri.sock',
  ]);
  assert.equal(r.code, 0, r.stderr);
  for (const f of installed)
    assert.equal(await member(bundle, `node/cni-net.d/${f}`), await readFile(path.join(confDir, f), 'utf8'));

  const sysctls = await member(bundle, 'node/sysctls.txt');
  assert.match(sysctls, /^net\.ipv4\.ip_forward = 1$/m);
  assert.match(sysctls, /^net\.ipv4\.conf\.all\.rp_filter = 2$/m);
  assert.match(
    sysctls,
    /^net\.ipv4\.conf\.eth9\.rp_filter = 1$/m,
    'the node netns, not the machine: eth9 is only there',
  );
  assert.match(sysctls, /^net\.ipv6\.conf\.eth9\.accept_ra = \d$/m);

  const kubelet = await member(bundle, 'node/kubelet.log');
  const containerd = await member(bundle, 'node/containerd.log');
  assert.match(kubelet, /kubelet says hi/);
  assert.match(kubelet, /second kubelet line/);
  assert.doesNotMatch(kubelet, /containerd says hi/, 'only the kubelet unit');
  assert.match(containerd, /containerd says hi/);
  assert.doesNotMatch(containerd, /kubelet/);
  const manifest = JSON.parse(await member(bundle, 'MANIFEST.json')) as {
    node: { cniConfDir: string; kubelet: string; containerd: string };
  };
  assert.equal(manifest.node.cniConfDir, confDir, "the conflist directory from ipamd's settings");
  assert.equal(
    manifest.node.kubelet,
    `chroot / journalctl --unit=kubelet --since=-10d --no-pager --output=short-iso-precise --directory=${jdir}`,
  );

  // A node whose kubelet and containerd log to files: the files, by flag.
  await writeFile(path.join(h.dir, 'kubelet.log'), 'kubelet file line\n');
  await writeFile(path.join(h.dir, 'containerd.log'), 'containerd file line\n');
  const bundle2 = path.join(h.dir, 'b2.tgz');
  const r2 = await runCli([
    'support-bundle',
    '--out',
    bundle2,
    ...base,
    '--kubelet-log',
    path.join(h.dir, 'kubelet.log'),
    '--containerd-log',
    path.join(h.dir, 'containerd.log'),
    '--cni-conf-dir',
    path.join(h.dir, 'no-such-dir'),
  ]);
  assert.equal(r2.code, 0, r2.stderr);
  assert.equal(await member(bundle2, 'node/kubelet.log'), 'kubelet file line\n');
  assert.equal(await member(bundle2, 'node/containerd.log'), 'containerd file line\n');
  assert.match(r2.stdout, /not collected: node\/cni-net\.d\/: .*no-such-dir: ENOENT/);

  const bad = await runCli([
    'support-bundle',
    '--out',
    path.join(h.dir, 'b3.tgz'),
    ...base,
    '--host-root',
    '/nonexistent',
  ]);
  assert.equal(bad.code, 2);
  assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr);
  assert.match(
    bad.stderr,
    /^eni-ipam: --host-root "\/nonexistent" is not a directory: expected the node's root filesystem/,
  );
});
