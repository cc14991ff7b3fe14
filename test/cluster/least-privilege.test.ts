/**
 * The least privilege ipamd needs, on the real cluster (charts/eni-ipam/values.yaml
 * `securityContext`, `hostPID`; docs/install-eks.md "What the DaemonSet needs from the
 * host, and why"). With the chart's defaults — every capability dropped but NET_ADMIN,
 * NET_RAW and SYS_ADMIN, not in the host PID namespace — ipamd runs with exactly those
 * three (its /proc/1/status), pods are wired and reach each other, and their DELs give the
 * addresses back. Then each capability is taken away in turn through `helm upgrade`, and
 * what breaks is named: without SYS_ADMIN every ADD fails entering the pod netns; without
 * NET_ADMIN ipamd cannot start; without NET_RAW, on a node whose iptables rules are in the
 * legacy backend (as kube-proxy's on Amazon Linux 2), ipamd stops rather than guess the
 * backend. Each is put back and the node serves again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { run } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { startCluster, type TestCluster } from '../../kit/cluster/cluster.js';
import { ECHO_PORT } from '../../kit/cluster/echo-image.js';
import { clusterValues, helmRelease, installEniIpam, NAMESPACE, waitEniIpamReady } from '../../kit/cluster/install.js';
import {
  allocations,
  echoDeployment,
  echoPodSpec,
  podNetns,
  tcpAsk,
  waitPodsReady,
} from '../../kit/cluster/workload.js';

const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
/** Capability bits (linux/capability.h). */
const CAP = { NET_ADMIN: 12, NET_RAW: 13, SYS_ADMIN: 21 } as const;
const LEGACY_MARK = '198.51.100.77';

