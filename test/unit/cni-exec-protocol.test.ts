/**
 * The CNI exec socket's wire format (ipamd/cni-exec/protocol.ts): requests decode
 * whatever the chunking, report "incomplete" until the last byte, are refused for a
 * foreign magic or an oversized field as soon as its length is known; responses (R, U,
 * F) round-trip and malformed ones are rejected.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeRequest,
  decodeResponse,
  encodeFallback,
  encodeRequest,
  encodeResult,
  encodeUnavailable,
  MAX_ENV_BYTES,
  type ExecRequest,
} from '../../ipamd/cni-exec/protocol.js';

const req: ExecRequest = {
  env: { CNI_COMMAND: 'ADD', CNI_ARGS: 'K8S_POD_NAME=a=b;IgnoreUnknown=1', CNI_NETNS: '/var/run/netns/x' },
  stdin: '{"cniVersion":"1.0.0","name":"ünïcode"}',
  selfNetns: '4:4026531840',
  podNetns: '!ENOENT',
};

test('a request decodes only once complete, from any prefix', () => {
  const wire = encodeRequest(req);
  for (let i = 0; i < wire.length; i++) {
    const r = decodeRequest(wire.subarray(0, i));
    assert.equal(r.state, 'incomplete', `prefix ${i}`);
    assert.ok(
      r.state === 'incomplete' && r.need > i && r.need <= wire.length,
      `prefix ${i}: need ${JSON.stringify(r)} is ahead and within the request`,
    );
  }
  assert.deepEqual(decodeRequest(wire), { state: 'complete', request: req });
});

test('foreign magic and oversized fields are refused before the body arrives', () => {
  assert.equal(decodeRequest(Buffer.from('GET / HTTP/1.1')).state, 'refused');
  assert.equal(decodeRequest(Buffer.from('EIX2')).state, 'refused');
  assert.equal(decodeRequest(Buffer.from('EX')).state, 'refused');
  const big = Buffer.concat([Buffer.from('EIX1'), Buffer.from([0, 0, 0, 0])]);
  big.writeUInt32BE(MAX_ENV_BYTES + 1, 4);
  assert.equal(decodeRequest(big).state, 'refused');
});

test('responses round-trip; truncated or trailing bytes are errors', () => {
  assert.deepEqual(decodeResponse(encodeResult(1, '{"code":11}', 'warn\n')), {
    kind: 'R',
    exitCode: 1,
    stdout: '{"code":11}',
    stderr: 'warn\n',
  });
  assert.deepEqual(decodeResponse(encodeFallback('other netns')), { kind: 'F', reason: 'other netns' });
  assert.deepEqual(decodeResponse(encodeUnavailable('shutting down')), { kind: 'U', reason: 'shutting down' });
  const r = encodeResult(0, 'x', '');
  assert.throws(() => decodeResponse(r.subarray(0, r.length - 1)));
  assert.throws(() => decodeResponse(Buffer.concat([r, Buffer.from('z')])));
  assert.throws(() => decodeResponse(Buffer.from('EIX1Q')));
});
