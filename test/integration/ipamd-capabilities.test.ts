/**
 * What ipamd does with the chart's capability set (drop ALL; add NET_ADMIN, NET_RAW,
 * SYS_ADMIN: charts/eni-ipam/values.yaml) where one is missing, run as ipamd's code runs
 * in the container: a child process whose capability sets are cut with setpriv.
 *
 * - iptables backend detection on a node whose rules live in the legacy backend (Amazon
 *   Linux 2's kube-proxy): with NET_RAW it picks legacy; without it reading x_tables is
 *   refused, and detection stops naming NET_RAW instead of silently picking nf_tables,
 *   where kube-proxy's rules are not. A node with no legacy rules needs no NET_RAW; without
 *   NET_ADMIN nf_tables cannot be read and detection names NET_ADMIN.
 * - a pod netns named `/proc/<pid>/ns/net` of a process holding capabilities ipamd lacks:
 *   the exec socket's check refuses it naming hostPID and SYS_PTRACE, and with SYS_PTRACE
 *   it is allowed.
 * The same set on the real cluster: test/cluster/least-privilege.test.ts.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createNamedNetns } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';

const sh = promisify(execFile);
/** iptables-legacy takes /run/xtables.lock, a machine path: every iptables this test runs takes its own. */
const LOCK_ENV = { ...process.env, XTABLES_LOCKFILE: path.join(os.tmpdir(), `eni-caps-${process.pid}.xtables.lock`) };
const CHART_CAPS = ['net_admin', 'net_raw', 'sys_admin'];
const dist = (rel: string) => fileURLToPath(new URL(`../../${rel}`, import.meta.url));

/** setpriv arguments giving a root process exactly `caps` (bounding, inheritable, ambient). */
const only = (caps: string[]) => {
  const set = `-all,${caps.map((c) => `+${c}`).join(',')}`;
  return ['setpriv', `--bounding-set=${set}`, `--inh-caps=${set}`, `--ambient-caps=${set}`];
};

/** Runs `code` (an ES module body; `out(x)` prints JSON) in node with `caps`, optionally inside `netns`. */
async function withCaps(caps: string[], code: string, netns?: string): Promise<unknown> {
  const argv = [...(netns ? ['ip', 'netns', 'exec', netns] : []), ...only(caps), process.execPath];
  const body = `const out = (x) => process.stdout.write(JSON.stringify(x));\n${code}`;
  const { stdout } = await sh(argv[0]!, [...argv.slice(1), '--input-type=module', '-e', body], { env: LOCK_ENV });
  return JSON.parse(stdout) as unknown;
}

test('iptables backend detection: legacy with NET_RAW; without it, refused naming NET_RAW, never a guess', async (t) => {
  const ns = await createNamedNetns(`eni-caps-${process.pid}`);
  t.after(() => ns.remove());
  t.after(() => rm(LOCK_ENV.XTABLES_LOCKFILE, { force: true }));
  const detect = `
    const { detectIptablesBackend } = await import(${JSON.stringify(dist('ipamd/network/iptables.js'))});
    const { CommandRunner } = await import(${JSON.stringify(dist('ipamd/network/runner.js'))});
    try { out({ backend: await detectIptablesBackend(new CommandRunner()) }); } catch (e) { out({ error: e.message }); }`;
  // An nf_tables node with no legacy rules (AL2023): NET_RAW is not needed; NET_ADMIN is, and is named.
  assert.deepEqual(await withCaps(['net_admin', 'sys_admin'], detect, ns.name), { backend: 'nft' });
  const noAdmin = (await withCaps(['net_raw', 'sys_admin'], detect, ns.name)) as { error?: string };
  assert.match(
    noAdmin.error ?? JSON.stringify(noAdmin),
    /iptables-nft-save was refused .*reading it needs the NET_ADMIN capability/,
  );
  // kube-proxy's rules in the legacy backend (AL2).
  for (const chain of ['PREROUTING', 'OUTPUT', 'POSTROUTING']) {
    const rule = ['-t', 'nat', '-A', chain, '-s', '10.9.9.9', '-j', 'ACCEPT'];
    await sh('ip', ['netns', 'exec', ns.name, 'iptables-legacy', ...rule], { env: LOCK_ENV });
  }
  assert.deepEqual(await withCaps(CHART_CAPS, detect, ns.name), { backend: 'legacy' });
  const refused = (await withCaps(['net_admin', 'sys_admin'], detect, ns.name)) as { error?: string };
  assert.match(
    refused.error ?? JSON.stringify(refused),
    /^cannot tell which iptables backend the node uses: iptables-legacy-save was refused \(.*Permission denied.*\); reading it needs the NET_RAW capability/,
  );
});

test('a /proc/<pid>/ns/net pod netns: refused naming hostPID and SYS_PTRACE; allowed with SYS_PTRACE', async (t) => {
  // The pod's process keeps the runtime's default capabilities, which ipamd (drop ALL) lacks.
  const pod = spawn('unshare', ['--net', '--', 'sleep', '600'], { stdio: 'ignore' });
  t.after(() => pod.kill('SIGKILL'));
  // unshare execs sleep in its own process once the new netns exists: wait until it differs from ours.
  const pid = String(pod.pid);
  const mine = await readlink('/proc/self/ns/net');
  await waitFor('the pod process in its own netns', async () =>
    (await readlink(`/proc/${pid}/ns/net`).catch(() => mine)) !== mine ? true : undefined,
  );
  const netns = `/proc/${pid}/ns/net`;
  const check = `
    const { netnsRefusal, netnsId } = await import(${JSON.stringify(dist('ipamd/cni-exec/netns-check.js'))});
    const self = await netnsId('/proc/self/ns/net');
    const req = { selfNetns: self, podNetns: ${JSON.stringify(`pod`)}, env: { CNI_COMMAND: 'ADD', CNI_NETNS: ${JSON.stringify(netns)} } };
    out({ refusal: (await netnsRefusal(req, self)) ?? null, id: await netnsId(${JSON.stringify(netns)}) });`;
  const podId = ((await withCaps(['net_admin', 'sys_admin', 'sys_ptrace'], check)) as { id: string }).id;
  assert.match(podId, /^\d+:\d+$/, 'SYS_PTRACE opens it');
  const withId = check.replace(JSON.stringify('pod'), JSON.stringify(podId));
  const denied = (await withCaps(CHART_CAPS, withId)) as { refusal: string | null };
  assert.match(
    denied.refusal ?? '',
    new RegExp(
      `^ipamd may not open the pod netns: CNI_NETNS ${netns.replaceAll('/', '\\/')} was refused \\((EACCES|EPERM)\\); .* needs the eni-ipam DaemonSet with hostPID: true and the SYS_PTRACE capability`,
    ),
  );
  assert.deepEqual(await withCaps([...CHART_CAPS, 'sys_ptrace'], withId), { refusal: null, id: podId });
});
