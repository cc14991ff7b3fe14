/**
 * Node mount namespaces share the machine without touching it or each other: two of them bind
 * the same node paths (the ones the cluster and the DaemonSet harnesses bind, plus one whose
 * whole parent chain is missing); each sees only its own files, the machine's paths stay as
 * they were, and closing one leaves the other's binds and files intact.
 *
 * On the build before this test, each namespace created a missing target on the host and
 * removed it at close; removing a directory that is a mount point in another mount namespace
 * detaches that namespace's mounts (Linux >= 3.18), so the second namespace lost its binds.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createNodeMountNs, mountsOf, type NodeBind, type NodeMountNs } from '../../kit/node-mountns.js';

const run = promisify(execFile);
const DEEP = `/var/lib/eni-ipam-isolation-${process.pid}/a/b`;
const BINDS: NodeBind[] = [
  { nodePath: '/etc/cni/net.d' },
  { nodePath: '/opt/cni/bin' },
  { nodePath: '/run/eni-ipam' },
  { nodePath: '/run/xtables.lock', kind: 'file' },
  { nodePath: '/var/lib/kubelet' },
  { nodePath: '/var/log/pods' },
  { nodePath: DEEP },
];

/** The machine's view of a path: absent, a file's size, or a dir's sorted entries. */
function machineState(p: string): string {
  if (!existsSync(p)) return 'absent';
  const st = statSync(p);
  return st.isDirectory() ? `dir:${readdirSync(p).sort().join(',')}` : `file:${st.size}`;
}

/**
 * The machine's view of every bind target (its full state) and of each ancestor (present or
 * not: other processes on the machine add entries to /run, /etc or /var/lib at any time).
 */
function machineView(): Record<string, string> {
  const view: Record<string, string> = {};
  for (const b of BINDS) {
    view[b.nodePath] = machineState(b.nodePath);
    for (let p = path.dirname(b.nodePath); p !== '/'; p = path.dirname(p))
      view[p] = existsSync(p) ? 'present' : 'absent';
  }
  return view;
}

/** Writes `text` to `<dir>/owner` (or into the file) at node path `p`, from inside `ns`. */
async function writeInside(ns: NodeMountNs, b: NodeBind, text: string): Promise<void> {
  const target = b.kind === 'file' ? b.nodePath : `${b.nodePath}/owner`;
  await ns.exec(['sh', '-c', 'printf %s "$1" >"$2"', 'sh', text, target]);
}

async function readInside(ns: NodeMountNs, b: NodeBind): Promise<string> {
  return ns.exec(['cat', b.kind === 'file' ? b.nodePath : `${b.nodePath}/owner`]);
}

test('two node mount namespaces bind the same node paths: neither touches the machine, closing one leaves the other intact', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-mntns-iso-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const before = machineView();
  const a = await createNodeMountNs({ root: path.join(dir, 'a'), binds: BINDS });
  t.after(() => a.close());
  const b = await createNodeMountNs({ root: path.join(dir, 'b'), binds: BINDS });
  t.after(() => b.close());
  assert.deepEqual(machineView(), before, 'creating the namespaces changed no machine path');

  for (const bind of BINDS) {
    await writeInside(a, bind, `a:${bind.nodePath}`);
    await writeInside(b, bind, `b:${bind.nodePath}`);
  }
  for (const bind of BINDS) {
    assert.equal(await readInside(a, bind), `a:${bind.nodePath}`);
    assert.equal(await readInside(b, bind), `b:${bind.nodePath}`);
    const backing = a.hostPathOf(bind.kind === 'file' ? bind.nodePath : `${bind.nodePath}/owner`);
    assert.ok(backing, bind.nodePath);
    assert.equal(readFileSync(backing, 'utf8'), `a:${bind.nodePath}`, 'the test reads what the node wrote');
  }
  assert.deepEqual(machineView(), before, 'writes through the binds reached no machine path');

  await b.close();
  assert.deepEqual(machineView(), before, 'closing a namespace removed or created no machine path');
  const mounts = new Set(mountsOf(a.pid));
  for (const bind of BINDS) {
    assert.ok(mounts.has(bind.nodePath), `${bind.nodePath} is still bound in the namespace left open`);
    assert.equal(await readInside(a, bind), `a:${bind.nodePath}`, `${bind.nodePath} still shows its own file`);
    await writeInside(a, bind, `a2:${bind.nodePath}`);
    const backing = a.hostPathOf(bind.kind === 'file' ? bind.nodePath : `${bind.nodePath}/owner`)!;
    assert.equal(readFileSync(backing, 'utf8'), `a2:${bind.nodePath}`, 'a write after the close lands in its own file');
  }
  await a.close();
  assert.deepEqual(machineView(), before, 'nothing of either namespace is left at a machine path');
});

