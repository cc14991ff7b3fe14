/**
 * docs/design.md#9-restore-sources-and-the-nothing-lost-check, the seed outage (F1) and its sibling, against a real containerd: ipamd
 * restarts while the container runtime and the Kubernetes API cannot be read. Nothing
 * may be released to EC2 while any source is unreadable (docs/design.md#4-restore-after-restart rules 2-3), ADDs are
 * still served from addresses no live pod holds, and once the sources answer again every
 * running sandbox is rebuilt and the freeze lifts. Each test ends with the "nothing lost"
 * check. Needs root and `scripts/ensure-deps.sh --containerd`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, symlink } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { createContainerdNode, type ContainerdNode, type RunningPod } from '../../kit/containerd-node.js';
import { releaseCallsSince } from '../../kit/nothing-lost.js';
import { ipamdLog } from '../helpers/restore-logs.js';
import { FIRST_PASS_WAIT_MS } from '../../ipamd/restore/evidence.js';
import { waitFor } from '../../kit/wait.js';

/** Device number of the ENI that holds `ip` in the simulated EC2. */
function deviceOf(n: ContainerdNode, ip: string): number | undefined {
  for (const e of n.sim.state.enis.values()) if (e.secondaryIps.includes(ip)) return e.attachment?.deviceIndex;
  return undefined;
}

/** Runs `count` pods named `<prefix>-<i>` through the CRI, `parallel` at a time. */
async function runPods(n: ContainerdNode, prefix: string, count: number, parallel = 4): Promise<RunningPod[]> {
  const out: RunningPod[] = [];
  for (let i = 0; i < count; i += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - i) }, (_, k) => n.runPod(`${prefix}-${i + k}`));
    out.push(...(await Promise.all(batch)));
  }
  return out;
}

test('F1, the seed outage: no checkpoint, CRI socket dead, API server hanging → nothing released, ADD served, all 12 rebuilt', async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '2' } });
  t.after(() => n.close());

  // 12 live sandboxes; m5.large holds 9 secondary IPs per ENI, so they span device 0 and 1.
  const pods = await runPods(n, 'web', 12);
  const devices = new Set(pods.map((p) => deviceOf(n, p.ip)));
  assert.deepEqual(
    [...devices].sort(),
    [0, 1],
    `pods span ENIs by device number: ${JSON.stringify(pods.map((p) => [p.ip, deviceOf(n, p.ip)]))}`,
  );
  assert.equal((await n.status()).counts.assigned, 12);

  // The outage: ipamd stops, the checkpoint is gone, the runtime socket path has no listener, the API server hangs.
  await n.stopIpamd();
  await rm(n.checkpoint);
  const deadSocket = path.join(n.dir, 'dead-cri.sock');
  assert.equal(existsSync(deadSocket), false);
  n.kube.setFailure('timeout');
  const callsAtRestart = n.sim.calls.length;
  await n.startIpamd({ CRI_RUNTIME_ENDPOINT: `unix://${deadSocket}` });
  assert.equal((await n.status()).releasesFrozen, true, 'frozen from the moment it serves');
  // The first evidence pass waits (≤ 5 s) for the pod list, so it may end after ipamd serves.
  const frozen = await waitFor(
    'the first evidence pass',
    async () => {
      const s = await n.status();
      return s.evidence.passes >= 1 ? s : undefined;
    },
    15_000,
    100,
  );
  assert.equal(frozen.releasesFrozen, true);
  const reasons = frozen.freezeReasons.join('\n');
  for (const source of ['checkpoint:', 'cri:', 'kube:'])
    assert.ok(
      frozen.freezeReasons.some((r) => r.startsWith(source)),
      `freeze reason ${source} in\n${reasons}`,
    );
  assert.equal(frozen.counts.assigned, 0, 'no checkpoint and no readable source: nothing is known to be assigned');
  assert.ok(
    frozen.counts.unverified >= 12,
    `every IP the ENIs held is unverified (never handed out, never released): ${JSON.stringify(frozen.counts)}`,
  );

  // ADD is still served, from an IP no live sandbox holds (the pool grows around the unverified ones).
  const late = await n.runPod('late-0');
  assert.ok(!pods.some((p) => p.ip === late.ip), `new pod got ${late.ip}, which a live pod holds`);
  // Several evidence passes under the freeze: still no release of any kind.
  const passes = (await n.status()).evidence.passes;
  await waitFor(
    '3 more evidence passes while frozen',
    async () => (await n.status()).evidence.passes >= passes + 3,
    20_000,
    100,
  );
  assert.deepEqual(
    releaseCallsSince(n.sim.calls, callsAtRestart),
    [],
    'no Unassign/Detach/Delete while the sources are unreadable',
  );
  assert.equal((await n.status()).releasesFrozen, true);

  // The sources come back: the dead path now leads to containerd, the API server answers.
  await symlink(n.criSocket, deadSocket);
  n.kube.setFailure('none');
  const lifted = await waitFor(
    'the freeze to lift',
    async () => {
      const s = await n.status();
      return s.releasesFrozen ? undefined : s;
    },
    30_000,
    100,
  );
  assert.equal(lifted.counts.unverified, 0, 'unverified IPs are resolved once every source read cleanly');
  const allocs = await n.allocations();
  for (const p of [...pods, late]) {
    const a = allocs.find((x) => x.ipv4 === p.ip);
    assert.equal(a?.containerID, p.id, `${p.name} (${p.ip}) rebuilt with its own sandbox id`);
  }
  assert.equal(allocs.length, 13);
  assert.equal(
    (await ipamdLog(n.ipamdLog, 'adopted a running sandbox the checkpoint lacked')).length,
    12,
    'the 12 sandboxes the missing checkpoint lacked were adopted',
  );
  t.diagnostic(`freeze reasons while down:\n${reasons}`);
  await n.assertNothingLost();
});

