/**
 * The native shim with ipamd DOWN on a host without Node.js (docs/design.md#12-running-on-a-cluster item 1): every call
 * runs the real static shim in a private mount namespace where no `node` binary exists
 * (test/helpers/no-node.ts), inside the node netns of a CniNode (real ipamd, simulated
 * cloud, real veths). Each verb's exit code and output are asserted; the spooled DEL is
 * then applied by a real ipamd start (allocation released, host veth, route and ip rules
 * gone, the live pod untouched, no EC2 release call); ADD waits for an ipamd that comes
 * up within `ipamdWaitSeconds` and fails with code 11 after it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { versionResult } from '../../cni-plugin/result.js';
import { spoolDirFor, spoolFileName, writeSpoolEntry } from '../../ipamd/cni-exec/spool.js';
import { ipIn, ipj, startCniNode, type CniNode, type VerbCall } from '../helpers/cni-node.js';
import { releaseCallsSince } from '../../kit/nothing-lost.js';
import { NODE_STILL_PRESENT, withoutNode } from '../helpers/no-node.js';
import { pluginArgv } from '../helpers/plugin-under-test.js';
import { waitFor } from '../../kit/wait.js';

const newId = () => randomBytes(32).toString('hex');
const ipOf = (r: { ips: Array<{ address: string }> }): string => r.ips[0]!.address.split('/')[0]!;
/** The shim in a mount namespace without Node. */
const noNode = (n: CniNode, c: VerbCall) => n.call({ ...c, plugin: withoutNode(pluginArgv('shim')) });
const execSocketOf = (n: CniNode) => n.config.execSocket as string;

test('the no-node wrapper really hides node (and its check fails when nothing is hidden)', async (t) => {
  const n = await startCniNode(t, 'nn', { plugin: 'shim' });
  const seen = await n.call({ command: 'VERSION', plugin: withoutNode(pluginArgv('shim'), false) });
  assert.equal(seen.code, NODE_STILL_PRESENT, `the presence check sees the host's node: ${seen.stderr}`);
  const hidden = await noNode(n, { command: 'VERSION' });
  assert.equal(hidden.code, 0, hidden.stderr);
});

