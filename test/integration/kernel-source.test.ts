/**
 * The kernel evidence source against the real kernel (docs/design.md#13-evidence-before-trust item 1): a node netns
 * with pod netns, veth pairs and /32 routes as the CNI plugin wires them, read by
 * KernelSource with iproute2; and what happens when `ip` fails or prints garbage; and
 * that the read starts `ip` through the runner ipamd hands it (the CNI exec spawn helper) once there is one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createNamedNetns, run, type Netns } from '../../kit/netns.js';
import { KernelSource, KernelUnavailableError } from '../../ipamd/restore/kernel-source.js';
import { startSpawnHelper } from '../../ipamd/cni-exec/spawn-helper.js';
import { createIpRunner, type IpSpawner } from '../../netfacts/ip-batch.js';
import { waitFor } from '../../kit/wait.js';

let seq = 0;
const name = (kind: string) => `eni-ks-${kind}-${process.pid}-${seq++}`;

/** Wires `ip` to a pod as cni-plugin/wiring.ts does: veth with its peer in `pod`, /32 route, ip rules. */
async function wirePod(node: Netns, pod: Netns, veth: string, ip: string, rules = true): Promise<void> {
  const podName = path.basename(pod.path);
  await run('ip', [
    '-n',
    path.basename(node.path),
    'link',
    'add',
    veth,
    'type',
    'veth',
    'peer',
    'name',
    'eth0',
    'netns',
    podName,
  ]);
  await run('ip', ['-n', path.basename(node.path), 'link', 'set', veth, 'up']);
  await run('ip', ['-n', path.basename(node.path), 'route', 'replace', `${ip}/32`, 'dev', veth, 'scope', 'link']);
  if (rules) {
    await run('ip', ['-n', path.basename(node.path), 'rule', 'add', 'to', `${ip}/32`, 'lookup', 'main', 'prio', '512']);
    await run('ip', ['-n', path.basename(node.path), 'rule', 'add', 'from', `${ip}/32`, 'lookup', '2', 'prio', '1536']);
  }
}

test('the kernel source reads pod IPs wired to veths whose peer is in another netns, and nothing else', async (t) => {
  const made: Netns[] = [];
  t.after(async () => {
    for (const n of made.reverse()) await n.remove().catch(() => undefined);
  });
  const node = await createNamedNetns(name('node'));
  made.push(node);
  const podA = await createNamedNetns(name('pod'));
  made.push(podA);
  const podB = await createNamedNetns(name('pod'));
  made.push(podB);
  const nodeName = path.basename(node.path);
  await wirePod(node, podA, 'enia0000000001', '10.0.0.21');
  await wirePod(node, podB, 'enib0000000002', '10.0.0.22', false);
  // Not pods: a veth pair with both ends on the node, a route to lo, a /24 and a rule-only leftover.
  await run('ip', ['-n', nodeName, 'link', 'add', 'vloc0', 'type', 'veth', 'peer', 'name', 'vloc1']);
  await run('ip', ['-n', nodeName, 'link', 'set', 'vloc0', 'up']);
  await run('ip', ['-n', nodeName, 'route', 'add', '10.0.0.30/32', 'dev', 'vloc0']);
  await run('ip', ['-n', nodeName, 'link', 'set', 'lo', 'up']);
  await run('ip', ['-n', nodeName, 'route', 'add', '10.0.0.31/32', 'dev', 'lo']);
  await run('ip', ['-n', nodeName, 'route', 'add', '10.9.0.0/24', 'dev', 'lo']);
  await run('ip', ['-n', nodeName, 'rule', 'add', 'to', '10.0.0.40/32', 'lookup', 'main', 'prio', '512']);

  const src = new KernelSource({ netnsPath: node.path });
  const k = await src.readKernel();
  assert.deepEqual([...k.pods.keys()].sort(), ['10.0.0.21', '10.0.0.22']);
  assert.deepEqual(k.pods.get('10.0.0.21'), { ip: '10.0.0.21', dev: 'enia0000000001', rules: 2 });
  assert.equal(k.pods.get('10.0.0.22')?.rules, 0);
  assert.equal(k.podVeths, 2, 'only veths whose peer is in another netns count as pod veths');
  assert.deepEqual(k.rulesOnly, ['10.0.0.40'], 'a rule alone vouches for nothing');

  // The pod's netns goes away: the kernel deletes the veth and its route (in its deferred
  // netns cleanup, so poll with a deadline); the source follows.
  await podB.remove();
  made.splice(made.indexOf(podB), 1);
  let after = await src.readKernel();
  await waitFor(
    'the kernel source to drop the removed pod',
    async () => (after = await src.readKernel()).pods.size === 1,
    10_000,
    50,
  ).catch(() => undefined); // the assertions below say what is left
  assert.deepEqual([...after.pods.keys()], ['10.0.0.21']);
  assert.equal(after.podVeths, 1);
});

