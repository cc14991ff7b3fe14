/**
 * The container image (docs/design.md#12-running-on-a-cluster item 2): `node scripts/image/build.mjs` (what `npm run image`
 * runs; skipped when its inputs are unchanged, so one build serves a whole run) writes an
 * OCI archive that a real containerd 1.6 imports and runs; the archive holds what ipamd
 * needs and nothing of the dev tool chain; the Dockerfile states the same entrypoint,
 * working dir, packages and staged tree; and a package that cannot be fetched fails the
 * build with one line naming it.
 *
 * Needs root, network access to the Debian mirror and the npm registry, and
 * `bash scripts/ensure-deps.sh --containerd --image`. Starts a containerd: run under
 * `flock /tmp/eni-ipam-containerd.lock`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { IPAMD_NODE_FLAGS } from '../../ipamd/v8-flags.js';
import { createNamedNetns } from '../../kit/netns.js';
import { startContainerd } from '../../kit/containerd.js';
import { buildDockerfile } from '../helpers/buildah-dockerfile.js';
import { isStaticElf, openOciArchive, type OciArchive } from '../helpers/oci-archive.js';

const execFileP = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const BUILD = path.join(ROOT, 'scripts', 'image', 'build.mjs');
const NODE_PIN = JSON.parse(readFileSync(path.join(ROOT, 'image', 'node-runtime.json'), 'utf8')) as {
  version: string;
  packages: Record<string, { name: string }>;
};

/** What build.mjs records in build/image/eni-ipam-<version>.json. */
interface BuildResult {
  archive: string;
  name: string;
  tag: string;
  manifestDigest: string;
  sizeBytes: number;
  node: string;
  seconds: number;
  upToDate: boolean;
}

