/**
 * CNI errors that mean what they say (issue 28 item 4; docs/design.md#cni-errors), end to
 * end: the native shim and the Node plugin against the real ipamd on the simulated cloud,
 * in real namespaces. A full disk under the checkpoint, ipamd stopping or killed while an
 * ADD waits, and EC2 throttling an empty pool answer code 11 with the cause; a rejected
 * checkpoint says the addresses are unverified and to run `eni-ipam audit`; a newline in
 * CNI_ARGS is code 4 naming the key. Each case ends with nothing held for the failed ADD.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { startCniNode, type CniNode } from '../helpers/cni-node.js';
import { newId, viaNode, viaShim } from '../helpers/shim-calls.js';
import { waitFor } from '../../kit/wait.js';
import type { CniOutcome } from '../../kit/cni-exec.js';

const run = promisify(execFile);

/** What an outcome answered: exit code, CNI code, msg. */
const said = (o: CniOutcome) => ({ exit: o.code, code: o.json?.code, msg: o.json?.msg, details: o.json?.details });

/** ipamd's allocations (introspection), by container id. */
async function held(n: CniNode): Promise<string[]> {
  const s = await n.d.status();
  return (s.allocations ?? []).map(
    (a: { containerID?: string; containerId?: string }) => a.containerID ?? a.containerId,
  );
}

/** Waits for a line of ipamd's log matching `re`. */
function logShows(n: CniNode, re: RegExp, timeoutMs = 20_000): Promise<boolean> {
  return waitFor(
    `ipamd log matching ${re}`,
    async () => re.test(await readFile(path.join(n.h.dir, 'ipamd.log'), 'utf8').catch(() => '')),
    timeoutMs,
  );
}

test('a control character in CNI_ARGS is refused with code 4 naming the key, by the shim and the Node plugin', async (t) => {
  const n = await startCniNode(t, 'ec', { plugin: 'shim' });
  for (const via of [viaShim, viaNode]) {
    const pod = await n.pod();
    const id = newId();
    const o = await via(n, {
      command: 'ADD',
      containerId: id,
      netns: pod.path,
      ifName: 'eth0',
      args: { K8S_POD_NAME: 'web-0', K8S_POD_NAMESPACE: 'default\nkube-system' },
    });
    const s = said(o);
    assert.equal(s.exit, 1, o.stdout);
    assert.equal(s.code, 4, o.stdout);
    assert.match(s.msg, /K8S_POD_NAMESPACE/, 'the key is named');
    assert.ok(!(await held(n)).includes(id), 'nothing assigned');
  }
});

