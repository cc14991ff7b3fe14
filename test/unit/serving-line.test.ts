/** The "ipamd serving" record is found in both log formats (the demo's pretty log timed out waiting for JSON). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { servingScanner } from '../../kit/serving-line.js';

const feed = (lines: string[]) => {
  const s = servingScanner();
  for (const l of lines) {
    const r = s.push(l);
    if (r) return r;
  }
  return undefined;
};

test('JSON: one line', () => {
  assert.deepEqual(
    feed(['{"msg":"starting"}', '{"level":"info","msg":"ipamd serving","introspectionPort":40123,"metricsPort":0}']),
    { introspectionPort: 40123 },
  );
});

test('pretty: the message line, then its fields; done at metricsPort', () => {
  assert.deepEqual(
    feed([
      '[12:00:00.000] INFO (77): starting',
      '[12:00:01.000] INFO (77): ipamd serving',
      '    socket: "/tmp/x/ipamd.sock"',
      '    cniExecSocket: null',
      '    introspectionPort: 40123',
      '    metricsPort: 61678',
    ]),
    { introspectionPort: 40123, metricsPort: 61678 },
  );
  assert.equal(feed(['[12:00:01.000] INFO (77): ipamd serving', '    introspectionPort: 1']), undefined);
});