test('checkpoint present, CRI down (dead socket, then a hung one) → serving within 5 s from the checkpoint, no release until the runtime answers', async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '2' } });
  t.after(() => n.close());
  const pods = await runPods(n, 'api', 6);
  // A sandbox removed while ipamd is down: its allocation is a leak, but only a readable runtime may say so.
  await n.stopIpamd();
  const gone = pods.pop()!;
  await n.removePod(gone.id);
  const callsAtRestart = n.sim.calls.length;

  const deadSocket = path.join(n.dir, 'dead-cri.sock');
  // 5 s on a quiet node; on a loaded one the bound grows with what a bare `node -e 0` costs right now
  // (same-moment floor), so the check measures ipamd's start, not the machine's load.
  const floorMs = nodeSpawnFloorMs();
  let t0 = Date.now();
  await n.startIpamd({ CRI_RUNTIME_ENDPOINT: `unix://${deadSocket}` });
  const deadMs = Date.now() - t0;
  const boundMs = 5000 + 3 * floorMs;
  t.diagnostic(`dead CRI socket: spawn → serving ${deadMs} ms (node -e 0: ${floorMs} ms, bound ${boundMs} ms)`);
  assert.ok(deadMs < boundMs, `serving ${deadMs} ms after spawn with a dead CRI socket (bound ${boundMs} ms)`);
  let s = await waitFor(
    'the first evidence pass',
    async () => {
      const x = await n.status();
      return x.evidence.passes >= 1 ? x : undefined;
    },
    15_000,
    100,
  );
  assert.equal(s.releasesFrozen, true);
  assert.ok(
    s.freezeReasons.some((r) => r.startsWith('cri:')),
    s.freezeReasons.join('; '),
  );
  assert.equal(s.counts.assigned, 6, 'restored from the checkpoint, the removed sandbox included');
  const passes = s.evidence.passes;
  await waitFor(
    '2 more passes while the runtime is down',
    async () => (await n.status()).evidence.passes >= passes + 2,
    20_000,
    100,
  );
  assert.equal((await n.status()).counts.assigned, 6, 'no GC release while the runtime is unreadable');

  // A runtime that accepts connections and never answers (hung containerd).
  const hung = path.join(n.dir, 'hung-cri.sock');
  const conns = new Set<net.Socket>();
  const server = net.createServer((c) => {
    conns.add(c);
    c.on('error', () => undefined);
    c.on('close', () => conns.delete(c));
  });
  await new Promise<void>((resolve) => server.listen(hung, resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        for (const c of conns) c.destroy();
        server.close(() => resolve());
      }),
  );
  await n.stopIpamd();
  t0 = Date.now();
  await n.startIpamd({ CRI_RUNTIME_ENDPOINT: `unix://${hung}` });
  const hungMs = Date.now() - t0;
  t.diagnostic(`hung CRI socket: spawn → serving ${hungMs} ms`);
  s = await n.status();
  assert.equal(s.counts.assigned, 6);
  assert.equal(s.releasesFrozen, true, 'frozen from the moment it serves');
  s = await waitFor(
    'the first evidence pass (the CRI read times out after 5 s)',
    async () => {
      const x = await n.status();
      return x.evidence.passes >= 1 ? x : undefined;
    },
    15_000,
    100,
  );
  assert.ok(
    s.freezeReasons.some((r) => r.startsWith('cri:')),
    s.freezeReasons.join('; '),
  );
  // A hung runtime delays serving by at most the bounded first-pass wait, not by the CRI read's 5 s timeout
  // (spawn → serving itself depends on the machine's load; the dead-socket start above is the baseline).
  assert.ok(
    hungMs < deadMs + FIRST_PASS_WAIT_MS + 1500,
    `serving ${hungMs} ms after spawn with a CRI socket that never answers (dead socket: ${deadMs} ms)`,
  );
  const servingLine = (await ipamdLog(n.ipamdLog, 'ipamd serving')).pop() as { startupMs?: number } | undefined;
  assert.ok((servingLine?.startupMs ?? Infinity) < 5000, `ipamd's own start-up took ${servingLine?.startupMs} ms`);
  assert.deepEqual(releaseCallsSince(n.sim.calls, callsAtRestart), []);

  // The runtime is back: the leaked allocation goes (into cooldown), the live ones stay.
  await n.restartIpamd();
  await waitFor('the leaked allocation released', async () => (await n.status()).counts.assigned === 5, 20_000, 100);
  await n.assertNothingLost();
});