test('ipamd down, no Node on the host: VERSION, DEL (spooled), ADD, CHECK, GC, STATUS; the restarted ipamd applies the DEL', async (t) => {
  const n = await startCniNode(t, 'nd', { plugin: 'shim', ipamdEnv: { WARM_IP_TARGET: '4' } });
  const [gone, live] = [await n.pod(), await n.pod()];
  const goneAtt = { containerId: newId(), netns: gone.path, ifName: 'eth0' };
  const liveAtt = { containerId: newId(), netns: live.path, ifName: 'eth0' };
  const goneAdd = await noNode(n, { ...goneAtt, command: 'ADD' });
  const liveAdd = await noNode(n, { ...liveAtt, command: 'ADD' });
  assert.equal(goneAdd.code, 0, `${goneAdd.stdout} ${goneAdd.stderr}`);
  assert.equal(liveAdd.code, 0, liveAdd.stdout);
  const [goneIp, liveIp] = [ipOf(goneAdd.json), ipOf(liveAdd.json)];
  assert.match(await ipIn(n.node.path, ['rule']), new RegExp(`to ${goneIp.replaceAll('.', '\\.')} lookup main`));
  const callsBefore = n.h.sim.calls.length;
  await n.d.stop();
  const report: string[] = [];
  const show = (verb: string, o: { code: number; stdout: string }) =>
    report.push(`${verb}: exit ${o.code} ${o.stdout || '(no output)'}`);

  const version = await noNode(n, { command: 'VERSION', conf: { cniVersion: '0.4.0' } });
  show('VERSION', version);
  assert.deepEqual(
    [version.code, version.json],
    [0, versionResult()],
    'VERSION answered by the shim, the same list as the TS plugin',
  );

  const del = await noNode(n, { ...goneAtt, command: 'DEL', conf: { prevResult: goneAdd.json } });
  show('DEL', del);
  assert.deepEqual([del.code, del.stdout], [0, ''], del.stderr);
  assert.match(del.stderr, /ipamd is not serving .*DEL of [0-9a-f]+\/eth0 recorded in/);
  const spoolDir = spoolDirFor(execSocketOf(n));
  const entryFile = path.join(
    spoolDir,
    spoolFileName({ networkName: 'aws-cni', containerID: goneAtt.containerId, ifName: 'eth0' }),
  );
  const entry = JSON.parse(await readFile(entryFile, 'utf8'));
  assert.deepEqual(
    { ...entry, spooledAt: typeof entry.spooledAt },
    {
      version: 1,
      networkName: 'aws-cni',
      containerID: goneAtt.containerId,
      ifName: 'eth0',
      netns: gone.path,
      spooledAt: 'number',
    },
  );
  assert.ok(Math.abs(entry.spooledAt - Date.now()) < 60_000, 'spooledAt is the wall clock in ms');

  const t0 = performance.now();
  const add = await noNode(n, {
    containerId: newId(),
    netns: (await n.pod()).path,
    ifName: 'eth0',
    command: 'ADD',
    conf: { ipamdWaitSeconds: 1 },
  });
  const addMs = performance.now() - t0;
  show('ADD', add);
  assert.deepEqual([add.code, add.json?.code, add.json?.cniVersion], [1, 11, '1.1.0'], add.stdout);
  assert.match(add.json.msg, /^ipamd is not serving on \S+cni-exec\.sock \(waited 1\.\d s\), try again later$/);
  assert.ok(addMs >= 1000 && addMs < 5000, `ADD waited the bound (${Math.round(addMs)} ms)`);

  const check = await noNode(n, { ...liveAtt, command: 'CHECK', conf: { prevResult: liveAdd.json } });
  show('CHECK', check);
  assert.deepEqual([check.code, check.json?.code], [1, 11], check.stdout);
  assert.match(check.json.msg, /^ipamd is not serving on /);
  const gc = await noNode(n, { command: 'GC', conf: { 'cni.dev/valid-attachments': [] } });
  show('GC', gc);
  assert.deepEqual([gc.code, gc.json?.code], [1, 11], gc.stdout);
  const status = await noNode(n, { command: 'STATUS' });
  show('STATUS', status);
  assert.deepEqual([status.code, status.json?.code], [1, 50], status.stdout);
  assert.match(status.json.msg, /^ipamd is not serving on /);
  t.diagnostic(`ipamd down, no node:\n${report.join('\n')}`);

  // ipamd starts again: the spooled DEL is applied before the first evidence pass.
  n.d = await n.h.startIpamd();
  assert.deepEqual(
    (await readdir(spoolDir)).filter((f) => !f.startsWith('.')),
    [],
    'spool entry deleted once applied',
  );
  // The first evidence pass of a start that serves at once runs after serving: wait for its line.
  const lines = await waitFor('the first evidence pass after the restart', async () => {
    const all = (await readFile(path.join(n.h.dir, 'ipamd.log'), 'utf8'))
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; ip?: string; outcome?: string });
    const restored = all.findLastIndex((x) => x.msg === 'restored allocations from checkpoint');
    return all.some((l, i) => i > restored && l.msg === 'evidence pass') ? all : undefined;
  });
  const applied = lines.findIndex(
    (l) => l.msg.startsWith('DEL spool: applied') && l.ip === goneIp && l.outcome === 'released',
  );
  const firstPass = lines.findIndex(
    (l, i) =>
      i > lines.findLastIndex((x) => x.msg === 'restored allocations from checkpoint') && l.msg === 'evidence pass',
  );
  assert.ok(applied >= 0, 'the restarted ipamd applied the spooled DEL');
  assert.ok(
    firstPass > 0 && applied < firstPass,
    `applied (line ${applied}) before the first evidence pass (line ${firstPass})`,
  );
  const allocs = (await (await fetch(`http://127.0.0.1:${n.d.introspectionPort}/v1/allocations`)).json()) as Array<{
    containerID: string;
    ipv4: string;
  }>;
  assert.deepEqual(
    allocs.map((a) => [a.containerID, a.ipv4]),
    [[liveAtt.containerId, liveIp]],
    'only the live pod holds an IP',
  );
  // The host side of the spooled DEL is gone, the live pod's is intact.
  const links = (await ipj(n.node.path, ['link', 'show', 'type', 'veth'])).map((l: { ifname: string }) => l.ifname);
  assert.deepEqual(links, [liveAdd.json.interfaces[0].name], "only the live pod's host veth is left");
  const rules = await ipIn(n.node.path, ['rule']);
  assert.equal(rules.includes(goneIp), false, "the spooled pod's ip rules are gone");
  assert.match(rules, new RegExp(`to ${liveIp.replaceAll('.', '\\.')} lookup main`), "the live pod's rule is kept");
  assert.match(
    await ipIn(n.node.path, ['route']),
    new RegExp(`${liveIp.replaceAll('.', '\\.')} dev ${liveAdd.json.interfaces[0].name}`),
  );
  assert.match(
    await ipIn(live.path, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']),
    new RegExp(`inet ${liveIp.replaceAll('.', '\\.')}/32`),
  );
  // Nothing lost: no EC2 release call, the live pod keeps its IP, no IP twice, and it serves again.
  assert.deepEqual(releaseCallsSince(n.h.sim.calls, callsBefore), []);
  const again = await noNode(n, { ...liveAtt, command: 'CHECK', conf: { prevResult: liveAdd.json } });
  assert.deepEqual([again.code, again.stdout], [0, ''], again.stdout);
  const status2 = await noNode(n, { command: 'STATUS' });
  assert.equal(status2.code, 0, status2.stdout);
  const s = await n.d.status();
  assert.equal(s.counts.assigned, 1);
});

