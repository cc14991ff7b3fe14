/**
 * cni-plugin/ip-batch.ts's streamed `ip -batch` (openIpStream, what ADD feeds before and
 * after ipamd's answer) and ipamd's spawn helper (ipamd/cni-exec/spawn-helper.ts), on
 * real iproute2 inside throw-away named namespaces (nothing on the host changes): lines
 * run as they are sent, a barrier confirms them, a failing line ends the process with
 * iproute2's message, a netns that cannot be entered fails, and the helper gives the
 * same outcomes as spawning in the main thread; one helper serves every user in a process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { IpBatchError, LOCAL_IP, createIpRunner, executablePath, type IpRunner } from '../../netfacts/ip-batch.js';
import { ipShow } from '../../netfacts/ip-query.js';
import { createNamedNetns } from '../../kit/netns.js';
import { acquireSpawnHelper, startSpawnHelper } from '../../ipamd/cni-exec/spawn-helper.js';

const links = async (ns: string): Promise<string[]> =>
  JSON.parse((await promisify(execFile)('ip', ['-n', ns.split('/').pop()!, '-j', 'link', 'show'])).stdout).map(
    (l: { ifname: string }) => l.ifname,
  );

/** The scenarios, run once per way of spawning (`ip`: the runner under test). */
async function scenarios(tag: string, ip: IpRunner): Promise<void> {
  const ns = await createNamedNetns(`ipstream-${tag}-${process.pid}`);
  try {
    // Lines run while stdin stays open; the barrier confirms them before end().
    const s = ip.openIpStream(ns.path);
    s.write(['link add name d0 type veth peer name d0p']);
    await s.barrier();
    assert.ok((await links(ns.path)).includes('d0'), 'd0 exists once the barrier resolved, before end()');
    s.write(['link add name d1 type veth peer name d1p']);
    await s.barrier();
    await s.end(['link set dev d1 up']);
    const [addr] = await ipShow(['link show dev d1'], ns.path, ip);
    assert.match(String((addr![0] as { flags: string[] }).flags), /UP/);

    // A failing line ends the process: the barrier and end() reject with iproute2's message.
    const f = ip.openIpStream(ns.path);
    f.write(['link add name d0 type veth peer name d0p']); // exists
    await assert.rejects(f.barrier(), (e: unknown) => e instanceof IpBatchError && /File exists/.test(e.stderr));
    await assert.rejects(f.end(['link add name d9 type veth peer name d9p']), IpBatchError);
    assert.ok(!(await links(ns.path)).includes('d9'), 'nothing after the failing line ran');

    // A netns path that cannot be entered.
    const g = ip.openIpStream(`/var/run/netns/absent-${process.pid}`);
    await assert.rejects(g.barrier(), IpBatchError);
    await assert.rejects(g.end(), IpBatchError);

    // One-shot batches go the same way.
    await ip.ipBatch(['link del dev d0'], ns.path);
    await assert.rejects(
      ip.ipBatch(['link del dev d0'], ns.path),
      (e: unknown) => e instanceof IpBatchError && /Cannot find device/.test(e.stderr),
    );
  } finally {
    await ns.remove();
  }
}

test('ip and nsenter are spawned by absolute path; an unknown name is left to the PATH lookup', () => {
  for (const n of ['ip', 'nsenter']) assert.match(executablePath(n), new RegExp(`^/.*/${n}$`));
  assert.equal(executablePath(`no-such-tool-${process.pid}`), `no-such-tool-${process.pid}`);
});

test('openIpStream: lines run as sent, barriers, failures (main thread)', async () => {
  await scenarios('main', LOCAL_IP);
});

test('the spawn helper gives the same outcomes and hands spawning back when stopped', async () => {
  const h = startSpawnHelper();
  const ip = createIpRunner(h.spawner);
  try {
    await scenarios('helper', ip);
    assert.equal(h.running, 0, 'no child left running');
  } finally {
    await h.stop();
  }
  await scenarios('after', ip); // the same runner, its helper stopped: spawns from this thread
});

test('one spawn helper per process: shared by its users, ended by the last, replaced once ended', async () => {
  const a = acquireSpawnHelper();
  const b = acquireSpawnHelper();
  assert.equal(a.spawner, b.spawner, 'the second user gets the same helper');
  await a.stop();
  await a.stop(); // a second stop of the same handle does not count twice
  assert.match((await createIpRunner(b.spawner).runIp(['-V'], [], undefined, true)).stdout, /iproute2/);
  await b.stop();
  const c = acquireSpawnHelper();
  try {
    assert.notEqual(c.spawner, b.spawner, 'a new helper after the last one ended');
    assert.match((await createIpRunner(c.spawner).runIp(['-V'], [], undefined, true)).stdout, /iproute2/);
  } finally {
    await c.stop();
  }
});
