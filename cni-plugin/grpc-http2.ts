/**
 * A minimal gRPC unary client over `node:http2` on a Unix socket, no npm dependency:
 * what the CNI plugin needs to call ipamd at a fraction of `@grpc/grpc-js`'s load time
 * (measured in bench/cni-plugin-startup.ts). Wire format per grpc/grpc
 * doc/PROTOCOL-HTTP2.md: POST `/<package.Service>/<Method>` with `content-type:
 * application/grpc`, `te: trailers`, `grpc-timeout`; each message is a length-prefixed
 * frame (1 byte compressed flag = 0, 4 bytes big-endian length, the protobuf bytes);
 * the outcome is the `grpc-status` / `grpc-message` trailer (or the headers of a
 * trailers-only response). No compression is offered, so none is accepted.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { GrpcStatus, statusFromHttp, statusFromRstCode } from '../proto/grpc-status.js';

/** A call that ended with a non-OK gRPC status: `code` (GrpcStatus) and `details` (the grpc-message). */
export class GrpcCallFailure extends Error {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(details);
    this.name = 'GrpcCallFailure';
  }
}

/** A channel for unary calls; one HTTP/2 connection opened on the first call. */
export interface GrpcUnaryChannel {
  /**
   * Sends `message` (serialized protobuf) to `path` (`/pkg.Service/Method`) with a
   * deadline of `timeoutMs` ms and resolves with the serialized reply.
   * @throws GrpcCallFailure: the server's status; UNAVAILABLE when the socket cannot be
   *   reached or the connection drops; DEADLINE_EXCEEDED when `timeoutMs` passes;
   *   INTERNAL for a malformed response; per the spec mappings for HTTP errors and resets.
   */
  unary(path: string, message: Uint8Array, timeoutMs: number): Promise<Buffer>;
  /** Closes the connection once calls in flight have ended (idempotent). */
  close(): void;
}

/** `grpc-timeout` header value (PROTOCOL-HTTP2.md: at most 8 digits and a unit). */
export function grpcTimeoutHeader(timeoutMs: number): string {
  const ms = Math.max(0, Math.ceil(timeoutMs));
  return ms <= 99_999_999 ? `${ms}m` : `${Math.min(99_999_999, Math.ceil(ms / 1000))}S`;
}

/** Frames one message: flag 0 (uncompressed), uint32 big-endian length, bytes. */
export function frameMessage(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.byteLength);
  out[0] = 0;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

/**
 * The single message of a unary response body.
 * @throws GrpcCallFailure INTERNAL when the body is not exactly one uncompressed frame.
 */
export function unframeMessage(body: Buffer): Buffer {
  if (body.length < 5)
    throw new GrpcCallFailure(GrpcStatus.INTERNAL, `response body of ${body.length} bytes holds no message frame`);
  if (body[0] !== 0)
    throw new GrpcCallFailure(GrpcStatus.INTERNAL, 'compressed response message, but no compression was offered');
  const len = body.readUInt32BE(1);
  if (body.length !== 5 + len)
    throw new GrpcCallFailure(GrpcStatus.INTERNAL, `response frame says ${len} bytes, body has ${body.length - 5}`);
  return body.subarray(5);
}

