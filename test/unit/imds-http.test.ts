/**
 * The IMDS client over node:http (ipamd/cloud/imds-http.ts), against a real HTTP server
 * on loopback: the IMDSv2 token flow, one fresh token after a 401, 404 as "absent",
 * errors and timeouts as ImdsError status 0, an oversized body refused; connections
 * kept alive, and a request whose kept connection the server closed sent again.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'node:test';
import { ImdsClient, ImdsError } from '../../ipamd/cloud/imds.js';
import { MAX_BODY_BYTES, httpRequest } from '../../ipamd/cloud/imds-http.js';
import { LOADED_MS } from '../helpers/imds-timeout.js';

/** A server answering with `handle`; closed when the test ends. */
async function server(
  t: test.TestContext,
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): Promise<string> {
  const s = http.createServer(handle);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => {
    s.closeAllConnections();
    s.close();
  });
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

test('token flow: PUT for a token, GETs carry it; a 401 gets one fresh token; 404 is absent', async (t) => {
  const seen: string[] = [];
  let tokens = 0;
  let rejectNext = false;
  const base = await server(t, (req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers['x-aws-ec2-metadata-token'] ?? ''}`);
    if (req.url === '/latest/api/token') {
      assert.equal(req.method, 'PUT');
      assert.equal(req.headers['x-aws-ec2-metadata-token-ttl-seconds'], '21600');
      return res.end(`tok${++tokens}`);
    }
    if (req.url === '/latest/meta-data/instance-type') {
      if (rejectNext) {
        rejectNext = false;
        res.statusCode = 401;
        return res.end();
      }
      return res.end('m5.large\n');
    }
    res.statusCode = 404;
    res.end('not found');
  });
  const c = new ImdsClient({ endpoint: base, timeoutMs: LOADED_MS });
  assert.equal(await c.get('meta-data/instance-type'), 'm5.large\n');
  assert.equal(await c.getOptional('meta-data/nothing'), undefined);
  rejectNext = true;
  assert.equal(await c.get('meta-data/instance-type'), 'm5.large\n');
  assert.deepEqual(seen, [
    'PUT /latest/api/token ',
    'GET /latest/meta-data/instance-type tok1',
    'GET /latest/meta-data/nothing tok1',
    'GET /latest/meta-data/instance-type tok1',
    'PUT /latest/api/token ',
    'GET /latest/meta-data/instance-type tok2',
  ]);
  await assert.rejects(c.get('meta-data/nothing'), (e: unknown) => e instanceof ImdsError && e.status === 404);
});

test('an unreachable endpoint and a silent one are ImdsError status 0, within the timeout', async (t) => {
  const closed = await server(t, () => {});
  const silent = new ImdsClient({ endpoint: closed, timeoutMs: 200 });
  const t0 = Date.now();
  await assert.rejects(
    silent.get('meta-data/mac'),
    (e: unknown) => e instanceof ImdsError && e.status === 0 && /timed out after 200 ms/.test(e.message),
  );
  assert.ok(Date.now() - t0 < 5000, 'the timeout bounds the wait');
  // A port nobody listens on (the server above is closed after this test; take a fresh one and close it).
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  await assert.rejects(
    new ImdsClient({ endpoint: `http://127.0.0.1:${port}` }).get('meta-data/mac'),
    (e: unknown) => e instanceof ImdsError && e.status === 0 && /unreachable/.test(e.message),
  );
});

test('httpRequest refuses a body over the cap and a non-http URL', async (t) => {
  const base = await server(t, (_req, res) => {
    res.write(Buffer.alloc(MAX_BODY_BYTES, 'a'));
    res.end('b');
  });
  await assert.rejects(httpRequest(base, { timeoutMs: 5000 }), /answer over/);
  await assert.rejects(httpRequest('file:///etc/passwd', { timeoutMs: 1000 }), /only http: and https:/);
});

test('IMDS connections are kept alive: a token and 20 reads in a row take one connection', async (t) => {
  const sockets = new Set<unknown>();
  const base = await server(t, (req, res) => {
    sockets.add(req.socket);
    res.end(req.url === '/latest/api/token' ? 'tok' : 'v');
  });
  const c = new ImdsClient({ endpoint: base, timeoutMs: LOADED_MS });
  t.after(() => c.close());
  for (let i = 0; i < 20; i++) assert.equal(await c.get('meta-data/mac'), 'v');
  assert.equal(sockets.size, 1);
});

test('a kept connection the server closes as the next request arrives: sent again on a new one', async (t) => {
  const sockets = new Set<unknown>();
  let served = 0;
  const base = await server(t, (req, res) => {
    // The server closes a connection that already served a request (an idle limit hit
    // just as the client reused it): the request on it never gets an answer.
    if (sockets.has(req.socket)) return req.socket.destroy();
    sockets.add(req.socket);
    served++;
    res.end(req.url === '/latest/api/token' ? 'tok' : `v${served}`);
  });
  const c = new ImdsClient({ endpoint: base, timeoutMs: LOADED_MS });
  t.after(() => c.close());
  assert.equal(await c.get('meta-data/mac'), 'v2', 'token on the first connection, the read on a second');
  assert.equal(await c.get('meta-data/mac'), 'v3', 'the reused connection was closed: sent again on a new one');
  assert.equal(await c.get('meta-data/mac'), 'v4');
  assert.equal(sockets.size, 4);
  // A silent server is not "closed under us": the timeout is not resent.
  const silent = await server(t, () => {});
  const s = new ImdsClient({ endpoint: silent, timeoutMs: 200 });
  t.after(() => s.close());
  await assert.rejects(s.get('meta-data/mac'), /timed out after 200 ms/);
});
