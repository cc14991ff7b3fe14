/**
 * The DaemonSet end to end in containerd (docs/design.md#12-running-on-a-cluster item 5): ipamd runs from the image
 * `npm run image` built, in the pod `helm template` renders (command, env, capabilities,
 * mounts and probes read from the rendered manifest, never written here), on a node
 * whose mount namespace has no Node.js. The simulated cloud is reached through env added
 * with the chart's `extraEnv` at render time. See containerd-ds-node.ts for the node and
 * daemonset-node.ts for how the pod is run (kubelet's part, through the CRI).
 *
 * Taking over a node from aws-node: daemonset-takeover.test.ts. Shared steps:
 * ../helpers/daemonset-e2e-kit.ts.
 *
 * The image is built first if needed (`npm run image`'s build.mjs, a no-op when up to
 * date; ENI_IPAM_IMAGE_ARCHIVE names another archive). Skipped (with the reason) only
 * when no helm binary is installed. Run under `flock /tmp/eni-ipam-containerd.lock`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tcpSendFrom } from '../../kit/netns.js';
import { createDsNode } from '../helpers/containerd-ds-node.js';
import { runDaemonSetPod, waitProbe, type DaemonSetPod } from '../helpers/daemonset-node.js';
import { ensureImageArchive } from '../../kit/image-archive.js';
import { waitFor } from '../../kit/wait.js';
import { ECHO_PORT, mapLimit, nothingLost, PODS, render, skip, spooled } from '../helpers/daemonset-e2e-kit.js';

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
    // Inside the container, with the chart's capabilities, ipamd wired each pod through its
    // netlink helper: every ADD passed `veth-up`, none started an ip batch (`ip-ready`).
    const trace = await n.stageTrace();
    t.diagnostic(
      `ADD stages: veth-up ${JSON.stringify(trace['cni.add.veth-up'])}, ip-ready ${JSON.stringify(trace['cni.add.ip-ready'])}`,
    );
    assert.ok((trace['cni.add.veth-up']?.count ?? 0) >= PODS, 'each ADD wired its veth');
    assert.equal(trace['cni.add.ip-ready'], undefined, 'no ADD fell back to ip batches');
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
    // The two later ADDs wait in the shim for the new ipamd; on a loaded machine the new pod may
    // take longer than the shim's bound to serve, and then they fail with code 11 and are
    // retried like the first. Either way none completed before the new pod started.
    assert.equal(
      outcomes.waited + (outcomes.failed11 - 1),
      2,
      `the two ADDs started while ipamd was down completed only after the new pod started (waited ${outcomes.waited}, failed with 11 and retried ${outcomes.failed11 - 1})`,
    );
    assert.ok(outcomes.failed11 >= 1, 'the first ADD outlasted the bound and failed with 11');
    assert.equal(outcomes.retried, outcomes.failed11, 'every ADD that failed with 11 succeeded on retry');
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
