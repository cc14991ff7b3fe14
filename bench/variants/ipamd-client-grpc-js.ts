/**
 * bench only: the plugin's ipamd client as it was before the node:http2 transport —
 * `@grpc/grpc-js` `Client.makeUnaryRequest` with the same protobufjs/light codecs —
 * with the same exports as cni-plugin/ipamd-client.ts. bench/cni-plugin-startup.ts
 * bundles the plugin with this file in its place (scripts/bundle-plugin.mjs
 * `ipamdClient` option) to compare the two transports. Not used by the product.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs/light.js';
import { CNI_BACKEND_SERVICE } from '../../proto/ipam.js';
import type { IpamdClient } from '../../cni-plugin/ipamd-client.js';
import { IPAM_DESCRIPTOR } from '../../cni-plugin/generated/ipam-descriptor.js';

/** Same as cni-plugin/ipamd-client.ts's: a failed RPC with its gRPC `status`. */
export class IpamdCallError extends Error {
  constructor(
    readonly method: string,
    readonly status: number,
    readonly details: string,
  ) {
    super(`ipamd ${method} failed: ${grpc.status[status] ?? status}: ${details}`);
    this.name = 'IpamdCallError';
  }

  /** The gRPC status name. */
  get statusName(): string {
    return grpc.status[this.status] ?? String(this.status);
  }
}

/** Same as cni-plugin/ipamd-client.ts's. */
export const RETRYABLE_STATUSES: readonly number[] = [
  grpc.status.UNAVAILABLE,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.ABORTED,
];

type Codec = { serialize: (v: unknown) => Buffer; deserialize: (b: Buffer) => unknown };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- decoded reply objects, read by the caller's typed wrappers
type Reply = any;

/** Same contract as cni-plugin/ipamd-client.ts's connectIpamd, over @grpc/grpc-js. */
export function connectIpamd(socketPath: string): IpamdClient {
  const root = protobuf.Root.fromJSON(IPAM_DESCRIPTOR as protobuf.INamespace);
  const codec = (name: string): Codec => {
    const type = root.lookupType(`eniipam.v1.${name}`);
    return {
      serialize: (v) => {
        const u8 = type.encode(type.fromObject(v as Record<string, unknown>)).finish();
        return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
      },
      deserialize: (b) => type.toObject(type.decode(b), { longs: Number, defaults: true, arrays: true }),
    };
  };
  const client = new grpc.Client(`unix://${socketPath}`, grpc.credentials.createInsecure());
  const unary = (method: string, req: unknown, reqType: string, repType: string, timeoutMs: number): Promise<Reply> => {
    const q = codec(reqType);
    const r = codec(repType);
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        `/${CNI_BACKEND_SERVICE}/${method}`,
        q.serialize,
        r.deserialize,
        req,
        { deadline: Date.now() + timeoutMs },
        (err, rep) => (err ? reject(new IpamdCallError(method, err.code, err.details)) : resolve(rep)),
      );
    });
  };
  return {
    addNetwork: (req, t) => unary('AddNetwork', req, 'AddNetworkRequest', 'AddNetworkReply', t),
    delNetwork: (req, t) => unary('DelNetwork', req, 'DelNetworkRequest', 'DelNetworkReply', t),
    ipamStatus: (req, t) => unary('IpamStatus', req, 'IpamStatusRequest', 'IpamStatusReply', t),
    gcNetwork: (req, t) => unary('GcNetwork', req, 'GcNetworkRequest', 'GcNetworkReply', t),
    checkNetwork: (req, t) => unary('CheckNetwork', req, 'CheckNetworkRequest', 'CheckNetworkReply', t),
    close: () => client.close(),
  };
}