/** Runs the image build CLI; resolves with its exit code and output (never rejects on exit status). */
async function runBuild(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BUILD, ...args], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as NodeJS.ErrnoException & { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Whether `p` is a symbolic link (dangling ones included). */
function isSymlink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

let built: BuildResult;
let oci: OciArchive;
/** Every member of every layer (a path present in any layer is in the image: no whiteouts here). */
let members: Set<string>;

before(async () => {
  // As the tests and `npm run cluster` build it (kit/image-archive.ts): Debian packages that moved on
  // the mirror since the content lock was written are reported, not fatal (npm run release refuses them).
  const r = await runBuild(['--debian-drift', 'warn']);
  assert.equal(r.code, 0, `image build failed: ${r.stderr}`);
  const drift = /^eni-ipam image: warning: (.*)$/m.exec(r.stderr)?.[1];
  if (drift) process.stderr.write(`# ${drift}\n`);
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  built = JSON.parse(
    readFileSync(path.join(ROOT, 'build', 'image', `eni-ipam-${version}.json`), 'utf8'),
  ) as BuildResult;
  process.stderr.write(
    `# image ${built.archive}: ${(built.sizeBytes / 1048576).toFixed(1)} MiB, built in ${built.seconds} s${built.upToDate ? ' (up to date)' : ''}\n`,
  );
  oci = await openOciArchive(built.archive);
  members = new Set();
  for (let i = 0; i < oci.manifest.layers.length; i++) for (const m of await oci.layerMembers(i)) members.add(m);
});
after(async () => {
  await oci?.close();
});

test('archive: named for containerd, entrypoint, working dir, root user, four layers', () => {
  const ann = oci.index.manifests[0]!.annotations ?? {};
  assert.equal(ann['io.containerd.image.name'], built.name);
  assert.equal(ann['org.opencontainers.image.ref.name'], built.tag);
  assert.match(built.name, /^docker\.io\/library\/eni-ipam:\d+\.\d+\.\d+/);
  assert.equal(oci.config.os, 'linux');
  assert.deepEqual(oci.config.config.Entrypoint, ['/app/bin/ipamd']);
  assert.equal(oci.config.config.WorkingDir, '/app');
  assert.equal(oci.config.config.User, '0:0');
  assert.equal(oci.manifest.layers.length, 4);
  assert.equal(oci.config.config.Labels?.['io.eni-ipam.node-runtime'], built.node);
});

test('root filesystem: node, ip, both iptables backends, nsenter, the shim, ipamd; no dev tool chain, no apt', async () => {
  for (const p of [
    './usr/local/bin/node',
    './usr/sbin/ip',
    './usr/sbin/iptables-legacy',
    './usr/sbin/iptables-nft',
    './usr/bin/nsenter',
    './etc/ssl/certs/ca-certificates.crt',
    './app/bin/ipamd',
    './app/dist/ipamd/main.js',
    './app/dist/cni-plugin/eni-ipam',
    './app/dist/cni-plugin/eni-ipam.cjs',
    './app/dist/ipamd/probe.js',
    './app/dist/cni-plugin/eni-ipam-probe',
    './app/dist/ipamd/node-init.js',
    './app/proto/ipam.proto',
    './app/proto/cri/api.proto',
    './app/config/10-eni-ipam.conflist',
    './app/package.json',
    './app/node_modules/@aws-sdk/client-ec2/package.json',
    './app/node_modules/@grpc/grpc-js/package.json',
  ])
    assert.ok(members.has(p), `${p} is in the image`);
  // Every package package-lock.json marks dev-only (typescript, esbuild, @esbuild/*, ...) is absent.
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  const devOnly = Object.entries(lock.packages)
    .filter(([k, v]) => k.startsWith('node_modules/') && v.dev)
    .map(([k]) => k);
  assert.ok(
    devOnly.includes('node_modules/typescript') && devOnly.includes('node_modules/esbuild'),
    'the lock marks the tool chain dev-only',
  );
  for (const k of devOnly) assert.ok(!members.has(`./app/${k}/`), `dev dependency ${k} is not in the image`);
  assert.ok(
    members.has('./app/node_modules/@types/node/'),
    '(a production dependency of @kubernetes/client-node stays)',
  );
  for (const p of [
    './usr/bin/apt',
    './usr/bin/apt-get',
    './etc/apt/',
    './usr/share/perl/',
    './app/dist/test/',
    './app/dist/sim/',
    './usr/bin/gcc',
  ]) {
    assert.ok(!members.has(p), `${p} is not in the image`);
  }
  // The shim runs on hosts without the image's libc: statically linked.
  const appLayer = oci.manifest.layers.length - 1;
  assert.ok(
    isStaticElf(await oci.layerFile(appLayer, './app/dist/cni-plugin/eni-ipam')),
    'the shim has no ELF interpreter',
  );
  assert.equal(
    (await oci.layerFile(appLayer, './app/bin/ipamd')).toString(),
    '#!/bin/sh\n# eni-ipam image entrypoint: ipamd on the image\'s Node runtime.\n# A small resident set (see dist/ipamd/v8-flags.js): glibc malloc gives freed memory back, V8 flags (refused in NODE_OPTIONS).\nexport MALLOC_ARENA_MAX=1 MALLOC_TRIM_THRESHOLD_=65536 MALLOC_MMAP_THRESHOLD_=65536\nexec /usr/local/bin/node --max-semi-space-size=1 --max-old-space-size=128 /app/dist/ipamd/main.js "$@"\n',
  );
});

test('Dockerfile agrees with the archive: base packages, staged tree, entrypoint, working dir, PATH, user', async () => {
  const df = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const instr = (kw: string): string[] =>
    [...df.matchAll(new RegExp(`^${kw}\\s+(.+)$`, 'gm'))].map((m) => m[1]!.trim());
  assert.deepEqual(instr('FROM'), ['debian:bookworm-slim']);
  assert.deepEqual(
    instr('ENTRYPOINT').map((e) => JSON.parse(e) as string[]),
    [oci.config.config.Entrypoint],
  );
  assert.deepEqual(instr('WORKDIR'), [oci.config.config.WorkingDir]);
  assert.deepEqual(instr('USER'), [oci.config.config.User]);
  assert.deepEqual(
    instr('ENV'),
    (oci.config.config.Env ?? []).filter((e) => e.startsWith('PATH=')),
  );
  assert.ok(
    instr('COPY').includes('image/debian-packages.txt /tmp/debian-packages.txt'),
    'the Dockerfile installs the same package list',
  );
  assert.match(
    df,
    /apt-get install -y --no-install-recommends \$\(sed -e 's\/#\.\*\/\/' \/tmp\/debian-packages\.txt\)/,
  );
  assert.ok(instr('COPY').includes('build/image/stage/ /'), 'the Dockerfile copies the staged tree');
  // The staged tree the Dockerfile copies is exactly what the archive's three upper layers hold.
  const stageDir = path.join(ROOT, 'build', 'image', 'stage');
  const staged = new Set<string>();
  const walk = async (rel: string): Promise<void> => {
    for (const e of await readdir(path.join(stageDir, rel), { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) {
        staged.add(`${r}/`);
        await walk(r);
      } else staged.add(r);
    }
  };
  await walk('.');
  const upper = new Set<string>();
  for (let i = 1; i < oci.manifest.layers.length; i++) for (const m of await oci.layerMembers(i)) upper.add(m);
  const onlyStaged = [...staged].filter((p) => !upper.has(p));
  const onlyArchive = [...upper].filter((p) => !staged.has(p));
  assert.deepEqual(
    { onlyStaged: onlyStaged.slice(0, 5), onlyArchive: onlyArchive.slice(0, 5) },
    { onlyStaged: [], onlyArchive: [] },
  );
});

test('the Dockerfile built by buildah holds the same /app, Node, packages, entrypoint and working dir', async (t) => {
  const img = await buildDockerfile({ contextDir: ROOT, cacheDir: path.join(ROOT, 'build', 'image', 'cache') });
  t.after(() => img.remove());
  assert.deepEqual(img.config.Entrypoint, oci.config.config.Entrypoint);
  assert.equal(img.config.WorkingDir, oci.config.config.WorkingDir);
  assert.equal(img.config.User, oci.config.config.User);
  // Every path the archive's upper layers (node, node_modules, app) hold, with the same type.
  const upper: string[] = [];
  for (let i = 1; i < oci.manifest.layers.length; i++) upper.push(...(await oci.layerMembers(i)));
  const wrong = upper.filter((m) => {
    const p = path.join(img.rootfs, m);
    return m.endsWith('/') ? !existsSync(p) || !statSync(p).isDirectory() : !existsSync(p) && !isSymlink(p);
  });
  assert.deepEqual(wrong.slice(0, 5), [], 'paths of the archive missing from the Dockerfile build');
  const extra = (await readdir(path.join(img.rootfs, 'app'), { recursive: true }))
    .map((r) => `./app/${r}`)
    .filter((p) => !members.has(p) && !members.has(`${p}/`));
  assert.deepEqual(extra.slice(0, 5), [], 'paths of the Dockerfile build under /app missing from the archive');
  const { stdout: nodeV } = await execFileP('chroot', [img.rootfs, '/usr/local/bin/node', '--version']);
  assert.equal(nodeV.trim(), `v${NODE_PIN.version}`);
  const wanted = readFileSync(path.join(ROOT, 'image', 'debian-packages.txt'), 'utf8')
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean);
  const { stdout: dpkg } = await execFileP('chroot', [
    img.rootfs,
    'dpkg-query',
    '-W',
    '-f',
    '${Package} ${Status}\n',
    ...wanted,
  ]);
  for (const p of wanted)
    assert.match(
      dpkg,
      new RegExp(`^${p.replace(/[+.]/g, '\\$&')}(:\\S+)? install ok installed$`, 'm'),
      `${p} installed by the Dockerfile`,
    );
});

test('containerd imports the archive and runs node, ip, iptables and the entrypoint from it', async (t) => {
  const base = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-image-'));
  t.after(() => rm(base, { recursive: true, force: true }));
  const netns = await createNamedNetns(`eni-img-${process.pid}`);
  t.after(() => netns.remove());
  const cniConfDir = path.join(base, 'net.d');
  await execFileP('mkdir', ['-p', cniConfDir]);
  const ctrd = await startContainerd({
    baseDir: path.join(base, 'containerd'),
    nodeNetnsPath: netns.path,
    cniBinDir: '/usr/lib/cni',
    cniConfDir,
  });
  t.after(() => ctrd.stop());
  const ctr = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
    execFileP('ctr', ['--address', ctrd.socket, '--namespace', 'k8s.io', ...args], {
      env,
      maxBuffer: 16 * 1024 * 1024,
    });

  const imported = await ctr(['images', 'import', built.archive]);
  assert.match(imported.stdout + imported.stderr, new RegExp(built.name.replace(/[.]/g, '\\.')));
  const { stdout: names } = await ctr(['images', 'ls', '-q']);
  assert.ok(names.split('\n').includes(built.name), `containerd lists ${built.name}: ${names}`);

  const fifoDir = path.join(base, 'fifo');
  await execFileP('mkdir', ['-p', fifoDir]);
  let n = 0;
  const runOnce = async (args: string[], extra: string[]): Promise<{ code: number; out: string }> => {
    const id = `eni-image-test-${process.pid}-${n++}`;
    try {
      // The IO FIFOs in a dir of the test's (ctr's default, /run/containerd/fifo, is a machine path,
      // and not the one containerd's own mount namespace sees).
      const r = await ctr(['run', '--rm', '--fifo-dir', fifoDir, ...extra, built.name, id, ...args]);
      return { code: 0, out: r.stdout + r.stderr };
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof err.code === 'number' ? err.code : -1, out: `${err.stdout ?? ''}${err.stderr ?? ''}` };
    }
  };
  // Under load `ctr run` can exit 0 without the output of a command that ends at once (a CI
  // run beside two others saw `ip -V` print nothing); the command ran, so ask again.
  const runIn = async (args: string[], extra: string[] = []): Promise<{ code: number; out: string }> => {
    let r = await runOnce(args, extra);
    for (let i = 0; i < 2 && r.code === 0 && r.out === ''; i++) r = await runOnce(args, extra);
    return r;
  };
  const nodeV = await runIn(['node', '--version']);
  assert.equal(nodeV.code, 0, nodeV.out);
  assert.equal(nodeV.out.trim(), `v${NODE_PIN.version}`);
  assert.match(NODE_PIN.version, /^(22|24)\./, 'a supported LTS line');
  const ipV = await runIn(['ip', '-V']);
  assert.equal(ipV.code, 0, ipV.out);
  assert.match(ipV.out, /^ip utility, iproute2-/);
  const tools = await runIn(['sh', '-c', 'iptables-legacy -V && iptables-nft -V && nsenter --version']);
  assert.equal(tools.code, 0, tools.out);
  assert.match(tools.out, /iptables v[\d.]+ \(legacy\)/);
  assert.match(tools.out, /iptables v[\d.]+ \(nf_tables\)/);
  assert.match(tools.out, /nsenter from util-linux/);
  // The entrypoint loads ipamd's whole module graph on the image's Node with production
  // dependencies only, then refuses a bad variable with one line naming it.
  // The Node probe runs on the image's Node: no socket is exit code 2 ("no answer").
  const probe = await runIn([
    'node',
    '/app/dist/ipamd/probe.js',
    '--socket',
    '/run/no-ipamd.sock',
    '--timeout',
    '2000',
  ]);
  assert.equal(probe.code, 2, probe.out);
  // The chart's probe is the static one: same exit code, no Node.
  const native = await runIn(['/app/dist/cni-plugin/eni-ipam-probe', '--socket', '/run/no-ipamd.sock']);
  assert.equal(native.code, 2, native.out);
  // The operator CLI runs on the image's Node with production dependencies only.
  const cli = await runIn(['/app/bin/eni-ipam', 'max-pods', '--instance-type', 'm5.large']);
  assert.equal(cli.code, 0, cli.out);
  assert.match(cli.out, /m5\.large: max pods 29/);
  const cliDown = await runIn(['/app/bin/eni-ipam', 'status', '--socket', '/run/no-ipamd.sock']);
  assert.equal(cliDown.code, 3, cliDown.out);
  assert.match(cliDown.out, /^eni-ipam: cannot reach ipamd introspection/m);
  // ipamd's bundle loads with the code cache the image build made with this node, under the entrypoint's flags.
  const loaded = await runIn([
    'node',
    ...IPAMD_NODE_FLAGS,
    '--input-type=module',
    '-e',
    "import('/app/dist/ipamd/bundle-loader.js').then((m) => { process.stdout.write(JSON.stringify(m.loadIpamdBundle(m.readIpamdBundle()).loaded)); process.exit(0); })",
  ]);
  assert.equal(loaded.code, 0, loaded.out);
  assert.match(loaded.out, /"from":"bundle","codeCache":"accepted"/);
  const bad = await runIn([], ['--env', 'WARM_ENI_TARGET=lots']);
  assert.equal(bad.code, 1, bad.out);
  assert.match(bad.out, /^eni-ipamd: .*WARM_ENI_TARGET/m);
});

