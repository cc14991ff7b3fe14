/**
 * The DaemonSet end to end in containerd (docs/design.md#12-running-on-a-cluster item 5): ipamd runs from the image
 * `npm run image` built, in the pod `helm template` renders (command, env, capabilities,
 * mounts and probes read from the rendered manifest, never written here), on a node
 * whose mount namespace has no Node.js. The simulated cloud is reached through env added
 * with the chart's `extraEnv` at render time. See containerd-ds-node.ts for the node and
 * daemonset-node.ts for how the pod is run (kubelet's part, through the CRI).
 *
 * Second test (docs/design.md#12-running-on-a-cluster item 6): the same DaemonSet taking over a node from aws-node
 * (its 10-aws.conflist, plugin stand-in, ENI and checkpoint in /var/run/aws-node).
 *
 * The image is built first if needed (`npm run image`'s build.mjs, a no-op when up to
 * date; ENI_IPAM_IMAGE_ARCHIVE names another archive). Skipped (with the reason) only
 * when no helm binary is installed. Run under `flock /tmp/eni-ipam-containerd.lock`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ipIn, tcpSendFrom } from '../kit/netns.js';
import {
  awsConflist,
  awsNodeCheckpoint,
  installAwsCniStandIn,
  leaveEnisAsAwsNode,
  parseAdds,
} from '../helpers/aws-cni-standin.js';
import { createDsNode, type DsNode } from '../helpers/containerd-ds-node.js';
import { runDaemonSetPod, waitProbe, type DaemonSetPod } from '../helpers/daemonset-node.js';
import { findDaemonSet, type K8sDaemonSet } from '../helpers/daemonset-pod.js';
import { findLosses } from '../helpers/nothing-lost.js';
import { HELM, renderChart } from '../helpers/helm.js';
import { ensureImageArchive } from '../helpers/image-archive.js';
import { waitFor } from '../helpers/wait.js';

const PODS = 20;
const ECHO_PORT = 8080;

const skip = !existsSync(HELM) ? 'no helm binary: bash scripts/ensure-helm.sh' : false;

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Renders the chart for node `n`: the image under test, the simulated cloud and short loops via extraEnv. */
async function render(n: DsNode): Promise<K8sDaemonSet> {
  const ref = n.imageRef;
  const colon = ref.lastIndexOf(':');
  const values = {
    image: { repository: ref.slice(0, colon), tag: ref.slice(colon + 1), pullPolicy: 'Never' },
    extraEnv: Object.entries({
      ...n.cloudEnv,
      ENI_IPAM_POOL_INTERVAL: '200ms',
      ENI_IPAM_GC_INTERVAL: '1s',
      ENI_IPAM_GC_GRACE: '2s',
    }).map(([name, value]) => ({ name, value })),
  };
  return findDaemonSet(await renderChart(values));
}

