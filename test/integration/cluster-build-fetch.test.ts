/**
 * cluster/build.sh's module download against a module proxy on loopback (GOPROXY, an empty
 * module cache and a cache dir of the test's own; the crictl wrapper module, copied): a proxy
 * that drops every connection is asked three times (5 s then 10 s apart), each retry said on
 * stderr, then one line names the module; a proxy that answers 404 (the version does not
 * exist) is not asked again. Nothing is built and the machine's caches are not touched.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const skip = spawnSync('go', ['version']).status === 0 ? false : 'needs go on PATH';

/** Runs build.sh crictl from a copy, against a proxy that does `answer`; its status, stderr and the requests the proxy saw. */
async function buildAgainst(answer: 'drop' | '404'): Promise<{ code: number; stderr: string; requests: string[] }> {
  const dir = await mkdtemp('/tmp/eni-ipam-build-fetch-');
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(req.url ?? '');
    if (answer === 'drop') req.socket.destroy();
    else res.writeHead(404).end('not found');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await cp(path.join(ROOT, 'cluster', 'build.sh'), path.join(dir, 'cluster', 'build.sh'));
    await cp(path.join(ROOT, 'cluster', 'go', 'crictl'), path.join(dir, 'cluster', 'go', 'crictl'), {
      recursive: true,
    });
    const env = {
      ...process.env,
      GOPROXY: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      GOSUMDB: 'off',
      GOMODCACHE: path.join(dir, 'mod'),
      GOFLAGS: '-modcacherw',
      ENI_IPAM_CLUSTER_CACHE: path.join(dir, 'cache'),
    };
    return await new Promise((resolve) =>
      execFile(
        'bash',
        [path.join(dir, 'cluster', 'build.sh'), 'crictl'],
        { env, timeout: 120_000 },
        (err, _out, stderr) =>
          resolve({ code: err ? Number((err as { code?: number }).code ?? -1) : 0, stderr, requests }),
      ),
    );
  } finally {
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('a proxy that drops the connection is asked three times, then one line names the module', { skip }, async () => {
  const r = await buildAgainst('drop');
  assert.equal(r.code, 1, r.stderr);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.filter((l) => / failed \(attempt [12] of 3\): .*; trying again$/.test(l)).length, 2, r.stderr);
  assert.match(
    lines.at(-1)!,
    /^eni-ipam cluster build: cannot fetch a Go module for crictl: sigs\.k8s\.io\/cri-tools@v\S+: /,
  );
  const zips = r.requests.filter((u) => u.startsWith('/sigs.k8s.io/cri-tools/@v/') && u.endsWith('.zip'));
  assert.equal(zips.length, 3, `asked for the module three times: ${r.requests.join(' ')}`);
});

test('a version the proxy does not have (404) fails at once, naming it', { skip }, async () => {
  const r = await buildAgainst('404');
  assert.equal(r.code, 1, r.stderr);
  assert.doesNotMatch(r.stderr, /trying again/);
  assert.match(
    r.stderr.trim().split('\n').at(-1)!,
    /^eni-ipam cluster build: cannot fetch a Go module for crictl: sigs\.k8s\.io\/cri-tools@v\S+: reading http:\/\/127\.0\.0\.1:\d+\/\S+: 404 Not Found$/,
  );
});