/** True when `/run/netns/<name>` enters a network namespace from the test's own mount namespace. */
async function netnsWorks(name: string): Promise<boolean> {
  return run('nsenter', [`--net=/run/netns/${name}`, 'true']).then(
    () => true,
    () => false,
  );
}

test("the host's pod network namespaces stay valid and shared both ways while node namespaces come and go", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-mntns-netns-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const names = ['before', 'after', 'inside'].map((n) => `eni-iso-${n}-${process.pid}`);
  t.after(async () => {
    for (const n of names) await run('ip', ['netns', 'del', n]).catch(() => undefined);
  });
  const [before, after, inside] = names as [string, string, string];
  await run('ip', ['netns', 'add', before]);
  const a = await createNodeMountNs({ root: path.join(dir, 'a'), binds: BINDS });
  t.after(() => a.close());
  const b = await createNodeMountNs({ root: path.join(dir, 'b'), binds: BINDS });
  t.after(() => b.close());
  assert.ok(await netnsWorks(before), 'a netns made before the node namespaces still enters from the host');
  await run('ip', ['netns', 'add', after]);
  await a.exec(['nsenter', `--net=/run/netns/${after}`, 'true']); // made on the host later: seen inside
  await b.exec(['ip', 'netns', 'add', inside]); // made inside (as containerd makes a pod's): seen on the host
  assert.ok(await netnsWorks(inside), 'a netns made inside a node namespace enters from the host');
  await a.exec(['nsenter', `--net=/run/netns/${inside}`, 'true']);
  await b.close();
  await a.close();
  for (const n of names) assert.ok(await netnsWorks(n), `${n} still enters from the host after both closed`);
});

test('a missing target beside a bound file: the covered ancestor keeps the file bind', async (t) => {
  // /etc/hostname exists on every machine: bound first, then a missing dir under /etc makes /etc covered.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-mntns-file-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const missing = `/etc/eni-ipam-isolation-${process.pid}/d`;
  const binds: NodeBind[] = [{ nodePath: '/etc/hostname', kind: 'file' }, { nodePath: missing }];
  const before = machineState('/etc/hostname');
  const ns = await createNodeMountNs({ root: dir, binds, hideNode: false });
  t.after(() => ns.close());
  await ns.exec(['sh', '-c', 'printf node-name >/etc/hostname && printf x >"$1/f"', 'sh', missing]);
  assert.equal(await ns.exec(['cat', '/etc/hostname']), 'node-name');
  assert.equal(readFileSync(ns.hostPathOf('/etc/hostname')!, 'utf8'), 'node-name');
  assert.equal(machineState('/etc/hostname'), before, "the machine's /etc/hostname is untouched");
  assert.equal(existsSync(path.dirname(missing)), false, 'nothing made under /etc on the machine');
  await ns.close();
});

test("a node's hostname is its own: a process it starts sees it, the machine keeps its own", async (t) => {
  // A host-network pod shares its node's UTS namespace; Kubernetes' e2e specs ask such a
  // pod's /hostname and expect the node's name (not the machine's).
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-mntns-uts-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const machine = os.hostname();
  const ns = await createNodeMountNs({ root: dir, binds: [], hideNode: false, hostname: 'eni-node-uts' });
  t.after(() => ns.close());
  assert.equal((await ns.exec(['hostname'])).trim(), 'eni-node-uts');
  const { stdout } = await run('nsenter', [...ns.nsenterArgs, '--', 'hostname']);
  assert.equal(stdout.trim(), 'eni-node-uts', 'nsenterArgs enter the node UTS namespace too');
  assert.equal((await run('hostname')).stdout.trim(), machine, "the machine's hostname is untouched");
  await ns.close();
  assert.equal((await run('hostname')).stdout.trim(), machine);
});