/** `grpc-message` is percent-encoded (PROTOCOL-HTTP2.md); a malformed one is kept as is. */
function decodeGrpcMessage(v: string | string[] | undefined): string {
  const s = Array.isArray(v) ? v.join(',') : (v ?? '');
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The error each session reported ('error' event), for the calls on it. */
const sessionErrors = new WeakMap<http2.ClientHttp2Session, Error>();

function newSession(socketPath: string): http2.ClientHttp2Session {
  const s = http2.connect('http://localhost', { createConnection: () => net.connect(socketPath) });
  s.on('error', (e: Error) => {
    sessionErrors.set(s, e);
  });
  return s;
}

const usable = (s: http2.ClientHttp2Session | undefined): s is http2.ClientHttp2Session =>
  !!s && !s.destroyed && !s.closed;

/** How long (ms) a shared session stays open without calls. */
export const SHARED_SESSION_IDLE_MS = 30_000;

/**
 * One HTTP/2 session per socket path, shared by the channels opened with it: for a
 * long-lived process making many calls (ipamd's CNI exec server, which hands a pool to
 * the plugin code in its host) a call then costs no connect and no HTTP/2 handshake. A
 * session is replaced once it is closed, destroyed, failed or told GOAWAY (the server
 * restarted), is closed after {@link SHARED_SESSION_IDLE_MS} without calls, and never
 * keeps the process alive. A channel's `close()` leaves it open; {@link SessionPool.close}
 * closes them all. The one-shot plugin process uses none (one connection per channel).
 */
export class SessionPool {
  private readonly sessions = new Map<string, { session: http2.ClientHttp2Session; idle?: NodeJS.Timeout }>();

  /** The shared session to `socketPath`, opened or replaced when needed; its idle timer restarted. */
  session(socketPath: string): http2.ClientHttp2Session {
    let entry = this.sessions.get(socketPath);
    if (!entry || !usable(entry.session)) {
      if (entry) clearTimeout(entry.idle);
      const session = newSession(socketPath);
      session.unref();
      const forget = () => {
        const e = this.sessions.get(socketPath);
        if (e?.session !== session) return;
        clearTimeout(e.idle);
        this.sessions.delete(socketPath);
      };
      session.on('close', forget);
      session.on('goaway', forget);
      session.on('error', forget);
      entry = { session };
      this.sessions.set(socketPath, entry);
    }
    clearTimeout(entry.idle);
    const { session } = entry;
    entry.idle = setTimeout(() => session.close(), SHARED_SESSION_IDLE_MS).unref();
    return session;
  }

  /** Number of sessions open now (tests). */
  get size(): number {
    return this.sessions.size;
  }

  /** Closes every shared session (calls in flight end first); later calls open new ones. */
  close(): void {
    for (const { session, idle } of this.sessions.values()) {
      clearTimeout(idle);
      session.close();
    }
    this.sessions.clear();
  }
}

/**
 * Opens (lazily) a channel to the gRPC server listening on the Unix socket `socketPath`:
 * its own connection, or `pool`'s shared one when given.
 */
export function openUnixChannel(socketPath: string, pool?: SessionPool): GrpcUnaryChannel {
  let session: http2.ClientHttp2Session | undefined;
  let closed = false;
  const connect = (): http2.ClientHttp2Session => {
    if (pool) return pool.session(socketPath);
    if (!usable(session)) session = newSession(socketPath);
    return session;
  };

  const unary = (path: string, message: Uint8Array, timeoutMs: number): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      if (closed) return reject(new GrpcCallFailure(GrpcStatus.UNAVAILABLE, 'channel closed'));
      let stream: http2.ClientHttp2Stream;
      let onSession: http2.ClientHttp2Session;
      try {
        onSession = connect();
        stream = onSession.request({
          ':method': 'POST',
          ':path': path,
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-timeout': grpcTimeoutHeader(timeoutMs),
        });
      } catch (e) {
        // the session went away between connect() and request()
        return reject(new GrpcCallFailure(GrpcStatus.UNAVAILABLE, `${socketPath}: ${(e as Error).message}`));
      }
      let headers: http2.IncomingHttpHeaders | undefined;
      let trailers: http2.IncomingHttpHeaders | undefined;
      let streamError: Error | undefined;
      const chunks: Buffer[] = [];
      let settled = false;
      const fail = (code: number, details: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(new GrpcCallFailure(code, details));
      };
      const timer = setTimeout(() => {
        fail(GrpcStatus.DEADLINE_EXCEEDED, `deadline of ${timeoutMs} ms exceeded`);
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, timeoutMs);
      stream.on('response', (h) => {
        headers = h;
      });
      stream.on('trailers', (t) => {
        trailers = t;
      });
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (e: Error) => {
        streamError = e;
      });
      stream.on('close', () => {
        if (settled) return;
        const meta = trailers ?? headers; // trailers-only responses carry grpc-status in the headers
        const status = meta?.['grpc-status'];
        if (status !== undefined) {
          const code = Number(status);
          if (code !== GrpcStatus.OK)
            return fail(Number.isInteger(code) ? code : GrpcStatus.UNKNOWN, decodeGrpcMessage(meta!['grpc-message']));
          let reply: Buffer;
          try {
            reply = unframeMessage(Buffer.concat(chunks));
          } catch (e) {
            return fail((e as GrpcCallFailure).code, (e as Error).message);
          }
          settled = true;
          clearTimeout(timer);
          return resolve(reply);
        }
        const http = Number(headers?.[':status'] ?? 0);
        if (http && http !== 200) return fail(statusFromHttp(http), `HTTP status ${http} without grpc-status`);
        // The connection failed or dropped (connect ENOENT/ECONNREFUSED, peer gone): node
        // cancels the pending stream (ERR_HTTP2_STREAM_CANCEL, the cause attached) before
        // the session's own 'error' event. Both are UNAVAILABLE, as in grpc-js.
        const cancelled = (streamError as NodeJS.ErrnoException | undefined)?.code === 'ERR_HTTP2_STREAM_CANCEL';
        const connectError =
          sessionErrors.get(onSession) ??
          (cancelled ? ((streamError!.cause as Error | undefined) ?? streamError) : undefined);
        if (connectError) return fail(GrpcStatus.UNAVAILABLE, `${socketPath}: ${connectError.message}`);
        // The peer went away mid-call (ipamd killed or restarting): node destroys the session and
        // resets its streams locally (rstCode CANCEL, or INTERNAL_ERROR when the socket errored; the
        // session's error event comes later). No answer came: UNAVAILABLE, as grpc-js's
        // "Connection dropped" — not a CANCELLED or INTERNAL the server chose (those keep the session).
        if (onSession.destroyed)
          return fail(GrpcStatus.UNAVAILABLE, `connection to ${socketPath} dropped before the answer (ipamd stopped?)`);
        if (stream.rstCode)
          return fail(statusFromRstCode(stream.rstCode), `stream reset (HTTP/2 error ${stream.rstCode})`);
        if (!headers)
          return fail(
            GrpcStatus.UNAVAILABLE,
            `connection to ${socketPath} closed before a response${streamError ? `: ${streamError.message}` : ''}`,
          );
        return fail(GrpcStatus.INTERNAL, streamError ? streamError.message : 'response ended without grpc-status');
      });
      stream.end(frameMessage(message));
    });

  return {
    unary,
    close: () => {
      closed = true;
      if (!pool) session?.close();
    },
  };
}