test('a package that cannot be fetched fails the build with one line naming it', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-image-bad-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const pin = JSON.parse(readFileSync(path.join(ROOT, 'image', 'node-runtime.json'), 'utf8')) as { version: string };
  pin.version = '0.0.1-no-such-version';
  await writeFile(path.join(dir, 'pin.json'), JSON.stringify(pin));
  await writeFile(path.join(dir, 'packages.txt'), 'iproute2\nno-such-package-eni-ipam\n');
  const lastLines = (stderr: string): string[] =>
    stderr
      .split('\n')
      .filter((l) => l && !/^eni-ipam image: (npm|mmdebstrap|layers|OCI|ipamd code cache|no ipamd code cache)/.test(l));

  const npm = await runBuild(['--node-pin', path.join(dir, 'pin.json')]);
  assert.equal(npm.code, 1);
  assert.deepEqual(lastLines(npm.stderr).length, 1, npm.stderr);
  assert.match(
    lastLines(npm.stderr)[0]!,
    /^eni-ipam image: cannot fetch the npm package node-linux-(x64|arm64)@0\.0\.1-no-such-version: .*No matching version/,
  );

  const deb = await runBuild(['--packages-file', path.join(dir, 'packages.txt')]);
  assert.equal(deb.code, 1);
  assert.deepEqual(lastLines(deb.stderr).length, 1, deb.stderr);
  assert.match(
    lastLines(deb.stderr)[0]!,
    /^eni-ipam image: cannot fetch the Debian packages iproute2, no-such-package-eni-ipam from http\S+.*: E: Unable to locate package no-such-package-eni-ipam$/,
  );
});
