/**
 * ipamd's HTTP endpoints (observability/http-endpoints.ts) on real loopback sockets: both start
 * on the ports asked for and close together; a metrics port already taken fails the start
 * and leaves no introspection server listening.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { createMetrics } from '../../ipamd/observability/metrics.js';
import { startHttpEndpoints } from '../../ipamd/observability/http-endpoints.js';

const source = { status: () => ({ ok: true }), allocations: () => [] };

/** Both endpoints enabled (or both disabled) on the given bind addresses. */
const config = (disabled: boolean, introspection = '127.0.0.1:0', metrics = '127.0.0.1:0') => ({
  disableIntrospection: disabled,
  introspectionBindAddress: introspection,
  disableMetrics: disabled,
  metricsBindAddress: metrics,
});

/** Listens on 127.0.0.1 port 0; resolves with the server and its port. */
async function occupy(): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as net.AddressInfo).port };
}

/** True when something accepts a TCP connection on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

test('both endpoints serve on their ports and close together', async () => {
  const ep = await startHttpEndpoints(config(false), source, createMetrics({ processMetrics: false }));
  const status = await fetch(`http://127.0.0.1:${ep.introspectionPort}/v1/status`);
  assert.deepEqual(await status.json(), { ok: true });
  const scrape = await (await fetch(`http://127.0.0.1:${ep.metricsPort}/metrics`)).text();
  assert.match(scrape, /awscni_build_info/);
  await ep.close();
  assert.equal(await listening(ep.introspectionPort!), false);
  assert.equal(await listening(ep.metricsPort!), false);
});

test('a metrics port in use fails the start and closes the introspection server it started', async (t) => {
  const taken = await occupy();
  t.after(() => new Promise<void>((r) => taken.server.close(() => r())));
  const free = await occupy(); // a port known to be free once this closes
  await new Promise<void>((r) => free.server.close(() => r()));
  await assert.rejects(
    startHttpEndpoints(
      config(false, `127.0.0.1:${free.port}`, `127.0.0.1:${taken.port}`),
      source,
      createMetrics({ processMetrics: false }),
    ),
    /EADDRINUSE/,
  );
  assert.equal(await listening(free.port), false, 'introspection server left listening');
});

test('disabled endpoints bind nothing', async () => {
  const ep = await startHttpEndpoints(config(true), source, createMetrics({ processMetrics: false }));
  assert.equal(ep.introspectionPort, undefined);
  assert.equal(ep.metricsPort, undefined);
  await ep.close();
});
