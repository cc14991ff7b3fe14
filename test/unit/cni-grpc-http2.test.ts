/**
 * The pieces of the plugin's hand-written gRPC transport that need no server: message
 * framing (PROTOCOL-HTTP2.md "Length-Prefixed-Message"), the `grpc-timeout` header,
 * and the spec's HTTP / RST_STREAM → gRPC status mappings and status names.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { frameMessage, grpcTimeoutHeader, GrpcCallFailure, unframeMessage } from '../../cni-plugin/grpc-http2.js';
import { GrpcStatus, grpcStatusName, statusFromHttp, statusFromRstCode } from '../../proto/grpc-status.js';

test('a message is framed as flag 0 + uint32 big-endian length + bytes, and unframed back', () => {
  const msg = Uint8Array.from([8, 1, 18, 3, 97, 98, 99]);
  const f = frameMessage(msg);
  assert.deepEqual([...f.subarray(0, 5)], [0, 0, 0, 0, 7]);
  assert.deepEqual([...unframeMessage(f)], [...msg]);
  assert.deepEqual([...frameMessage(new Uint8Array(0))], [0, 0, 0, 0, 0]);
  assert.equal(unframeMessage(frameMessage(new Uint8Array(0))).length, 0);
  const big = frameMessage(new Uint8Array(70_000));
  assert.equal(big.readUInt32BE(1), 70_000);
});

test('malformed response bodies are INTERNAL', () => {
  const internal = (e: unknown) => e instanceof GrpcCallFailure && e.code === GrpcStatus.INTERNAL;
  assert.throws(() => unframeMessage(Buffer.alloc(3)), internal);
  assert.throws(() => unframeMessage(Buffer.from([1, 0, 0, 0, 0])), internal); // compressed flag
  assert.throws(() => unframeMessage(Buffer.from([0, 0, 0, 0, 2, 1])), internal); // truncated
  assert.throws(
    () => unframeMessage(Buffer.concat([frameMessage(Uint8Array.of(1)), frameMessage(Uint8Array.of(2))])),
    internal,
  ); // two messages
});

test('grpc-timeout is milliseconds up to 8 digits, then seconds', () => {
  assert.equal(grpcTimeoutHeader(15_000), '15000m');
  assert.equal(grpcTimeoutHeader(0.2), '1m');
  assert.equal(grpcTimeoutHeader(-5), '0m');
  assert.equal(grpcTimeoutHeader(99_999_999), '99999999m');
  assert.equal(grpcTimeoutHeader(100_000_000), '100000S');
});

test('status names match grpc-js, HTTP and RST_STREAM mappings follow the spec', () => {
  assert.equal(grpcStatusName(14), 'UNAVAILABLE');
  assert.equal(grpcStatusName(9), 'FAILED_PRECONDITION');
  assert.equal(grpcStatusName(0), 'OK');
  assert.equal(grpcStatusName(16), 'UNAUTHENTICATED');
  assert.equal(grpcStatusName(99), '99');
  assert.deepEqual(
    [400, 401, 403, 404, 429, 502, 503, 504, 500, 418].map(statusFromHttp),
    [13, 16, 7, 12, 14, 14, 14, 14, 2, 2],
  );
  assert.deepEqual([7, 8, 11, 12, 2, 1].map(statusFromRstCode), [14, 1, 8, 7, 13, 13]);
});
