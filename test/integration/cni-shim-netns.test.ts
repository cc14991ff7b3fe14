/**
 * ipamd deployed without what it needs to enter pod network namespaces (docs/design.md#12-running-on-a-cluster item 1):
 * the real ipamd runs in its own PID namespace (a DaemonSet without `hostPID: true`) and
 * its own mount namespace where `/var/run/netns` is an empty tmpfs (a DaemonSet without
 * the `/var/run/netns` hostPath mount with HostToContainer propagation). The shim, run
 * on the "host" (the node netns, the host's mounts and PIDs), gets a CNI error that names
 * the missing chart setting for each netns path shape; nothing is wired and no IP is held.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startIpamd } from '../../kit/ipamd-process.js';
import { ipj, startCniNode } from '../helpers/cni-node.js';
import { pluginArgv } from '../helpers/plugin-under-test.js';

const newId = () => randomBytes(32).toString('hex');

test('ipamd without hostPID or the /var/run/netns mount: ADD fails with a CNI error naming the chart setting', async (t) => {
  const n = await startCniNode(t, 'sp', { plugin: 'shim' });
  await n.d.stop();
  // ipamd's view of the node netns survives hiding /var/run/netns: a bind mount of it elsewhere.
  const nodeNs = path.join(n.h.dir, 'node-ns');
  await writeFile(nodeNs, '');
  const script = `mount --bind ${n.node.path} ${nodeNs} && mount -t tmpfs none /var/run/netns && exec "$@"`;
  const d = await startIpamd({
    env: { ...n.h.env, ENI_IPAM_CNI_EXEC_NETNS: nodeNs },
    logFile: path.join(n.h.dir, 'ipamd.log'),
    prefix: ['unshare', '--pid', '--kill-child', '--mount-proc', '--propagation', 'private', 'sh', '-c', script, 'sh'],
  });
  t.after(() => d.kill9());
  const shim = pluginArgv('shim');
  const named = await n.pod('named');
  const proc = await n.pod('proc');
  const addNamed = await n.call({
    containerId: newId(),
    netns: named.path,
    ifName: 'eth0',
    command: 'ADD',
    plugin: shim,
  });
  t.diagnostic(`named netns: exit ${addNamed.code} ${addNamed.stdout}`);
  assert.deepEqual([addNamed.code, addNamed.json?.code], [1, 5], addNamed.stdout);
  assert.equal(
    addNamed.json.msg,
    `ipamd cannot enter the pod netns: CNI_NETNS ${named.path} does not exist in ipamd's mount namespace (ENOENT); the eni-ipam DaemonSet needs the /var/run/netns hostPath mount with mountPropagation: HostToContainer`,
  );
  const addProc = await n.call({
    containerId: newId(),
    netns: proc.path,
    ifName: 'eth0',
    command: 'ADD',
    plugin: shim,
  });
  t.diagnostic(`proc netns: exit ${addProc.code} ${addProc.stdout}`);
  assert.deepEqual([addProc.code, addProc.json?.code], [1, 5], addProc.stdout);
  assert.match(
    addProc.json.msg,
    new RegExp(
      `^ipamd cannot enter the pod netns: CNI_NETNS ${proc.path.replaceAll('/', '\\/')} (does not exist in ipamd's PID namespace|is another namespace for ipamd).*; the eni-ipam DaemonSet needs hostPID: true$`,
    ),
  );
  for (const ns of [named.path, proc.path, n.node.path])
    assert.deepEqual(await ipj(ns, ['link', 'show', 'type', 'veth']), [], `nothing wired in ${ns}`);
  assert.equal((await d.status()).counts.assigned, 0, 'no IP held');
});
