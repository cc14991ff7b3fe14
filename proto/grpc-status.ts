/**
 * gRPC status codes and the spec's mappings to them, without loading `@grpc/grpc-js`
 * (the CNI plugin speaks gRPC over `node:http2` by hand: cni-plugin/grpc-http2.ts; ipamd's
 * in-process client maps its outcomes to the same codes).
 *
 * Follows grpc/grpc doc/statuscodes.md (the codes), doc/http-grpc-status-mapping.md
 * (HTTP status → gRPC status when a response carries no `grpc-status`) and
 * doc/PROTOCOL-HTTP2.md "Errors" (HTTP/2 RST_STREAM error codes → gRPC status).
 */

/** The gRPC status codes (statuscodes.md), same numbers as `@grpc/grpc-js`'s `status` enum. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

const NAMES: readonly string[] = Object.keys(GrpcStatus);

/** The name of status `code` (`UNAVAILABLE` for 14), or the number as a string when unknown. */
export function grpcStatusName(code: number): string {
  return NAMES[code] ?? String(code);
}

/**
 * gRPC status for an HTTP response without `grpc-status` (http-grpc-status-mapping.md):
 * 400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED,
 * 429/502/503/504 UNAVAILABLE, anything else UNKNOWN.
 */
export function statusFromHttp(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/**
 * gRPC status for a stream reset by the peer with HTTP/2 error `rstCode` (RFC 9113 §7;
 * PROTOCOL-HTTP2.md "Errors"): REFUSED_STREAM (7) UNAVAILABLE, CANCEL (8) CANCELLED,
 * ENHANCE_YOUR_CALM (11) RESOURCE_EXHAUSTED, INADEQUATE_SECURITY (12)
 * PERMISSION_DENIED, anything else INTERNAL.
 */
export function statusFromRstCode(rstCode: number): number {
  switch (rstCode) {
    case 7:
      return GrpcStatus.UNAVAILABLE;
    case 8:
      return GrpcStatus.CANCELLED;
    case 11:
      return GrpcStatus.RESOURCE_EXHAUSTED;
    case 12:
      return GrpcStatus.PERMISSION_DENIED;
    default:
      return GrpcStatus.INTERNAL;
  }
}
