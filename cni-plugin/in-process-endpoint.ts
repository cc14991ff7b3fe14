/**
 * In-process gRPC endpoints. Inside ipamd (the CNI exec server, ipamd/cni-exec) the
 * plugin code calls the ipamd it runs in: when a Unix socket path is registered here,
 * {@link openUnixChannel} (grpc-http2.ts) hands each unary call's serialized request to
 * the registered function instead of sending it over HTTP/2 and the socket. The bytes
 * are the same as on the wire (the plugin's generated codec on this side, the server's
 * proto-loader codec on the other), so only the transport is skipped.
 */

/**
 * Serves one unary call in-process: `methodPath` is `/pkg.Service/Method`, `request` the
 * serialized protobuf. Resolves with the serialized reply; rejects with a
 * `GrpcCallFailure` (grpc-http2.ts) carrying the gRPC status the server would have sent.
 */
export type InProcessUnary = (methodPath: string, request: Uint8Array) => Promise<Buffer>;

const endpoints = new Map<string, InProcessUnary>();

/**
 * Registers `fn` as the endpoint behind `socketPath` (the path exactly as a conflist
 * names it). @returns a function that removes this registration (and only this one).
 */
export function registerInProcessEndpoint(socketPath: string, fn: InProcessUnary): () => void {
  endpoints.set(socketPath, fn);
  return () => {
    if (endpoints.get(socketPath) === fn) endpoints.delete(socketPath);
  };
}

/** The endpoint registered for `socketPath`, if any (looked up per call). */
export function inProcessEndpoint(socketPath: string): InProcessUnary | undefined {
  return endpoints.get(socketPath);
}
