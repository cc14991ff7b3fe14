/**
 * The IMDS client's session token (ipamd/cloud/imds.ts): reads that go out together share
 * one `PUT /latest/api/token` (a start's first reads do), against a real HTTP server that
 * counts them; a failed token fetch fails its waiters and the next read asks again; the
 * periodic VPC CIDR recheck is one read.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ImdsClient, ImdsError } from '../../ipamd/cloud/imds.js';
import { LOADED_MS } from '../helpers/imds-timeout.js';

async function server(t: { after(fn: () => Promise<void>): void }, failPuts = 0) {
  const seen = { puts: 0, gets: 0 };
  const s = http.createServer((req, res) => {
    if (req.method === 'PUT' && req.url === '/latest/api/token') {
      seen.puts++;
      // Answer a little later, so that the reads of a batch all wait for the same fetch.
      setTimeout(() => {
        if (seen.puts <= failPuts) res.writeHead(500).end('no');
        else res.writeHead(200).end('tok');
      }, 20);
      return;
    }
    seen.gets++;
    if (req.headers['x-aws-ec2-metadata-token'] !== 'tok') return void res.writeHead(401).end();
    res.writeHead(200).end(req.url);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => s.close(() => r())));
  return { seen, endpoint: `http://127.0.0.1:${(s.address() as AddressInfo).port}` };
}

test('reads that go out together fetch one token between them', async (t) => {
  const { seen, endpoint } = await server(t);
  const imds = new ImdsClient({ endpoint, timeoutMs: LOADED_MS });
  const paths = ['meta-data/instance-id', 'meta-data/mac', 'meta-data/local-ipv4', 'meta-data/instance-type'];
  const got = await Promise.all(paths.map((p) => imds.get(p)));
  assert.deepEqual(
    got,
    paths.map((p) => `/latest/${p}`),
  );
  assert.deepEqual(seen, { puts: 1, gets: 4 }, 'one token PUT for four concurrent reads');
  await imds.get('meta-data/mac');
  assert.equal(seen.puts, 1, 'the token is kept for later reads');
});

test('a failed token fetch fails the reads waiting for it; the next read fetches again', async (t) => {
  const { seen, endpoint } = await server(t, 1);
  const imds = new ImdsClient({ endpoint, timeoutMs: LOADED_MS });
  const r = await Promise.allSettled([imds.get('meta-data/mac'), imds.get('meta-data/instance-id')]);
  assert.deepEqual(
    r.map((x) => x.status),
    ['rejected', 'rejected'],
  );
  for (const x of r) assert.ok((x as PromiseRejectedResult).reason instanceof ImdsError);
  assert.equal(seen.puts, 1, 'both waited for the same fetch');
  assert.equal(await imds.get('meta-data/mac'), '/latest/meta-data/mac');
  assert.equal(seen.puts, 2, 'a new fetch after the failure');
});

test("the VPC CIDR recheck reads one path, not the ENI's nine", async (t) => {
  const { seen, endpoint } = await server(t);
  const imds = new ImdsClient({ endpoint, timeoutMs: LOADED_MS });
  const got = await imds.vpcCidrs('0e:aa:bb:cc:dd:ee');
  assert.deepEqual(got, ['/latest/meta-data/network/interfaces/macs/0e:aa:bb:cc:dd:ee/vpc-ipv4-cidr-blocks']);
  assert.deepEqual(seen, { puts: 1, gets: 1 });
});