test('restart with a checkpoint of 50 allocations and 50 live sandboxes: time to serving', async (t) => {
  // m5.xlarge: 4 ENIs × 14 secondary IPs.
  const n = await createContainerdNode({ instanceType: 'm5.xlarge', ipamdEnv: { WARM_IP_TARGET: '4' } });
  t.after(() => n.close());
  await runPods(n, 'batch', 50, 5);
  const rounds: number[] = [];
  const logged: number[] = [];
  for (let i = 0; i < 3; i++) {
    await n.stopIpamd();
    const t0 = Date.now();
    await n.startIpamd();
    rounds.push(Date.now() - t0);
    const serving = (await ipamdLog(n.ipamdLog, 'ipamd serving')).pop() as { startupMs?: number } | undefined;
    logged.push(serving?.startupMs ?? -1);
    assert.equal((await n.status()).counts.assigned, 50, 'serving with the 50 allocations restored');
    await waitFor(
      'the first evidence pass to lift the start-up freeze',
      async () => {
        const s = await n.status();
        return s.evidence.passes >= 1 && !s.releasesFrozen;
      },
      15_000,
      100,
    );
  }
  t.diagnostic(
    `50 allocations restored: spawn → serving ms ${rounds.join(', ')}; ipamd's own startupMs ${logged.join(', ')}`,
  );
  assert.ok(Math.min(...rounds) < 5000);
  await n.assertNothingLost();
});

/** Wall time of `node -e 0` now, ms: the floor any process start pays on this machine at this moment. */
function nodeSpawnFloorMs(): number {
  const t0 = Date.now();
  spawnSync(process.execPath, ['-e', '0']);
  return Date.now() - t0;
}
