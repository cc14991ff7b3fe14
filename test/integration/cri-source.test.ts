/**
 * ipamd's CRI restore source (ipamd/restore/cri-source.ts) against a real containerd
 * 1.6 with the CRI plugin, running in its own node network namespace with Debian's
 * `ptp` + `host-local` CNI plugins, plus the failure modes that must surface as
 * CriUnavailableError (missing socket, a server that never answers) and the endpoint
 * detection rules. Needs root and `scripts/ensure-deps.sh --containerd`.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { promisify } from 'node:util';
import { CriSource, CriUnavailableError, detectCriEndpoint } from '../../ipamd/restore/cri-source.js';
import { startContainerd, type Containerd } from '../../kit/containerd.js';
import { CriTestClient } from '../../kit/cri-client.js';

const run = promisify(execFile);
const CNI_PLUGIN_DIR = '/usr/lib/cni';
const POD_SUBNET = '10.233.7.0/24';

/** Runs cleanup steps last-registered-first, continuing past failures; rethrows the first. */
function cleanupStack(t: { after(fn: () => Promise<void>): void }): (fn: () => Promise<unknown> | unknown) => void {
  const steps: (() => Promise<unknown> | unknown)[] = [];
  t.after(async () => {
    let first: unknown;
    for (const s of steps.reverse()) {
      try {
        await s();
      } catch (e) {
        first ??= e;
      }
    }
    if (first) throw first;
  });
  return (fn) => {
    steps.push(fn);
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

test('detectCriEndpoint: configured endpoint, probing order, default', () => {
  const none = (): boolean => false;
  assert.deepEqual(detectCriEndpoint('unix:///run/k3s/containerd/containerd.sock', none), {
    endpoint: 'unix:///run/k3s/containerd/containerd.sock',
    detected: false,
  });
  assert.deepEqual(detectCriEndpoint('/var/run/crio/crio.sock', none), {
    endpoint: 'unix:///var/run/crio/crio.sock',
    detected: false,
  });
  // Configured wins even when a well-known socket exists.
  assert.deepEqual(
    detectCriEndpoint('/x/y.sock', () => true),
    { endpoint: 'unix:///x/y.sock', detected: false },
  );
  // Probing order: containerd, CRI-O, cri-dockerd.
  assert.deepEqual(
    detectCriEndpoint(undefined, () => true),
    { endpoint: 'unix:///run/containerd/containerd.sock', detected: true },
  );
  assert.deepEqual(
    detectCriEndpoint(undefined, (p) => p === '/var/run/crio/crio.sock'),
    { endpoint: 'unix:///var/run/crio/crio.sock', detected: true },
  );
  assert.deepEqual(
    detectCriEndpoint('', (p) => p === '/var/run/cri-dockerd.sock'),
    { endpoint: 'unix:///var/run/cri-dockerd.sock', detected: true },
  );
  // Nothing found: containerd default, not detected.
  assert.deepEqual(detectCriEndpoint(undefined, none), {
    endpoint: 'unix:///run/containerd/containerd.sock',
    detected: false,
  });
  assert.throws(() => detectCriEndpoint('tcp://127.0.0.1:1234', none), TypeError);
  assert.throws(() => detectCriEndpoint('relative.sock', none), TypeError);
});

test('CriSource: unreadable runtime throws CriUnavailableError within the deadline', async (t) => {
  const later = cleanupStack(t);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-cri-fail-'));
  later(() => rm(dir, { recursive: true, force: true }));

  await t.test('missing socket', async () => {
    const src = new CriSource({ endpoint: `unix://${path.join(dir, 'missing.sock')}` });
    const t0 = Date.now();
    await assert.rejects(src.listReadySandboxes(), CriUnavailableError);
    assert.ok(Date.now() - t0 < 1000, 'a missing socket fails fast');
    src.close();
  });

  await t.test('timeoutMs is capped at 5000', () => {
    assert.equal(new CriSource({ endpoint: '/x.sock', timeoutMs: 60_000 }).timeoutMs, 5000);
    assert.equal(new CriSource({ endpoint: '/x.sock' }).timeoutMs, 5000);
    assert.equal(new CriSource({ endpoint: '/x.sock', timeoutMs: 250 }).timeoutMs, 250);
  });

  await t.test('server accepts and never answers', async () => {
    const sockPath = path.join(dir, 'silent.sock');
    const conns = new Set<net.Socket>();
    const server = net.createServer((c) => {
      conns.add(c);
      c.on('error', () => undefined);
      c.on('close', () => conns.delete(c));
    });
    await new Promise<void>((resolve) => server.listen(sockPath, resolve));
    later(
      () =>
        new Promise<void>((resolve) => {
          for (const c of conns) c.destroy();
          server.close(() => resolve());
        }),
    );

    const src = new CriSource({ endpoint: sockPath });
    const t0 = Date.now();
    const err = await src.listReadySandboxes().then(
      () => undefined,
      (e: unknown) => e,
    );
    const ms = Date.now() - t0;
    src.close();
    assert.ok(err instanceof CriUnavailableError, `expected CriUnavailableError, got ${String(err)}`);
    assert.equal(err.code, 'DEADLINE_EXCEEDED');
    assert.ok(conns.size > 0 || ms > 0, 'the client did connect');
    // The deadline, not a hang: never before it; after it within a margin a loaded machine keeps.
    assert.ok(ms >= 4500 && ms <= 15_000, `failed after ${ms} ms (deadline 5000 ms)`);
  });
});

test('CriSource against a real containerd with ptp + host-local', async (t) => {
  const later = cleanupStack(t);
  const base = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-cri-'));
  later(() => rm(base, { recursive: true, force: true }));

  // The node: its own network namespace, so ptp's veths and sysctls stay off the host.
  const nodeNs = `eni-cri-${process.pid}`;
  await run('ip', ['netns', 'add', nodeNs]);
  later(() => run('ip', ['netns', 'del', nodeNs]));
  await run('ip', ['-n', nodeNs, 'link', 'set', 'lo', 'up']);

  // CNI: Debian's plugins in a private bin dir, conflist installed by write-temp + rename in the same dir.
  const cniBinDir = path.join(base, 'cni', 'bin');
  const cniConfDir = path.join(base, 'cni', 'conf');
  await mkdir(cniBinDir, { recursive: true });
  await mkdir(cniConfDir, { recursive: true });
  for (const p of ['loopback', 'ptp', 'host-local']) {
    assert.ok(
      existsSync(path.join(CNI_PLUGIN_DIR, p)),
      `${CNI_PLUGIN_DIR}/${p} missing: run scripts/ensure-deps.sh --containerd`,
    );
    await symlink(path.join(CNI_PLUGIN_DIR, p), path.join(cniBinDir, p));
  }
  const conflist = {
    cniVersion: '0.4.0',
    name: 'cri-source-test',
    plugins: [
      {
        type: 'ptp',
        ipMasq: false,
        mtu: 9001,
        ipam: {
          type: 'host-local',
          dataDir: path.join(base, 'cni', 'ipam'),
          ranges: [[{ subnet: POD_SUBNET }]],
          routes: [{ dst: '0.0.0.0/0' }],
        },
      },
    ],
  };
  const tmp = path.join(cniConfDir, '.10-test.conflist.tmp');
  await writeFile(tmp, JSON.stringify(conflist, null, 2));
  await rename(tmp, path.join(cniConfDir, '10-test.conflist'));

  const ctrd: Containerd = await startContainerd({
    baseDir: path.join(base, 'containerd'),
    nodeNetnsPath: `/var/run/netns/${nodeNs}`,
    cniBinDir,
    cniConfDir,
  });
  later(() => ctrd.stop());
  const cri = new CriTestClient(ctrd.socket);
  later(() => cri.close());
  const source = new CriSource({ endpoint: `unix://${ctrd.socket}` });
  later(() => source.close());

  const pods = [0, 1, 2].map((i) => ({
    name: `web-${i}`,
    namespace: 'shop',
    uid: `00000000-0000-4000-8000-00000000000${i}`,
  }));
  const ids: string[] = [];
  const runMs: number[] = [];
  const netnsPaths: string[] = [];

  await t.test('RunPodSandbox x3', async () => {
    for (const p of pods) {
      const t0 = process.hrtime.bigint();
      ids.push(await cri.runPodSandbox(p));
      runMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    t.diagnostic(
      `RunPodSandbox (ptp + host-local) ms: ${runMs.map((m) => m.toFixed(1)).join(', ')}; median ${median(runMs).toFixed(1)}`,
    );
  });

  await t.test('listReadySandboxes returns the 3 sandboxes with pod labels and IPs', async () => {
    const got = await source.listReadySandboxes();
    assert.deepEqual(got.map((s) => s.id).sort(), [...ids].sort());
    for (const [i, p] of pods.entries()) {
      const s = got.find((x) => x.id === ids[i]);
      assert.ok(s);
      assert.equal(s.podName, p.name);
      assert.equal(s.podNamespace, p.namespace);
      assert.equal(s.podUid, p.uid);
      assert.match(s.createdAtNs ?? '', /^[1-9]\d{15,}$/);
      // The IP must be the one really configured on eth0 inside the pod's netns.
      const ns = await cri.netnsPath(s.id);
      assert.ok(ns && ns.startsWith('/var/run/netns/cni-'), `netns path ${ns}`);
      netnsPaths.push(ns);
      const { stdout } = await run('ip', ['-n', path.basename(ns), '-4', '-o', 'addr', 'show', 'dev', 'eth0']);
      const onEth0 = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(stdout)?.[1];
      assert.ok(s.ip, 'sandbox has an IP');
      assert.equal(s.ip, onEth0);
      assert.ok(s.ip.startsWith('10.233.7.'), `IP ${s.ip} in ${POD_SUBNET}`);
    }
    assert.equal(new Set(got.map((s) => s.ip)).size, 3, 'distinct IPs');
  });

  await t.test('a stopped sandbox is no longer listed', async () => {
    await cri.stopPodSandbox(ids[1]!);
    const got = await source.listReadySandboxes();
    assert.deepEqual(got.map((s) => s.id).sort(), [ids[0]!, ids[2]!].sort());
    // Still known to the runtime, as NOTREADY.
    const all = await cri.listPodSandbox();
    assert.equal(all.find((s) => s.id === ids[1])?.state, 'SANDBOX_NOTREADY');
    await cri.removePodSandbox(ids[1]!);
    assert.deepEqual((await source.listReadySandboxes()).map((s) => s.id).sort(), [ids[0]!, ids[2]!].sort());
  });

  await t.test('a host-network sandbox is listed without a pod IP', async () => {
    const hostId = await cri.runPodSandbox({
      name: 'node-agent',
      namespace: 'kube-system',
      uid: 'host-1',
      hostNetwork: true,
    });
    const got = await source.listReadySandboxes();
    const h = got.find((s) => s.id === hostId);
    assert.ok(h);
    assert.equal(h.podName, 'node-agent');
    assert.equal(h.ip, undefined);
    assert.equal(got.length, 3);
  });

  await t.test('stop() removes sandboxes, processes, netns and the base dir', async () => {
    await ctrd.stop();
    assert.equal(existsSync(path.join(base, 'containerd')), false, 'base dir removed');
    for (const ns of netnsPaths) assert.equal(existsSync(ns), false, `${ns} removed`);
    let alive = true;
    try {
      process.kill(ctrd.pid, 0);
    } catch {
      alive = false;
    }
    assert.equal(alive, false, 'containerd exited');
    const { stdout } = await run('ps', ['-eo', 'args']);
    assert.ok(!stdout.includes(ctrd.socket), 'no shim of this containerd left');
    // And the source now reports the runtime as unreadable, not as "no pods".
    await assert.rejects(source.listReadySandboxes(), CriUnavailableError);
  });
});
