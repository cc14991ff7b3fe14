/**
 * `npm run release` (scripts/release.mjs) end to end: it writes the image archive, the
 * packaged chart with a helm repository index, the image's CycloneDX SBOM and SHA256SUMS;
 * the SBOM passes the CycloneDX schema and lists the image's Debian and npm packages (the
 * Node runtime with its CPE and license, every Debian package with its license and its
 * `.deb`'s SHA-256, one checked against the real `.deb` apt downloads), the
 * chart installs from the directory served as a static helm repository, and
 * `sha256sum -c` verifies (and catches a changed byte). The image build is the one
 * `npm run image` makes (a no-op when the image test already built it).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as CDX from '@cyclonedx/cyclonedx-library';
import { helm } from '../../kit/helm.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

let out = '';
let log = '';

before(async () => {
  out = await mkdtemp('/tmp/eni-ipam-release-');
  // A Debian point or security release on the mirror must not turn the suite red: the artifacts
  // are checked with drift allowed (and reported); the last test shows a release refusing it.
  const r = await run(
    process.execPath,
    [path.join(ROOT, 'scripts', 'release.mjs'), '--out', out, '--debian-drift', 'warn'],
    {
      cwd: ROOT,
      maxBuffer: 16 << 20,
    },
  ).catch((e: { stderr?: string; message: string }) => {
    throw new Error(`npm run release failed: ${e.stderr ?? e.message}`);
  });
  log = r.stderr;
  // Reported, not hidden: which Debian packages moved since the lock (none most days).
  const drift = /^eni-ipam release: warning: (.*)$/m.exec(log)?.[1];
  if (drift) process.stderr.write(`# ${drift}\n`);
});

after(async () => {
  if (out) await rm(out, { recursive: true, force: true });
});

test('the release directory holds the image, the chart and its index, the SBOM and SHA256SUMS', () => {
  const files = readdirSync(out).sort();
  const chartVersion = /^version: (\S+)$/m.exec(
    readFileSync(path.join(ROOT, 'charts/eni-ipam/Chart.yaml'), 'utf8'),
  )![1];
  assert.deepEqual(
    files,
    [
      'SHA256SUMS',
      `eni-ipam-${chartVersion}.tgz`,
      `eni-ipam-${version}.cdx.json`,
      `eni-ipam-${version}.oci.tar`,
      'index.yaml',
    ].sort(),
  );
  assert.match(log, /SBOM: (\d+) Debian packages \(\1 with their \.deb's SHA-256\), \d+ npm packages/);
});

test('sha256sum -c verifies SHA256SUMS, and fails once a file changes', async () => {
  const ok = await run('sha256sum', ['-c', 'SHA256SUMS'], { cwd: out });
  assert.equal(
    ok.stdout
      .trim()
      .split('\n')
      .filter((l) => / OK$/.test(l)).length,
    4,
    ok.stdout,
  );
  await appendFile(path.join(out, 'index.yaml'), '# changed\n');
  const bad = await run('sha256sum', ['-c', 'SHA256SUMS'], { cwd: out }).then(
    () => ({ stdout: 'exit 0' }),
    (e: { stdout: string }) => e,
  );
  assert.match(bad.stdout, /^index\.yaml: FAILED$/m);
});

test('the SBOM is valid CycloneDX 1.6 and lists the image’s Debian and npm packages', async () => {
  const text = readFileSync(path.join(out, `eni-ipam-${version}.cdx.json`), 'utf8');
  const errors = await new CDX.Validation.JsonStrictValidator(CDX.Spec.Version.v1dot6).validate(text);
  assert.equal(errors, null, JSON.stringify(errors));
  const bom = JSON.parse(text) as {
    bomFormat: string;
    metadata: { component: { type: string; name: string; purl: string } };
    components: { name: string; version: string; purl: string; hashes?: unknown[] }[];
  };
  assert.equal(bom.bomFormat, 'CycloneDX');
  assert.equal(bom.metadata.component.type, 'container');
  // The image's digest, as the build recorded it.
  const built = JSON.parse(readFileSync(path.join(ROOT, 'build/image', `eni-ipam-${version}.json`), 'utf8')) as {
    manifestDigest: string;
    contents: string;
  };
  assert.ok(
    decodeURIComponent(bom.metadata.component.purl).includes(built.manifestDigest),
    bom.metadata.component.purl,
  );
  const purls = new Set(bom.components.map((c) => decodeURIComponent(c.purl)));
  // Every package line of the built image's content list is a component, and nothing else is.
  const contents = readFileSync(built.contents, 'utf8').split('\n');
  const debs = contents.filter((l) => l.startsWith('deb '));
  const npm = contents.filter((l) => l.startsWith('npm '));
  assert.ok(debs.length > 50 && npm.length > 50, `${debs.length} debs, ${npm.length} npm packages`);
  for (const l of debs) {
    const [, name, ver, arch] = /^deb ([^=]+)=(\S+) (\S+)$/.exec(l)!;
    assert.ok(purls.has(`pkg:deb/debian/${name}@${ver}?arch=${arch}&distro=debian-12`), `${l} is not in the SBOM`);
  }
  for (const l of npm) {
    const [, name, ver] = /^npm (.+)@([^@]+)$/.exec(l)!;
    assert.ok(purls.has(`pkg:npm/${name}@${ver}`), `${l} is not in the SBOM`);
  }
  assert.equal(bom.components.length, debs.length + npm.length + 1, 'Debian + npm + the Node runtime');
  const ec2 = bom.components.find((c) => c.name === '@aws-sdk/client-ec2');
  assert.ok(ec2?.hashes?.length, 'npm components carry package-lock.json’s SHA-512');
  assert.ok(bom.components.some((c) => c.name === 'iproute2') && bom.components.some((c) => c.name === 'iptables'));
});

/** A component as the SBOM JSON has it (the fields these tests read). */
interface SbomComponent {
  name: string;
  version: string;
  purl: string;
  cpe?: string;
  licenses?: Array<{ license?: { id?: string; name?: string; text?: { content: string } }; expression?: string }>;
  hashes?: Array<{ alg: string; content: string }>;
  properties?: Array<{ name: string; value: string }>;
}