describe('the least privilege ipamd needs, on a real Kubernetes cluster', { skip, timeout: 30 * 60_000 }, () => {
  let c: TestCluster;
  before(async () => {
    c = await startCluster();
    await installEniIpam(c, { wait: true });
  });
  after(async () => {
    await c?.close();
  });

  /** `helm upgrade` with the capabilities `add` (ALL dropped). */
  const withCaps = async (add: string[]) => {
    const r = await helmRelease(c, 'upgrade', {
      ...(await clusterValues(c)),
      securityContext: { capabilities: { drop: ['ALL'], add } },
    });
    assert.equal(r.code, 0, r.stderr);
  };
  /** ipamd's log lines (stdout/stderr of the current and, after a crash, the previous container). */
  const ipamdOutput = async () => {
    const args = ['-n', NAMESPACE, 'logs', 'ds/eni-ipam', '-c', 'ipamd', '--tail=200'];
    const [now, prev] = await Promise.all([c.kubectl.try(args), c.kubectl.try([...args, '--previous'])]);
    return `${prev.stdout}\n${now.stdout}`;
  };
  /** Waits for a FailedCreatePodSandBox Event of pod `name` and returns its message. */
  const sandboxFailure = (name: string) =>
    waitFor(
      `a FailedCreatePodSandBox Event for ${name}`,
      async () => {
        const ev = await c.kubectl.json<{ items: Array<{ reason: string; message: string }> }>([
          'get',
          'events',
          '--field-selector',
          `involvedObject.name=${name},reason=FailedCreatePodSandBox`,
        ]);
        return ev.items.at(-1)?.message;
      },
      120_000,
      1000,
    );

  it('the defaults: exactly NET_ADMIN, NET_RAW and SYS_ADMIN, no host PIDs; pods wired, reached and released', async () => {
    const ds = await c.kubectl.json<{
      spec: {
        template: { spec: { hostPID?: boolean; containers: Array<{ name: string; securityContext: unknown }> } };
      };
    }>(['-n', NAMESPACE, 'get', 'daemonset', 'eni-ipam']);
    const spec = ds.spec.template.spec;
    assert.notEqual(spec.hostPID, true);
    assert.deepEqual(spec.containers.find((x) => x.name === 'ipamd')?.securityContext, {
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW', 'SYS_ADMIN'] },
    });
    // ipamd is PID 1 of its own PID namespace: its sets are the three, nothing else.
    const status = await c.kubectl.run([
      '-n',
      NAMESPACE,
      'exec',
      'ds/eni-ipam',
      '-c',
      'ipamd',
      '--',
      'cat',
      '/proc/1/status',
    ]);
    const want = (1n << BigInt(CAP.NET_ADMIN)) | (1n << BigInt(CAP.NET_RAW)) | (1n << BigInt(CAP.SYS_ADMIN));
    for (const set of ['CapEff', 'CapPrm', 'CapBnd']) {
      const hex = new RegExp(`^${set}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1];
      assert.equal(BigInt(`0x${hex ?? 'x'}`), want, `${set} of ipamd: ${hex}`);
    }
    await c.kubectl.apply([echoDeployment(c, 'lp', 3)]);
    const pods = await waitPodsReady(c, 'lp', 3);
    const ns = await podNetns(c);
    const reply = await tcpAsk(ns.get(pods[0]!.name)!, pods[1]!.ip!, ECHO_PORT);
    assert.match(reply, new RegExp(`^${pods[1]!.name} ping$`), 'pod to pod');
    await c.kubectl.run(['delete', 'deployment', 'lp', '--wait=true']);
    await waitFor('the DELs gave every address back', async () =>
      (await allocations(c)).some((a) => pods.some((p) => p.ip === a.ipv4)) ? undefined : true,
    );
  });

  it('without SYS_ADMIN every ADD fails entering the pod netns, naming SYS_ADMIN', async () => {
    await withCaps(['NET_ADMIN', 'NET_RAW']);
    await waitEniIpamReady(c);
    await c.kubectl.apply([
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'lp-nosysadmin', namespace: 'default' },
        spec: echoPodSpec(c),
      },
    ]);
    const msg = await sandboxFailure('lp-nosysadmin');
    assert.match(msg, /enter pod netns: Operation not permitted \(entering a pod netns needs the SYS_ADMIN capability/);
    await c.kubectl.run(['delete', 'pod', 'lp-nosysadmin', '--wait=true']);
  });

  it('without NET_ADMIN ipamd cannot start, naming NET_ADMIN', async () => {
    await withCaps(['NET_RAW', 'SYS_ADMIN']);
    await waitFor(
      'ipamd refusing to start for want of NET_ADMIN',
      async () => ((await ipamdOutput()).includes('reading it needs the NET_ADMIN capability') ? true : undefined),
      180_000,
      2000,
    );
  });

  it('without NET_RAW on a legacy-iptables node ipamd stops naming NET_RAW; with it, it serves', async () => {
    // The node's rules in the legacy backend, as Amazon Linux 2's kube-proxy keeps them.
    // In the node's mount namespace too: iptables-legacy takes /run/xtables.lock, the cluster's own file there.
    const legacy = (...a: string[]) =>
      run('nsenter', [`--mount=${c.mountNs.nsPath}`, `--net=${c.nodeNetns.path}`, 'iptables-legacy', '-w', '5', ...a]);
    await legacy('-t', 'nat', '-A', 'POSTROUTING', '-s', LEGACY_MARK, '-j', 'RETURN');
    try {
      await withCaps(['NET_ADMIN', 'SYS_ADMIN']);
      await waitFor(
        'ipamd refusing to guess the iptables backend',
        async () =>
          /iptables-legacy-save was refused .*reading it needs the NET_RAW capability/.test(await ipamdOutput())
            ? true
            : undefined,
        180_000,
        2000,
      );
      await withCaps(['NET_ADMIN', 'NET_RAW', 'SYS_ADMIN']);
      await waitEniIpamReady(c);
    } finally {
      await legacy('-t', 'nat', '-D', 'POSTROUTING', '-s', LEGACY_MARK, '-j', 'RETURN').catch(() => undefined);
    }
  });
});
