/**
 * ipamd's Kubernetes pod source against a server (or proxy in front of one) that answers
 * every pod watch with 200 and ends it at once, with no event: the source must back off
 * like after an error, never resume in a loop as fast as the server answers. A real
 * kube-apiserver cannot be made to do this, so the server here is a plain HTTP server on
 * 127.0.0.1 answering the list as kube-apiserver does and cutting every watch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { KubePodSource } from '../../ipamd/kube/pod-source.js';
import { waitFor } from '../../kit/wait.js';

test('a watch the server ends at once, empty, is a failure: the source backs off', async (t) => {
  const calls = { list: 0, watch: 0, node: 0 };
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    res.setHeader('Content-Type', 'application/json');
    if (u.pathname === '/api/v1/pods' && u.searchParams.get('watch') === 'true') {
      calls.watch++;
      res.writeHead(200); // headers, then the end: no event
      return res.end();
    }
    if (u.pathname === '/api/v1/pods') {
      calls.list++;
      return res.end(
        JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '7' }, items: [] }),
      );
    }
    calls.node++;
    res.writeHead(404);
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  server.unref();
  const dir = await mkdtemp(join(tmpdir(), 'eni-ipam-short-watch-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await writeFile(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${url}", insecure-skip-tls-verify: true}}]\n` +
      `users: [{name: u, user: {token: "t"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
  );
  const s = new KubePodSource({ nodeName: 'node-1', kubeconfigPath: kubeconfig, retryMinMs: 50, retryMaxMs: 400 });
  t.after(() => s.stop());
  s.start();
  await waitFor('the first watch', () => calls.watch >= 1, 5000).catch((e: Error) => {
    throw new Error(`${e.message}; calls ${JSON.stringify(calls)}; source ${JSON.stringify(s.snapshot())}`);
  });
  const t0 = Date.now();
  const w0 = calls.watch;
  await waitFor('2 s of retries', () => Date.now() - t0 >= 2000, 5000, 100);
  const watches = calls.watch - w0;
  // Backing off from 50 ms (jitter 50-100 %) doubling to 400 ms: at most ~12 watches in 2 s.
  // Resuming at once, the old source made hundreds.
  assert.ok(watches <= 15, `${watches} watches in 2 s`);
  assert.ok(watches >= 2, `still retrying: ${watches} watches in 2 s`);
  assert.equal(s.snapshot().synced, false, 'a source whose watches end at once is not synced');
  assert.match(s.snapshot().lastError ?? '', /ended by the server/);
});