/** One "nothing lost" pass: every live pod kept its IP (CRI and eth0), no IP twice, EC2 agrees, ipamd holds exactly the live pods. */
async function nothingLost(n: DsNode, ipAtStart: Map<string, string>): Promise<{ live: number; assigned: number }> {
  const before = (await n.status()).evidence.passes;
  const since = Date.now() + 2050; // ENI_IPAM_GC_GRACE after the last change
  let last: Awaited<ReturnType<DsNode['status']>> | undefined;
  await waitFor(
    'a GC pass after the grace',
    async () => {
      const s = (last = await n.status());
      return s.evidence.passes > before && (s.evidence.lastPassAt ?? 0) >= since && s.evidence.lastPass?.canRelease;
    },
    30_000,
    200,
  ).catch((e: Error) => {
    throw new Error(
      `${e.message}; releases frozen: ${JSON.stringify(last?.freezeReasons ?? null)}; last pass: ${JSON.stringify(last?.evidence.lastPass ?? null)}`,
    );
  });
  const live = await n.cri.liveSandboxes();
  const ipInNetns = new Map<string, string | undefined>();
  for (const sb of live) {
    const ns = await n.cri.netnsPath(sb.id);
    const out = ns ? await ipIn(ns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']).catch(() => '') : '';
    ipInNetns.set(sb.id, /inet (\d+\.\d+\.\d+\.\d+)\/32/.exec(out)?.[1]);
  }
  const allocations = await n.allocations();
  const losses = findLosses({
    live,
    ipAtStart,
    ipInNetns,
    sim: n.sim.state,
    calls: n.sim.calls,
    instanceId: n.instanceId,
    allocations,
  });
  assert.deepEqual(losses, [], `nothing-lost check (${live.length} live):\n${losses.join('\n')}`);
  const s = await n.status();
  assert.equal(s.counts.assigned, live.length, 'assigned == live after one GC pass');
  return { live: live.length, assigned: s.counts.assigned };
}

/** Spool entries (files, not temp files) the shim left in the run dir. */
function spooled(n: DsNode): string[] {
  const dir = n.host('/run/eni-ipam/del-spool');
  return existsSync(dir) ? readdirSync(dir).filter((f) => !f.startsWith('.')) : [];
}

test(
  'the rendered DaemonSet runs ipamd in containerd on a node without Node.js: install, 20 pods, rolling update, probes',
  { skip, timeout: 480_000 },
  async (t) => {
    const n = await createDsNode({ imageArchive: await ensureImageArchive() });
    t.after(() => n.close());
    const ds = await render(n);
    const c0 = ds.spec.template.spec.containers[0]!;
    t.diagnostic(
      `image ${n.imageRef}; container ${c0.name}: ${JSON.stringify([...(c0.command ?? []), ...(c0.args ?? [])])}`,
    );

    // The node has no Node.js: not in its mount namespace, not for containerd (which execs the CNI plugin).
    assert.equal((await n.mountNs.exec(['sh', '-c', 'command -v node nodejs || echo none'])).trim(), 'none');
    for (const d of n.mountNs.hiddenNodeDirs)
      assert.equal(existsSync(`/proc/${n.containerd.pid}/root${d}/node`), false, `containerd sees no ${d}/node`);
    assert.deepEqual(readdirSync(n.host('/etc/cni/net.d')), [], 'no conflist before the DaemonSet runs');

    const podId = (name: string) => ({
      name,
      namespace: ds.metadata.namespace ?? 'kube-system',
      uid: randomUUID(),
      nodeName: n.nodeName,
      hostIP: n.nodeIp,
    });
    const dsRun = (name: string): Promise<DaemonSetPod> =>
      runDaemonSetPod({
        cri: n.cri,
        ds,
        id: podId(name),
        node: n.mountNs,
        logRoot: `${n.dir}/pod-logs`,
        passthrough: ['/run/netns'],
      });
    let ipamdPod = await dsRun('eni-ipam-aaaaa');
    t.after(() => ipamdPod.remove().catch(() => undefined));
    await waitProbe(ipamdPod, 'readinessProbe', (c) => c === 0, 60_000);
    const live0 = await ipamdPod.probe('livenessProbe');
    assert.equal(live0.exitCode, 0, `liveness against the serving container: ${JSON.stringify(live0)}`);
    t.diagnostic(`probes (serving): readiness 0, liveness ${live0.exitCode}: ${JSON.stringify(live0.command)}`);

    // ipamd installed the plugin and the conflist into the node's CNI dirs.
    const confs = await waitFor(
      'a conflist in /etc/cni/net.d',
      () => {
        const f = readdirSync(n.host('/etc/cni/net.d')).filter((x) => !x.startsWith('.'));
        return f.length ? f : undefined;
      },
      30_000,
      100,
    );
    const conflist = JSON.parse(await readFile(n.host(`/etc/cni/net.d/${confs[0]}`), 'utf8')) as {
      name: string;
      plugins: Array<{ type: string }>;
    };
    const type = conflist.plugins[0]!.type;
    assert.ok(existsSync(n.host(`/opt/cni/bin/${type}`)), `the plugin ${type} is in /opt/cni/bin`);
    t.diagnostic(
      `installed: /etc/cni/net.d/${confs.join(', ')}; /opt/cni/bin: ${readdirSync(n.host('/opt/cni/bin')).join(', ')}`,
    );

    // 20 pods through containerd; each reaches the node over TCP.
    await n.startEchoServer(ECHO_PORT);
    const ipAtStart = new Map<string, string>();
    const pods = new Map<string, string>(); // sandbox id → name
    // kubelet's part for a workload pod: RunPodSandbox, then the pod is published with its IP.
    const runPod = async (name: string, uid = randomUUID()): Promise<string> => {
      const id = await n.cri.runPodSandbox({ name, namespace: 'default', uid });
      const ip = (await n.cri.podSandboxStatus(id)).status?.network?.ip ?? '';
      assert.match(ip, /^10\.0\.0\.\d+$/, `${name} got an IPv4 from the subnet`);
      ipAtStart.set(id, ip);
      pods.set(id, name);
      n.kube.upsertPod({ namespace: 'default', name, uid, nodeName: n.nodeName, podIP: ip, containerID: id });
      return id;
    };
    const ids = await mapLimit(
      Array.from({ length: PODS }, (_, i) => `web-${i}`),
      5,
      (name) => runPod(name),
    );
    assert.equal(new Set(ids.map((id) => ipAtStart.get(id))).size, PODS, 'distinct IPs');
    for (const id of ids) {
      const ns = await n.cri.netnsPath(id);
      await tcpSendFrom(ns!, n.nodeIp, ECHO_PORT, pods.get(id)!);
    }
    t.diagnostic(`${PODS} pods got IPs and reached ${n.nodeIp}:${ECHO_PORT} over TCP`);
    await nothingLost(n, ipAtStart);

    // Rolling update: the old ipamd container stops; its probes now fail (run from an idle
    // container of the same rendered spec, since an exited container cannot exec).
    const runner = await ipamdPod.startProbeRunner();
    await ipamdPod.stopContainers();
    const stoppedProbes = {
      readiness: (await ipamdPod.probe('readinessProbe', { inContainer: runner })).exitCode,
      liveness: (await ipamdPod.probe('livenessProbe', { inContainer: runner })).exitCode,
    };
    assert.notEqual(stoppedProbes.readiness, 0, 'readiness fails while ipamd is stopped');
    assert.notEqual(stoppedProbes.liveness, 0, 'liveness fails while ipamd is stopped');

    // While it is down: 5 pods deleted (their DELs succeed and are spooled) and 3 started (their ADDs wait).
    const gone = ids.slice(0, 5);
    for (const id of gone) {
      n.kube.deletePod('default', pods.get(id)!);
      await n.cri.stopPodSandbox(id);
      await n.cri.removePodSandbox(id);
      ipAtStart.delete(id);
      pods.delete(id);
    }
    const spooledWhileDown = spooled(n).length;
    assert.equal(spooledWhileDown, 5, `5 DELs spooled: ${spooled(n).join(', ')}`);
    // ADDs while it is down. The first outlasts the shim's bound (default 10 s) for sure:
    // it must fail with CNI code 11, and kubelet's retry (a new RunPodSandbox) must succeed
    // once the new ipamd serves. The other two start just before the new pod and wait.
    const outcomes = { waited: 0, failed11: 0, retried: 0 };
    let markReady: () => void = () => undefined;
    const newIpamdReady = new Promise<void>((r) => {
      markReady = r;
    });
    const addDone = new Map<string, number>();
    const add = async (name: string): Promise<string> => {
      const uid = randomUUID();
      try {
        const id = await runPod(name, uid);
        addDone.set(id, Date.now());
        return id;
      } catch (e) {
        const msg = (e as Error).message;
        assert.match(msg, /not serving/i, `an ADD that outlasts the bound fails naming ipamd: ${msg}`);
        outcomes.failed11++;
        // kubelet: the failed sandbox is removed and RunPodSandbox is tried again later.
        for (const sb of await n.cri.listPodSandbox()) {
          if (sb.metadata?.name === name && sb.state !== 'SANDBOX_READY') {
            await n.cri.stopPodSandbox(sb.id).catch(() => undefined);
            await n.cri.removePodSandbox(sb.id).catch(() => undefined);
          }
        }
        await newIpamdReady;
        outcomes.retried++;
        return runPod(name, uid);
      }
    };
    const first = add('new-0');
    await waitFor('the first ADD to outlast the bound', () => outcomes.failed11 === 1, 20_000, 100);
    const waiting = ['new-1', 'new-2'].map(add);
    // The new DaemonSet pod replaces the old one (kubelet deletes the old pod, runs the new).
    await ipamdPod.remove();
    const newPodAt = Date.now();
    ipamdPod = await dsRun('eni-ipam-bbbbb');
    await waitProbe(ipamdPod, 'readinessProbe', (c) => c === 0, 60_000);
    markReady();
    const newIds = await Promise.all([first, ...waiting]);
    outcomes.waited = newIds.filter((id) => (addDone.get(id) ?? 0) > newPodAt).length;
    assert.equal(
      outcomes.waited,
      2,
      'the two ADDs started while ipamd was down completed only after the new pod started',
    );
    assert.deepEqual([outcomes.failed11, outcomes.retried], [1, 1]);
    await waitFor('the spooled DELs applied', () => spooled(n).length === 0, 20_000, 100);
    for (const id of newIds) assert.ok(ipAtStart.get(id), 'each new pod has an IP');
    const allocations = await n.allocations();
    for (const id of gone)
      assert.equal(
        allocations.some((a) => a.containerID === id),
        false,
        `the spooled DEL of ${id.slice(0, 12)} was applied`,
      );
    const lost = await nothingLost(n, ipAtStart);
    assert.equal(lost.live, PODS - 5 + 3);
    t.diagnostic(
      `rolling update: DELs spooled ${spooledWhileDown}, applied ${spooledWhileDown - spooled(n).length}; ADDs waited ${outcomes.waited}, failed with 11 ${outcomes.failed11}, retried ${outcomes.retried}; nothing lost: live ${lost.live} == assigned ${lost.assigned}`,
    );

    // A crash: SIGKILL leaves the socket behind; the probes must still fail.
    const runner2 = await ipamdPod.startProbeRunner();
    assert.equal(
      (await ipamdPod.probe('livenessProbe', { inContainer: runner2 })).exitCode,
      0,
      'liveness from the runner while serving',
    );
    await ipamdPod.stopContainers(0);
    const sockets = readdirSync(n.host('/run/eni-ipam')).filter((f) => f.endsWith('.sock'));
    assert.ok(sockets.length > 0, 'the crash left a stale socket behind');
    const crashed = {
      readiness: (await ipamdPod.probe('readinessProbe', { inContainer: runner2 })).exitCode,
      liveness: (await ipamdPod.probe('livenessProbe', { inContainer: runner2 })).exitCode,
    };
    t.diagnostic(
      `probes: stopped ${JSON.stringify(stoppedProbes)}, crashed with stale ${sockets.join(', ')} ${JSON.stringify(crashed)}`,
    );
    assert.notEqual(crashed.readiness, 0, 'readiness fails after a crash with a stale socket');
    assert.notEqual(crashed.liveness, 0, 'liveness fails after a crash with a stale socket');
  },
);

test(
  'taking over a node from aws-node with the rendered DaemonSet: ours wins over 10-aws.conflist, running pods keep their IPs',
  { skip, timeout: 180_000 },
  async (t) => {
    const n = await createDsNode({ imageArchive: await ensureImageArchive(), instanceType: 'm5.large' });
    t.after(() => n.close());
    const ds = await render(n);
    // The node as aws-node left it: secondary IPs on the primary ENI and an ENI it created,
    // its conflist and plugin (a stand-in wiring pods the aws way), 6 pods, its checkpoint.
    const { ec2, primary, eni1, secondaries } = await leaveEnisAsAwsNode(n.sim, n.instanceId, 4);
    t.after(() => ec2.destroy());
    const stateDir = path.join(n.dir, 'aws-cni-state');
    await mkdir(stateDir);
    await writeFile(
      path.join(stateDir, 'pool'),
      [
        ...secondaries(primary.networkInterfaceId)
          .slice(0, 3)
          .map((ip) => `${ip} main`),
        ...secondaries(eni1)
          .slice(0, 3)
          .map((ip) => `${ip} 2`),
      ].join('\n') + '\n',
    );
    await installAwsCniStandIn(n.host('/opt/cni/bin'), stateDir);
    await writeFile(n.host('/etc/cni/net.d/10-aws.conflist'), JSON.stringify(awsConflist()));
    const ipAtStart = new Map<string, string>();
    for (let i = 0; i < 6; i++) {
      const id = await waitFor(
        `aws-pod-${i} through aws-cni`,
        async () => {
          const name = `aws-pod-${i}`;
          try {
            return await n.cri.runPodSandbox({ name, namespace: 'default', uid: randomUUID() });
          } catch (e) {
            if (i > 0) throw e; // the first one may race containerd's conf reload
            for (const sb of await n.cri.listPodSandbox())
              if (sb.metadata?.name === name) await n.cri.removePodSandbox(sb.id).catch(() => undefined);
            return undefined;
          }
        },
        15_000,
        200,
      );
      ipAtStart.set(id, (await n.cri.podSandboxStatus(id)).status!.network!.ip);
    }
    const awsPods = parseAdds(await readFile(path.join(stateDir, 'adds'), 'utf8'));
    assert.equal(awsPods.length, 6);
    for (const p of awsPods)
      n.kube.upsertPod({
        namespace: p.namespace,
        name: p.name,
        uid: randomUUID(),
        nodeName: n.nodeName,
        podIP: p.ip,
        containerID: p.containerID,
      });
    await writeFile(n.host('/run/aws-node/ipam.json'), awsNodeCheckpoint(awsPods));
    await writeFile(path.join(stateDir, 'gone'), '');

    const callsBefore = n.sim.calls.length;
    const pod = await runDaemonSetPod({
      cri: n.cri,
      ds,
      id: {
        name: 'eni-ipam-ccccc',
        namespace: ds.metadata.namespace ?? 'kube-system',
        uid: randomUUID(),
        nodeName: n.nodeName,
        hostIP: n.nodeIp,
      },
      node: n.mountNs,
      logRoot: `${n.dir}/pod-logs`,
      passthrough: ['/run/netns'],
    });
    t.after(() => pod.remove().catch(() => undefined));
    await waitProbe(pod, 'readinessProbe', (c) => c === 0, 60_000);
    const conf = await waitFor(
      'our conflist beside the aws one',
      () => {
        const f = readdirSync(n.host('/etc/cni/net.d'))
          .filter((x) => !x.startsWith('.'))
          .sort();
        return f.length === 2 ? f : undefined;
      },
      30_000,
      100,
    );
    assert.deepEqual(
      conf,
      ['05-eni-ipam.conflist', '10-aws.conflist'],
      'ours sorts first (the runtime uses it); the aws one is left in place',
    );
    const byId = new Map((await n.allocations()).map((a) => [a.containerID, a.ipv4]));
    for (const p of awsPods) assert.equal(byId.get(p.containerID), p.ip, `${p.name} keeps ${p.ip}`);
    // Imported from the checkpoint (not only adopted from CRI/kernel evidence): ipamd renames
    // the file once imported, which it can only do if the chart mounts /var/run/aws-node.
    assert.deepEqual(
      readdirSync(n.host('/run/aws-node')).map((f) => f.replace(/-\d{4}-.*$/, '')),
      ['ipam.json.imported-by-eni-ipam'],
      "aws-node's checkpoint imported and renamed",
    );
    // A new pod goes through our conflist and gets a fresh IP.
    const id = await waitFor(
      'a new pod through eni-ipam',
      async () => {
        const name = `new-${randomUUID().slice(0, 6)}`;
        try {
          return await n.cri.runPodSandbox({ name, namespace: 'default', uid: randomUUID() });
        } catch {
          for (const sb of await n.cri.listPodSandbox())
            if (sb.metadata?.name === name) await n.cri.removePodSandbox(sb.id).catch(() => undefined);
          return undefined;
        }
      },
      20_000,
      200,
    );
    const fresh = (await n.cri.podSandboxStatus(id)).status!.network!.ip;
    assert.equal(
      awsPods.some((p) => p.ip === fresh),
      false,
      `the new pod got ${fresh}, not a migrated pod's IP`,
    );
    ipAtStart.set(id, fresh);
    const lost = await nothingLost(n, ipAtStart);
    const released = n.sim.calls
      .slice(callsBefore)
      .filter((c) =>
        ['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface'].includes(c.action),
      );
    assert.deepEqual(
      released.map((c) => c.action),
      [],
      'nothing released during the takeover',
    );
    t.diagnostic(
      `aws-node takeover: ${conf.join(' < ')}; ${awsPods.length} aws-wired pods kept their IPs; new pod ${fresh}; live ${lost.live} == assigned ${lost.assigned}`,
    );
  },
);