test('ip that fails, prints garbage or a truncated array makes the kernel unreadable, never "no pods"', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ks-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const fake = async (file: string, body: string): Promise<string> => {
    const p = path.join(dir, file);
    await writeFile(p, `#!/bin/sh\ncat >/dev/null\n${body}\n`);
    await chmod(p, 0o755);
    return p;
  };
  const cases: Array<[string, string, RegExp]> = [
    ['garbage', 'echo \'Object "x" is unknown\'; exit 0', /not JSON/],
    ['fails', "echo 'RTNETLINK answers: Operation not permitted' >&2; exit 2", /Operation not permitted/],
    ['truncated', 'printf \'[{"dst":"10.0.0.5","dev":"eni1"}]\\n[{"ifname":"eni1","link_netnsid":0}\\n\'', /not JSON/],
    ['two-arrays', "printf '[]\\n[]\\n'", /expected 3 JSON arrays/],
    ['empty', 'exit 0', /expected 3 JSON arrays/],
    ['wrong-shape', 'printf \'[{"gateway":"x"}]\\n[]\\n[]\\n\'', /route entry without dst/],
  ];
  for (const [file, body, why] of cases) {
    const src = new KernelSource({ ipPath: await fake(file, body) });
    await assert.rejects(
      src.readKernel(),
      (e: Error) => e instanceof KernelUnavailableError && why.test(e.message),
      file,
    );
  }
  await assert.rejects(new KernelSource({ ipPath: path.join(dir, 'missing-ip') }).readKernel(), KernelUnavailableError);
  const slow = new KernelSource({ ipPath: await fake('slow', 'sleep 5'), timeoutMs: 200 });
  await assert.rejects(slow.readKernel(), /timed out after 200 ms/);
});

test('with an ipRunner (ipamd passes the CNI exec spawn helper), the read goes through the helper; with ipPath, never', async (t) => {
  const made: Netns[] = [];
  const helper = startSpawnHelper();
  t.after(async () => {
    await helper.stop();
    for (const n of made.reverse()) await n.remove().catch(() => undefined);
  });
  const node = await createNamedNetns(name('node'));
  made.push(node);
  const pod = await createNamedNetns(name('pod'));
  made.push(pod);
  await wirePod(node, pod, 'enic0000000003', '10.0.0.23');
  const spawned: string[][] = [];
  const viaHelper: IpSpawner = (argv, env, on) => {
    spawned.push(argv);
    return helper.spawner(argv, env, on);
  };
  const runner = createIpRunner(viaHelper);
  // Before the helper is there (the provider answers undefined), the read forks from this thread.
  let ready = false;
  const src = new KernelSource({ netnsPath: node.path, ipRunner: () => (ready ? runner : undefined) });
  assert.deepEqual([...(await src.readKernel()).pods.keys()], ['10.0.0.23']);
  assert.equal(spawned.length, 0, 'no helper yet: not through it');
  ready = true;
  const k = await src.readKernel();
  assert.deepEqual([...k.pods.keys()], ['10.0.0.23'], 'the same answer through the helper');
  assert.equal(spawned.length, 1, 'the read went through the helper');
  assert.ok(spawned[0]!.includes(`--net=${node.path}`), 'in the node netns');
  // A test's ipPath (a script standing in for ip) wins over the provider.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ks-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const fake = path.join(dir, 'ip');
  await writeFile(fake, '#!/bin/sh\ncat >/dev/null\nexit 3\n');
  await chmod(fake, 0o755);
  const withPath = new KernelSource({ ipPath: fake, ipRunner: () => runner });
  await assert.rejects(withPath.readKernel(), KernelUnavailableError);
  assert.equal(spawned.length, 1, 'ipPath: the provider is not asked');
});
