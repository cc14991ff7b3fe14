import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCniArgs, readCniEnv, requireEnv } from '../../cni-plugin/env.js';
import { CniError } from '../../cni-plugin/errors.js';

const pairs = [
  'IgnoreUnknown=1',
  'K8S_POD_NAMESPACE=kube-system',
  'K8S_POD_NAME=coredns-5d78c9869d-abcde',
  'K8S_POD_INFRA_CONTAINER_ID=0123abcd',
  'K8S_POD_UID=6f1c2a44-1f0e-4b8a-9d7e-2a3b4c5d6e7f',
];

function permutations<T>(xs: T[]): T[][] {
  if (xs.length <= 1) return [xs];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest]));
}

const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof CniError, String(e));
    return e.code;
  }
  return 0;
};

test('CNI_ARGS: every order of the containerd keys parses to the same values', () => {
  const want = {
    ignoreUnknown: true,
    podName: 'coredns-5d78c9869d-abcde',
    podNamespace: 'kube-system',
    podInfraContainerId: '0123abcd',
    podUid: '6f1c2a44-1f0e-4b8a-9d7e-2a3b4c5d6e7f',
  };
  const all = permutations(pairs);
  assert.equal(all.length, 120);
  for (const p of all) assert.deepEqual(parseCniArgs(p.join(';')), want, p.join(';'));
});

test('CNI_ARGS: unknown keys need IgnoreUnknown, wherever it appears', () => {
  assert.equal(
    code(() => parseCniArgs('K8S_POD_NAME=a;FOO=bar')),
    4,
  );
  assert.equal(parseCniArgs('FOO=bar;K8S_POD_NAME=a;IgnoreUnknown=true').podName, 'a');
  assert.equal(parseCniArgs('IgnoreUnknown=1;FOO=bar').ignoreUnknown, true);
  assert.equal(
    code(() => parseCniArgs('IgnoreUnknown=0;FOO=bar')),
    4,
  );
});

test('CNI_ARGS: empty, trailing separators, values with "=", malformed pairs', () => {
  assert.deepEqual(parseCniArgs(''), {
    ignoreUnknown: false,
    podName: '',
    podNamespace: '',
    podInfraContainerId: '',
    podUid: '',
  });
  assert.equal(parseCniArgs('K8S_POD_NAME=a;;').podName, 'a');
  assert.equal(parseCniArgs('K8S_POD_NAME=a=b').podName, 'a=b');
  assert.equal(
    code(() => parseCniArgs('K8S_POD_NAME')),
    4,
  );
  assert.equal(
    code(() => parseCniArgs('=x')),
    4,
  );
  assert.equal(
    code(() => parseCniArgs('K8S_POD_NAME=a;K8S_POD_NAME=b')),
    4,
  );
  assert.equal(
    code(() => parseCniArgs('IgnoreUnknown=maybe')),
    4,
  );
});

test('readCniEnv + requireEnv: what ADD and DEL need', () => {
  const base = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'abc123',
    CNI_NETNS: '/var/run/netns/cni-1',
    CNI_IFNAME: 'eth0',
    CNI_ARGS: '',
    CNI_PATH: '/opt/cni/bin::/usr/lib/cni',
  };
  const e = readCniEnv(base);
  assert.deepEqual(e.path, ['/opt/cni/bin', '/usr/lib/cni']);
  requireEnv(e, 'ADD');
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_NETNS: '' }), 'ADD')),
    4,
  );
  requireEnv(readCniEnv({ ...base, CNI_NETNS: '' }), 'DEL'); // containerd's second DEL
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_CONTAINERID: '' }), 'DEL')),
    4,
  );
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_IFNAME: undefined }), 'ADD')),
    4,
  );
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_IFNAME: 'a-name-that-is-too-long' }), 'ADD')),
    4,
  );
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_CONTAINERID: '../x' }), 'ADD')),
    4,
  );
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_NETNS: 'relative/path' }), 'ADD')),
    4,
  );
  assert.equal(
    code(() => requireEnv(readCniEnv({ ...base, CNI_NETNS: '/var/run/netns/a b' }), 'ADD')),
    4,
  );
  requireEnv(readCniEnv({ ...base, CNI_NETNS: '/proc/1234/ns/net' }), 'ADD');
});
