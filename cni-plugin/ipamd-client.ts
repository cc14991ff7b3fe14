/**
 * The plugin's gRPC client of ipamd (`eniipam.v1.CNIBackend`, proto/ipam.proto) on a
 * Unix socket. Start-up cost is what matters here (one process per pod): a generic
 * `@grpc/grpc-js` client with `makeUnaryRequest` and static protobufjs codecs built from
 * the descriptor generated at build time (`generated/ipam-descriptor.ts`), loaded with
 * `protobufjs/light` — no .proto parsing, no proto-loader. Keep this file the only one
 * that knows about gRPC, so the transport can be swapped.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs/light.js';
import {
  CNI_BACKEND_SERVICE,
  type AddNetworkReply, type AddNetworkRequest, type DelNetworkReply, type DelNetworkRequest,
} from '../proto/ipam.js';
import { IPAM_DESCRIPTOR } from './generated/ipam-descriptor.js';

/** A failed RPC: `status` is the gRPC status code (e.g. 9 FAILED_PRECONDITION, 14 UNAVAILABLE). */
export class IpamdCallError extends Error {
  constructor(readonly method: string, readonly status: number, readonly details: string) {
    super(`ipamd ${method} failed: ${grpc.status[status] ?? status}: ${details}`);
    this.name = 'IpamdCallError';
  }

  /** The gRPC status name (`UNAVAILABLE`, ...). */
  get statusName(): string {
    return grpc.status[this.status] ?? String(this.status);
  }
}

/** gRPC status codes after which a later retry can succeed (CNI "try again later", code 11). */
export const RETRYABLE_STATUSES: readonly number[] = [
  grpc.status.UNAVAILABLE, grpc.status.RESOURCE_EXHAUSTED, grpc.status.DEADLINE_EXCEEDED, grpc.status.ABORTED,
];

/** The two RPCs of `CNIBackend`. */
export interface IpamdClient {
  /** `AddNetwork` with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  addNetwork(req: AddNetworkRequest, timeoutMs: number): Promise<AddNetworkReply>;
  /** `DelNetwork` with a deadline of `timeoutMs` ms. @throws IpamdCallError. */
  delNetwork(req: DelNetworkRequest, timeoutMs: number): Promise<DelNetworkReply>;
  /** Closes the channel (the process can then exit). */
  close(): void;
}

type Codec<T> = { serialize: (v: T) => Buffer; deserialize: (b: Buffer) => T };

function codecs() {
  const root = protobuf.Root.fromJSON(IPAM_DESCRIPTOR as protobuf.INamespace);
  const codec = <T>(name: string): Codec<T> => {
    const type = root.lookupType(`eniipam.v1.${name}`);
    return {
      serialize: (v: T) => {
        const u8 = type.encode(type.fromObject(v as Record<string, unknown>)).finish();
        return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
      },
      deserialize: (b: Buffer) => type.toObject(type.decode(b), { longs: Number, defaults: true, arrays: true }) as T,
    };
  };
  return {
    addReq: codec<AddNetworkRequest>('AddNetworkRequest'),
    addRep: codec<AddNetworkReply>('AddNetworkReply'),
    delReq: codec<DelNetworkRequest>('DelNetworkRequest'),
    delRep: codec<DelNetworkReply>('DelNetworkReply'),
  };
}

/**
 * Opens a channel to ipamd at `socketPath` (no I/O until the first call). Calls fail
 * fast with UNAVAILABLE when nothing listens on the socket (no wait-for-ready).
 */
export function connectIpamd(socketPath: string): IpamdClient {
  const c = codecs();
  const client = new grpc.Client(`unix://${socketPath}`, grpc.credentials.createInsecure());
  const unary = <Req, Rep>(method: string, req: Req, reqCodec: Codec<Req>, repCodec: Codec<Rep>, timeoutMs: number) =>
    new Promise<Rep>((resolve, reject) => {
      client.makeUnaryRequest<Req, Rep>(`/${CNI_BACKEND_SERVICE}/${method}`, reqCodec.serialize, repCodec.deserialize, req,
        { deadline: Date.now() + timeoutMs },
        (err, rep) => (err ? reject(new IpamdCallError(method, err.code, err.details)) : resolve(rep!)));
    });
  return {
    addNetwork: (req, timeoutMs) => unary('AddNetwork', req, c.addReq, c.addRep, timeoutMs),
    delNetwork: (req, timeoutMs) => unary('DelNetwork', req, c.delReq, c.delRep, timeoutMs),
    close: () => client.close(),
  };
}
