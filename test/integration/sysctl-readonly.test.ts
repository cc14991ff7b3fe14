/**
 * docs/design.md#12-running-on-a-cluster item 7: in a container /proc/sys is read-only, so ipamd CHECKS the kernel
 * settings it needs and reports a wrong one instead of setting it (and crash-looping
 * when that fails). ipamd runs in a mount namespace of its own where /proc/sys is a
 * read-only bind (`unshare -m`, `mount --bind` + `remount,ro`), in a node namespace
 * where nobody played the init container (ip_forward=0, the primary interface's
 * rp_filter strict): it starts, serves pods through containerd, and names both settings
 * in /v1/status and its log. The node's /proc/sys is left as it was.
 *
 * Needs root, containerd, runc; run under the containerd lock:
 * `flock /tmp/eni-ipam-containerd.lock node --test dist/test/integration/sysctl-readonly.test.js`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { run } from '../../kit/netns.js';
import { createInstalledCniNode } from '../helpers/containerd-cni-node.js';
import { waitFor } from '../../kit/wait.js';

/** Runs "$@" with /proc/sys read-only in a mount namespace of its own (what a non-privileged container sees); host mounts still propagate in (slave, like HostToContainer), so new pod netns are visible. */
const READ_ONLY_PROC_SYS = [
  'unshare',
  '-m',
  '--propagation',
  'slave',
  'sh',
  '-ec',
  'mount --bind /proc/sys /proc/sys; mount -o remount,bind,ro /proc/sys; exec "$@"',
  'ro-proc-sys',
];

test('ipamd with a read-only /proc/sys and wrong sysctls starts, serves, and reports them', async (t) => {
  const n = await createInstalledCniNode({
    instanceType: 'm5.large',
    nodeSysctls: false,
    ipamdPrefix: READ_ONLY_PROC_SYS,
  });
  t.after(() => n.close());
  const inNode = (...args: string[]) => run('nsenter', [`--net=${n.nodeNetns.path}`, ...args]);
  await waitFor('the primary ENI link', () => n.eniLinks!.links.size >= 1, 10_000, 100);
  await inNode('sysctl', '-qw', 'net.ipv4.ip_forward=0', 'net.ipv4.conf.all.rp_filter=1');
  // The wrapper really makes /proc/sys read-only for what it runs.
  await assert.rejects(
    run(READ_ONLY_PROC_SYS[0]!, [
      ...READ_ONLY_PROC_SYS.slice(1),
      'nsenter',
      `--net=${n.nodeNetns.path}`,
      'sysctl',
      '-qw',
      'net.ipv4.ip_forward=1',
    ]),
    /permission denied|Read-only file system/,
  );

  await n.startIpamd();
  const status = (await n.status()) as unknown as {
    nodeSysctls: Array<{ sysctl: string; value: string; ok: boolean; problem?: string }>;
  };
  assert.deepEqual(
    status.nodeSysctls.map((c) => [c.sysctl, c.value, c.ok]),
    [
      ['net.ipv4.ip_forward', '0', false],
      ['net.ipv4.conf.eth0.rp_filter', '1', false],
    ],
  );
  assert.match(status.nodeSysctls[1]!.problem ?? '', /strict/);
  const log = await readFile(n.ipamdLog, 'utf8');
  assert.equal(log.split('\n').filter((l) => l.includes('node kernel setting is wrong')).length, 2, 'both logged');
  // It serves: a pod through containerd gets an IP from ipamd.
  const id = await n.cri.runPodSandbox({ name: 'web', namespace: 'default', uid: randomUUID() });
  const ip = (await n.cri.podSandboxStatus(id)).status?.network?.ip;
  assert.ok(ip);
  assert.equal((await n.allocations()).find((a) => a.containerID === id)?.ipv4, ip);
  // ipamd did not change them (it could not, and it does not try).
  assert.equal((await inNode('sysctl', '-n', 'net.ipv4.ip_forward')).trim(), '0');
});
