/**
 * The CNI plugin's view of ipamd's `CNIBackend` service (proto/ipam.proto) as a
 * TypeScript interface, shared by both ends of the plugin↔ipamd seam: the plugin's gRPC
 * client over the Unix socket (cni-plugin/ipamd-client.ts) and ipamd's direct in-process
 * client (ipamd/rpc/server.ts `RpcServer.directClient`, what the CNI exec server hands the
 * plugin code in its host) both implement {@link IpamdClient} and fail with
 * {@link IpamdCallError} carrying the same gRPC status codes.
 */
import { GrpcStatus, grpcStatusName } from './grpc-status.js';
import type {
  AddNetworkReply,
  AddNetworkRequest,
  CheckNetworkReply,
  CheckNetworkRequest,
  DelNetworkReply,
  DelNetworkRequest,
  GcNetworkReply,
  GcNetworkRequest,
  IpamStatusReply,
  IpamStatusRequest,
} from './ipam.js';

/** A failed RPC: `status` is the gRPC status code (e.g. 9 FAILED_PRECONDITION, 14 UNAVAILABLE). */
export class IpamdCallError extends Error {
  constructor(
    readonly method: string,
    readonly status: number,
    readonly details: string,
  ) {
    super(`ipamd ${method} failed: ${grpcStatusName(status)}: ${details}`);
    this.name = 'IpamdCallError';
  }

  /** The gRPC status name (`UNAVAILABLE`, ...). */
  get statusName(): string {
    return grpcStatusName(this.status);
  }
}

/** gRPC status codes after which a later retry can succeed (CNI "try again later", code 11). */
export const RETRYABLE_STATUSES: readonly number[] = [
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.RESOURCE_EXHAUSTED,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.ABORTED,
];

/** The RPCs of `CNIBackend`. */
export interface IpamdClient {
  /** `AddNetwork` with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  addNetwork(req: AddNetworkRequest, timeoutMs: number): Promise<AddNetworkReply>;
  /** `DelNetwork` with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  delNetwork(req: DelNetworkRequest, timeoutMs: number): Promise<DelNetworkReply>;
  /** `IpamStatus` (CNI STATUS) with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  ipamStatus(req: IpamStatusRequest, timeoutMs: number): Promise<IpamStatusReply>;
  /** `GcNetwork` (CNI GC) with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  gcNetwork(req: GcNetworkRequest, timeoutMs: number): Promise<GcNetworkReply>;
  /** `CheckNetwork` (CNI CHECK) with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  checkNetwork(req: CheckNetworkRequest, timeoutMs: number): Promise<CheckNetworkReply>;
  /** Closes the channel (the process can then exit); a no-op for an in-process client. */
  close(): void;
}