test('the SBOM gives the Node runtime its CPE and license, and each Debian package its license and .deb SHA-256', async () => {
  const bom = JSON.parse(readFileSync(path.join(out, `eni-ipam-${version}.cdx.json`), 'utf8')) as {
    components: SbomComponent[];
  };
  const node = bom.components.find((c) => /^node-linux-/.test(c.name));
  assert.ok(node, 'the Node runtime is a component');
  assert.equal(node.cpe, `cpe:2.3:a:nodejs:node.js:${node.version}:*:*:*:*:*:*:*`);
  assert.deepEqual(node.licenses, [{ license: { id: 'MIT', acknowledgement: 'declared' } }]);
  const debs = bom.components.filter((c) => c.purl.startsWith('pkg:deb/'));
  for (const d of debs) {
    assert.ok((d.licenses ?? []).length > 0, `${d.name} carries no license`);
    assert.ok(
      (d.licenses ?? []).every((l) => l.expression || l.license?.id || l.license?.name),
      `${d.name}: ${JSON.stringify(d.licenses)}`,
    );
    assert.match(
      d.hashes?.find((h) => h.alg === 'SHA-256')?.content ?? '',
      /^[0-9a-f]{64}$/,
      `${d.name} has no SHA-256`,
    );
    assert.match(
      d.properties?.find((p) => p.name === 'eni-ipam:copyright-file')?.value ?? '',
      /^\/usr\/share\/doc\/[^/]+\/copyright$/,
    );
  }
  // Machine-readable copyright files give SPDX ids: iproute2's says GPL-2 (GPL-2.0-only).
  const iproute2 = debs.find((d) => d.name === 'iproute2')!;
  assert.deepEqual(iproute2.licenses, [{ license: { id: 'GPL-2.0-only', acknowledgement: 'declared' } }]);
  // The hash is the real .deb's: apt downloads that version from the mirror the image was built from.
  const dir = mkdtempSync('/tmp/eni-ipam-deb-');
  try {
    await run('apt-get', ['download', '-q', `iproute2=${iproute2.version}`], { cwd: dir });
    const deb = readdirSync(dir).find((f) => f.endsWith('.deb'))!;
    const got = createHash('sha256')
      .update(readFileSync(path.join(dir, deb)))
      .digest('hex');
    assert.equal(iproute2.hashes!.find((h) => h.alg === 'SHA-256')!.content, got);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the packaged chart installs from the directory served as a helm repository', async () => {
  const server = createServer((req, res) => {
    const file = path.join(out, path.basename(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)));
    if (!existsSync(file)) return void res.writeHead(404).end();
    res.writeHead(200);
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const name = `eni-ipam-release-test-${process.pid}`;
    const add = await helm(['repo', 'add', '--force-update', name, url]);
    assert.equal(add.code, 0, add.stderr);
    const fromRepo = await helm(['template', 'eni', `${name}/eni-ipam`, '--namespace', 'kube-system']);
    await helm(['repo', 'remove', name]);
    assert.equal(fromRepo.code, 0, fromRepo.stderr);
    assert.match(fromRepo.stdout, /kind: DaemonSet/);
    // The packaged chart renders exactly what the chart in the repository renders.
    const fromDir = await helm(['template', 'eni', path.join(ROOT, 'charts/eni-ipam'), '--namespace', 'kube-system']);
    assert.equal(fromRepo.stdout, fromDir.stdout);
  } finally {
    server.close();
  }
});

/** Runs a script of the repository from its root; resolves with its exit status and stderr (never rejects on exit status). */
async function runScript(script: string, args: string[]): Promise<{ code: number; stderr: string }> {
  return run(process.execPath, [path.join(ROOT, 'scripts', script), ...args], { cwd: ROOT, maxBuffer: 16 << 20 }).then(
    (r) => ({ code: 0, stderr: r.stderr }),
    (e: { code?: number; stderr?: string; message: string }) => ({ code: e.code ?? -1, stderr: e.stderr ?? e.message }),
  );
}

test('a Debian package that moved: release and image refuse in one line naming it and the commands; tests warn and go on', async () => {
  // The lock as it would have been before a security update of zlib1g: the mirror's version is newer
  // (packages that moved on the mirror since the committed lock was written are named too).
  const lock = readFileSync(path.join(ROOT, 'image', 'contents-amd64.lock'), 'utf8');
  const line = /^deb zlib1g=(\S+) (\S+)$/m.exec(lock);
  assert.ok(line, 'the lock pins zlib1g');
  const dir = await mkdtemp('/tmp/eni-ipam-release-drift-');
  try {
    const old = path.join(dir, 'contents-amd64.lock');
    await writeFile(old, lock.replace(line[0], `deb zlib1g=${line[1]}~older ${line[2]}`));
    const esc = (x: string) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const moved = `Debian packages moved on the mirror since \\S+contents-amd64\\.lock was written: (?:[^;]+, )?zlib1g ${esc(line[1]!)}~older → [^,;]+(?:, [^;]+)?`;
    const lastLine = (stderr: string): string => stderr.trim().split('\n').at(-1)!;

    const rel = await runScript('release.mjs', ['--out', path.join(dir, 'out'), '--lock', old]);
    assert.equal(rel.code, 1, rel.stderr);
    const commands = `review them with \`diff \\S+ build/image/contents-amd64\\.lock\\.new\`, then accept them with \`npm run image -- --update-lock --lock \\S+\``;
    assert.match(lastLine(rel.stderr), new RegExp(`^eni-ipam release: ${moved}; ${commands}$`));
    assert.equal(existsSync(path.join(dir, 'out')), false, 'nothing released');

    // npm run image: as strict (the image is up to date: only the check runs again).
    const img = await runScript('image/build.mjs', ['--lock', old]);
    assert.equal(img.code, 1, img.stderr);
    assert.match(lastLine(img.stderr), new RegExp(`^eni-ipam image: ${moved}; ${commands}$`));

    // What the tests and `npm run cluster` run (kit/image-archive.ts): built, the packages named.
    const warned = await runScript('image/build.mjs', ['--lock', old, '--debian-drift', 'warn']);
    assert.equal(warned.code, 0, warned.stderr);
    assert.match(
      warned.stderr,
      new RegExp(
        `^eni-ipam image: warning: ${moved}; review: diff \\S+ \\S+; accept: npm run image -- --update-lock --lock \\S+$`,
        'm',
      ),
    );
    assert.equal(readFileSync(old, 'utf8').includes('~older'), true, 'a warning leaves the lock alone');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
