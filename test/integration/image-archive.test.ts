/**
 * The image as the tests and `npm run cluster` get it (kit/image-archive.ts
 * `ensureImageArchive()`, in a process of its own each time: it is memoised per process):
 * Debian packages that moved on the mirror since the content lock was written are reported
 * and the archive is used; any other difference fails with the build's own one-line reason
 * first (what `npm run cluster -- up` prints), not the progress lines before it. The lock is
 * a copy changed the way a mirror update or a code change would, passed with
 * ENI_IPAM_IMAGE_LOCK (the build's `--lock`); the image build is a no-op when the image test
 * already built it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ARCHIVE_JS = fileURLToPath(new URL('../../kit/image-archive.js', import.meta.url));
const LOCK = readFileSync(path.join(ROOT, 'image', 'contents-amd64.lock'), 'utf8');
const skip = process.arch !== 'x64' ? 'the committed lock is amd64' : false;

/** ensureImageArchive() in a child process with `lock` as the content lock: its outcome, drift and stderr. */
async function ensureWith(lock: string): Promise<{ archive?: string; drift?: string; error?: string; stderr: string }> {
  const dir = await mkdtemp('/tmp/eni-ipam-image-archive-');
  try {
    const file = path.join(dir, 'contents-amd64.lock');
    await writeFile(file, lock);
    const script = `const m = await import(${JSON.stringify(ARCHIVE_JS)});
try { const archive = await m.ensureImageArchive(); console.log(JSON.stringify({ archive, drift: m.imageDebianDrift() })); }
catch (e) { console.log(JSON.stringify({ error: e.message })); }`;
    const env: NodeJS.ProcessEnv = { ...process.env, ENI_IPAM_IMAGE_LOCK: file };
    delete env['ENI_IPAM_IMAGE_ARCHIVE'];
    const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--input-type=module', '-e', script],
        { cwd: ROOT, env, maxBuffer: 16 << 20, timeout: 900_000 },
        (err, out, errOut) =>
          err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve({ stdout: out, stderr: errOut }),
      ),
    );
    return { ...(JSON.parse(stdout.trim().split('\n').at(-1)!) as object), stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('a Debian package that moved on the mirror: the archive is used and the packages named', { skip }, async () => {
  const line = /^deb (zlib1g)=(\S+) (\S+)$/m.exec(LOCK);
  assert.ok(line, 'the lock pins zlib1g');
  const r = await ensureWith(LOCK.replace(line[0], `deb zlib1g=${line[2]}~older ${line[3]}`));
  assert.equal(r.error, undefined, r.stderr);
  assert.match(r.archive!, /eni-ipam-\d+\.\d+\.\d+.*\.oci\.tar$/);
  assert.match(r.drift!, /^Debian packages moved on the mirror since \S+ was written: (?:[^;]+, )?zlib1g \S+~older → /);
  assert.match(r.drift!, /; accept: npm run image -- --update-lock --lock \S+$/);
  assert.match(r.stderr, /^eni-ipam image: warning: Debian packages moved/m, 'reported on stderr');
});

test('any other difference: the error starts with the build’s own reason', { skip }, async () => {
  // What a code change without its lock update looks like: a path the image does not have.
  const r = await ensureWith(`${LOCK.trimEnd()}\npath -rw-r--r-- 0:0 ./app/not-in-the-image\n`);
  assert.ok(r.error, 'it failed');
  const first = r.error.split('\n')[0]!;
  assert.match(
    first,
    /^npm run image failed: the image differs from \S+contents-amd64\.lock \(\+0 -1 lines; - path -rw-r--r-- 0:0 \.\/app\/not-in-the-image\); see diff .*; if intended, run `npm run image -- --update-lock --lock \S+`$/,
  );
  assert.doesNotMatch(first, /npm pack|mmdebstrap/);
});