test('ADD waits for an ipamd that comes up within ipamdWaitSeconds; a repeated DEL while down rewrites one spool file', async (t) => {
  const n = await startCniNode(t, 'nw', { plugin: 'shim' });
  await n.d.stop();
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const adding = noNode(n, { ...att, command: 'ADD', conf: { ipamdWaitSeconds: 60 } });
  // Not a wait on a state we can see: ipamd must come up after the shim began retrying its connect (its exit is asserted below).
  await new Promise((r) => setTimeout(r, 500));
  n.d = await n.h.startIpamd();
  const add = await adding;
  assert.equal(add.code, 0, `${add.stdout} ${add.stderr}`);
  const ip = ipOf(add.json);
  assert.match(
    await ipIn(pod.path, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']),
    new RegExp(`inet ${ip.replaceAll('.', '\\.')}/32`),
  );
  await n.d.stop();
  for (let i = 0; i < 2; i++) {
    const del = await noNode(n, { ...att, command: 'DEL' });
    assert.deepEqual([del.code, del.stdout], [0, ''], del.stderr);
  }
  const spoolDir = spoolDirFor(execSocketOf(n));
  assert.deepEqual(await readdir(spoolDir), [
    spoolFileName({ networkName: 'aws-cni', containerID: att.containerId, ifName: 'eth0' }),
  ]);
  n.d = await n.h.startIpamd();
  await waitFor('spool applied', async () => (await readdir(spoolDir)).length === 0);
  assert.equal((await n.d.status()).counts.assigned, 0);
});

test('DEL with ipamd down and bad input: the shim validates what the spool needs, with the CNI codes', async (t) => {
  const n = await startCniNode(t, 'nv', { plugin: 'shim' });
  await n.d.stop();
  const att = { containerId: newId(), netns: '/var/run/netns/nope', ifName: 'eth0' };
  const cases: Array<[VerbCall, number, RegExp]> = [
    [{ ...att, command: 'DEL', rawConfig: 'not json' }, 6, /failed to decode/],
    [{ ...att, command: 'DEL', conf: { cniVersion: '9.9.9' } }, 1, /unsupported cniVersion/],
    [{ ...att, command: 'DEL', conf: { name: 'bad name' } }, 7, /invalid network configuration/],
    [{ ...att, containerId: '../x', command: 'DEL' }, 4, /invalid CNI_CONTAINERID/],
    [{ ...att, containerId: '', command: 'DEL' }, 4, /missing CNI_CONTAINERID/],
  ];
  for (const [c, code, msg] of cases) {
    const o = await noNode(n, c);
    assert.deepEqual([o.code, o.json?.code], [1, code], `${JSON.stringify(c)}: ${o.stdout}`);
    assert.match(o.json.msg, msg);
  }
  await assert.rejects(
    readdir(spoolDirFor(execSocketOf(n))).then((l) => {
      if (l.length === 0) throw new Error('empty');
    }),
    'nothing spooled for refused input',
  );
});

test('a DEL spooled while ipamd runs (the window where its socket refused) is applied without a restart', async (t) => {
  const n = await startCniNode(t, 'nr', { plugin: 'shim' });
  const pod = await n.pod();
  const att = { containerId: newId(), netns: pod.path, ifName: 'eth0' };
  const add = await noNode(n, { ...att, command: 'ADD' });
  assert.equal(add.code, 0, add.stdout);
  const ip = ipOf(add.json);
  await writeSpoolEntry(spoolDirFor(execSocketOf(n)), {
    networkName: 'aws-cni',
    containerID: att.containerId,
    ifName: 'eth0',
    netns: pod.path,
    spooledAt: Date.now(),
  });
  await waitFor(
    'the running ipamd applied the spooled DEL',
    async () => (await n.d.status()).counts.assigned === 0,
    10_000,
  );
  await waitFor('spool emptied', async () => (await readdir(spoolDirFor(execSocketOf(n)))).length === 0, 5000);
  assert.deepEqual(await ipj(n.node.path, ['link', 'show', 'type', 'veth']), [], 'host veth (and its route) gone');
  assert.equal((await ipIn(n.node.path, ['rule'])).includes(ip), false, 'ip rules gone');
});
