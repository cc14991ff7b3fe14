/**
 * A harness ipamd never falls back to a machine path: every setting of ipamd's spec whose
 * default is a machine path (its sockets, checkpoint, CNI dirs, plugin log, aws-node's
 * checkpoint, a CRI socket found by probing) is set to a path under the harness's own dir,
 * by the child-process env (`ipamdChildEnv`) and by the in-process sim node's env.
 *
 * Before this test, a harness ipamd with no checkpoint of its own imported the machine's
 * /var/run/aws-node/ipam.json, which another run's aws-node stand-in could have written.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ipamdChildEnv } from '../../kit/ipamd-process.js';
import { machinePathSettings } from '../../kit/own-paths.js';
import { testSimNode } from '../../kit/sim-node.js';

const owned = (env: NodeJS.ProcessEnv, dir: string): string[] =>
  machinePathSettings().filter((name) => {
    const v = (env[name] ?? '').replace(/^unix:\/\//, '');
    return !v.startsWith(`${dir}/`);
  });

test('the settings whose default is a machine path are the ones a node shares', () => {
  const names = machinePathSettings();
  for (const n of [
    'ENI_IPAM_SOCKET',
    'ENI_IPAM_CHECKPOINT_PATH',
    'ENI_IPAM_CNI_CONF_DIR',
    'ENI_IPAM_CNI_BIN_DIR',
    'ENI_IPAM_AWS_NODE_CHECKPOINT_PATH',
    'AWS_VPC_K8S_PLUGIN_LOG_FILE',
    'CRI_RUNTIME_ENDPOINT',
  ])
    assert.ok(names.includes(n), n);
});

test('a child ipamd of the harness gets every machine-path setting under its own dir', () => {
  const env = ipamdChildEnv({ env: {}, logFile: '/tmp/eni-own/ipamd.log' });
  assert.deepEqual(owned(env, '/tmp/eni-own'), []);
  // What the caller sets wins.
  const mine = ipamdChildEnv({ env: { ENI_IPAM_SOCKET: '/tmp/other/s.sock' }, logFile: '/tmp/eni-own/ipamd.log' });
  assert.equal(mine.ENI_IPAM_SOCKET, '/tmp/other/s.sock');
});

test('an in-process sim node ipamd gets every machine-path setting under its own dir', async (t) => {
  const { node } = await testSimNode(t, { seed: 4242 });
  assert.deepEqual(owned(node.env, node.dir), []);
});
