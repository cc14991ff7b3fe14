/**
 * The plugin's gRPC client of ipamd (`eniipam.v1.CNIBackend`, proto/ipam.proto) on a
 * Unix socket. Start-up cost is what matters here (one process per pod), so the
 * transport is `node:http2` with gRPC framing by hand (grpc-http2.ts), not
 * `@grpc/grpc-js`, and the codecs are static ones generated at build time from the
 * .proto (`generated/ipam-codec.ts`, scripts/gen-ipam-codec.mjs, on protobufjs/minimal's
 * Reader/Writer) — no .proto parsing, no reflection, no proto-loader. The figures behind
 * these choices: bench/cni-plugin-startup.ts. Wire compatibility with ipamd's grpc-js +
 * proto-loader server is tested in test/integration/ipamd-client-wire.test.ts. Keep this
 * file the only one that knows about the RPCs, so the transport can be swapped.
 */
import {
  CNI_BACKEND_SERVICE,
  type AddNetworkReply, type AddNetworkRequest, type DelNetworkReply, type DelNetworkRequest,
  type CheckNetworkReply, type CheckNetworkRequest, type GcNetworkReply, type GcNetworkRequest, type IpamStatusReply, type IpamStatusRequest,
} from '../proto/ipam.js';
import { IPAM_CODECS } from './generated/ipam-codec.js';
import { GrpcCallFailure, openUnixChannel } from './grpc-http2.js';
import { GrpcStatus, grpcStatusName } from './grpc-status.js';

/** A failed RPC: `status` is the gRPC status code (e.g. 9 FAILED_PRECONDITION, 14 UNAVAILABLE). */
export class IpamdCallError extends Error {
  constructor(readonly method: string, readonly status: number, readonly details: string) {
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
  GrpcStatus.UNAVAILABLE, GrpcStatus.RESOURCE_EXHAUSTED, GrpcStatus.DEADLINE_EXCEEDED, GrpcStatus.ABORTED,
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
  /** Closes the channel (the process can then exit). */
  close(): void;
}

type Codec<T> = { serialize: (v: T) => Uint8Array; deserialize: (b: Buffer) => T };

function codecs() {
  const codec = <T>(name: string): Codec<T> => {
    const c = IPAM_CODECS[name];
    if (!c) throw new Error(`no generated codec for ${name} (run node scripts/gen-ipam-codec.mjs)`);
    return { serialize: (v: T) => c.encode(v as object), deserialize: (b: Buffer) => c.decode(b) as T };
  };
  return {
    addReq: codec<AddNetworkRequest>('AddNetworkRequest'),
    addRep: codec<AddNetworkReply>('AddNetworkReply'),
    delReq: codec<DelNetworkRequest>('DelNetworkRequest'),
    delRep: codec<DelNetworkReply>('DelNetworkReply'),
    statusReq: codec<IpamStatusRequest>('IpamStatusRequest'),
    statusRep: codec<IpamStatusReply>('IpamStatusReply'),
    gcReq: codec<GcNetworkRequest>('GcNetworkRequest'),
    gcRep: codec<GcNetworkReply>('GcNetworkReply'),
    checkReq: codec<CheckNetworkRequest>('CheckNetworkRequest'),
    checkRep: codec<CheckNetworkReply>('CheckNetworkReply'),
  };
}

/**
 * Opens a channel to ipamd at `socketPath` (no I/O until the first call). Calls fail
 * fast with UNAVAILABLE when nothing listens on the socket (no wait-for-ready), with
 * DEADLINE_EXCEEDED after `timeoutMs`, and otherwise with the status ipamd returned.
 */
export function connectIpamd(socketPath: string): IpamdClient {
  const c = codecs();
  const channel = openUnixChannel(socketPath);
  const unary = async <Req, Rep>(method: string, req: Req, reqCodec: Codec<Req>, repCodec: Codec<Rep>, timeoutMs: number): Promise<Rep> => {
    let reply: Buffer;
    try {
      reply = await channel.unary(`/${CNI_BACKEND_SERVICE}/${method}`, reqCodec.serialize(req), timeoutMs);
    } catch (e) {
      if (e instanceof GrpcCallFailure) throw new IpamdCallError(method, e.code, e.details);
      throw new IpamdCallError(method, GrpcStatus.INTERNAL, (e as Error).message);
    }
    try {
      return repCodec.deserialize(reply);
    } catch (e) {
      throw new IpamdCallError(method, GrpcStatus.INTERNAL, `cannot decode the reply: ${(e as Error).message}`);
    }
  };
  return {
    addNetwork: (req, timeoutMs) => unary('AddNetwork', req, c.addReq, c.addRep, timeoutMs),
    delNetwork: (req, timeoutMs) => unary('DelNetwork', req, c.delReq, c.delRep, timeoutMs),
    ipamStatus: (req, timeoutMs) => unary('IpamStatus', req, c.statusReq, c.statusRep, timeoutMs),
    gcNetwork: (req, timeoutMs) => unary('GcNetwork', req, c.gcReq, c.gcRep, timeoutMs),
    checkNetwork: (req, timeoutMs) => unary('CheckNetwork', req, c.checkReq, c.checkRep, timeoutMs),
    close: () => channel.close(),
  };
}