test('a full disk under the checkpoint: ADD answers 11 naming the checkpoint, and serves again once space is back', async (t) => {
  const dir = `/tmp/eni-ipam-full-${process.pid}`;
  await mkdir(dir, { recursive: true });
  await run('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'none', dir]);
  t.after(async () => {
    await run('umount', ['-l', dir]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  const n = await startCniNode(t, 'ef', {
    plugin: 'shim',
    ipamdEnv: { ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json') },
  });
  // Fill the file system: dd stops at ENOSPC (its non-zero exit is the point).
  await run('dd', ['if=/dev/zero', `of=${dir}/fill`, 'bs=4k']).catch(() => undefined);
  let failed: CniOutcome | undefined;
  const ids: string[] = [];
  for (let i = 0; i < 20 && !failed; i++) {
    const pod = await n.pod();
    const id = newId();
    const o = await viaShim(n, { command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0' });
    if (o.code !== 0) failed = o;
    else ids.push(id);
    if (failed) assert.ok(!(await held(n)).includes(id), 'the failed ADD holds nothing');
  }
  assert.ok(failed, 'an ADD failed on the full disk');
  const s = said(failed);
  assert.equal(s.code, 11, failed.stdout);
  assert.match(s.msg, /checkpoint/, failed.stdout);
  assert.match(s.details, /checkpoint write failed/, failed.stdout);
  await rm(`${dir}/fill`);
  const pod = await n.pod();
  const again = await waitFor('an ADD served once space is back', async () => {
    const o = await viaShim(n, { command: 'ADD', containerId: newId(), netns: pod.path, ifName: 'eth0' });
    return o.code === 0 ? o : undefined;
  });
  assert.equal(again.code, 0);
});

test('a rejected checkpoint: ADD says the addresses are unverified and to run eni-ipam audit', async (t) => {
  // t3.small: 3 ENIs of 4 addresses, 9 for pods; the pool fills them all.
  const n = await startCniNode(t, 'er', {
    plugin: 'shim',
    instanceType: 't3.small',
    ipamdEnv: {
      WARM_IP_TARGET: '9',
      // No runtime to read: the evidence stays unread, as on a node whose CRI socket is wrong.
      CRI_RUNTIME_ENDPOINT: `unix:///tmp/eni-ipam-no-cri-${process.pid}.sock`,
      ENI_IPAM_ADD_WAIT_TIMEOUT: '2s',
    },
  });
  await waitFor('a full pool', async () => ((await n.d.status()).counts?.total ?? 0) >= 9);
  await n.h.ipamd!.stop(10_000);
  await writeFile(n.h.checkpoint, '{"version": 3, "not": "a checkpoint"');
  const d = await n.h.startIpamd();
  n.d = d;
  const pod = await n.pod();
  const id = newId();
  const o = await viaShim(n, { command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0' });
  const s = said(o);
  assert.equal(s.code, 11, o.stdout);
  assert.match(s.msg, /unverified/, o.stdout);
  assert.match(s.msg, /eni-ipam audit/, o.stdout);
  assert.match(s.details, /\d+ addresses .* held unverified/, o.stdout);
  assert.doesNotMatch(s.msg, /ENI limit/);
  assert.ok(!(await held(n)).includes(id));
});

test('ipamd stopped while an ADD waits for a refill: 11 saying ipamd is restarting', async (t) => {
  const n = await startCniNode(t, 'et', { plugin: 'shim', ipamdEnv: { WARM_IP_TARGET: '0', MINIMUM_IP_TARGET: '0' } });
  n.h.sim.faults.setLatency('AssignPrivateIpAddresses', 60_000);
  n.h.sim.faults.setLatency('CreateNetworkInterface', 60_000);
  t.after(() => {
    n.h.sim.faults.setLatency('AssignPrivateIpAddresses', null);
    n.h.sim.faults.setLatency('CreateNetworkInterface', null);
  });
  const pod = await n.pod();
  const adding = viaShim(n, { command: 'ADD', containerId: newId(), netns: pod.path, ifName: 'eth0' });
  await logShows(n, /ADD: pool empty: waiting for a refill/);
  void n.h.ipamd!.stop(20_000);
  const o = await adding;
  const s = said(o);
  assert.equal(s.code, 11, o.stdout);
  assert.match(s.msg, /shutting down or restarting/, o.stdout);
  assert.doesNotMatch(s.msg, /refused/, o.stdout);
});

for (const [name, via] of [
  ['the shim', viaShim],
  ['the Node plugin', viaNode],
] as const)
  test(`ipamd killed while an ADD waits for a refill: 11 from ${name}, outcome unknown, never run twice`, async (t) => {
    const n = await startCniNode(t, 'ek', {
      plugin: 'shim',
      ipamdEnv: { WARM_IP_TARGET: '0', MINIMUM_IP_TARGET: '0' },
    });
    n.h.sim.faults.setLatency('AssignPrivateIpAddresses', 60_000);
    n.h.sim.faults.setLatency('CreateNetworkInterface', 60_000);
    t.after(() => {
      n.h.sim.faults.setLatency('AssignPrivateIpAddresses', null);
      n.h.sim.faults.setLatency('CreateNetworkInterface', null);
    });
    const pod = await n.pod();
    const adding = via(n, { command: 'ADD', containerId: newId(), netns: pod.path, ifName: 'eth0' });
    await logShows(n, /ADD: pool empty: waiting for a refill/);
    await n.h.ipamd!.kill9();
    const o = await adding;
    const s = said(o);
    assert.equal(s.code, 11, o.stdout);
    assert.match(s.msg, /try again later/, o.stdout);
  });

test('EC2 throttling an empty pool: ADD answers 11 naming the throttle', async (t) => {
  const n = await startCniNode(t, 'eh', {
    plugin: 'shim',
    ipamdEnv: { WARM_IP_TARGET: '0', MINIMUM_IP_TARGET: '0', ENI_IPAM_ADD_WAIT_TIMEOUT: '3s' },
  });
  n.h.sim.faults.setThrottle('mutating', { burst: 0, refillPerSecond: 0 });
  t.after(() => n.h.sim.faults.setThrottle('mutating', null));
  const pod = await n.pod();
  const id = newId();
  const o = await viaShim(n, { command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0' });
  const s = said(o);
  assert.equal(s.code, 11, o.stdout);
  assert.match(s.msg, /throttl/i, o.stdout);
  assert.ok(!(await held(n)).includes(id));
});
