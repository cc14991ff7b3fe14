/**
 * The per-attempt EC2 timeout (`ENI_IPAM_EC2_TIMEOUT`) fires even when garbage collection
 * runs while the attempt waits: an endpoint that accepts the connection and never answers
 * must cost one timeout per attempt, never a call that hangs. On Node 20 an
 * `AbortSignal.timeout` inside `AbortSignal.any` is held only weakly and a GC cancels its
 * timer (nodejs/node#57736); this test failed with that construction (CI saw an
 * Unassign that never ended).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Ec2Api, Ec2Error } from '../../ipamd/cloud/ec2.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

test('an EC2 attempt with no answer times out even when GC runs meanwhile', async (t) => {
  const held: http.ServerResponse[] = [];
  const server = http.createServer((_req, res) => void held.push(res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const api = new Ec2Api({
    region: 'us-west-2',
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    maxAttempts: 1,
    timeoutMs: 3000,
    burst: 100,
    ratePerSecond: 100,
  });
  t.after(() => api.close());
  process.env.AWS_ACCESS_KEY_ID ??= 't';
  process.env.AWS_SECRET_ACCESS_KEY ??= 't';
  const bound = (): Promise<string> => new Promise((r) => setTimeout(() => r('hung'), 30_000).unref());
  const call = (i: number): Promise<string> =>
    Promise.race([
      api.describeEnis([`eni-${i}`]).then(
        () => 'answered',
        (e: Ec2Error) => e.code,
      ),
      bound(),
    ]);
  // The first call loads the SDK and resolves credentials inside its attempt: let it.
  assert.match(await call(0), /Timeout|Abort/);
  held.length = 0;
  const calls = Array.from({ length: 8 }, (_, i) => call(i + 1));
  const collector = setInterval(gc, 20);
  try {
    const outcomes = await Promise.all(calls);
    // On a loaded machine an attempt can time out before its request is read (server and client share
    // this event loop); that too must end by the timeout. At least one must have been held unanswered.
    assert.ok(held.length >= 1, 'attempts reached the endpoint and were held unanswered');
    for (const o of outcomes) assert.match(o, /Timeout|Abort/, `an attempt ended as ${o}, not by its timeout`);
  } finally {
    clearInterval(collector);
  }
});
