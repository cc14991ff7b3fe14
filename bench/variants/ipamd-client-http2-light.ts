/**
 * bench only: the plugin's ipamd client on the node:http2 transport (cni-plugin/grpc-http2.ts)
 * but with protobufjs/light reflection codecs (`Root.fromJSON` of the generated
 * descriptor) instead of the generated static codec, with the same exports as
 * cni-plugin/ipamd-client.ts. bench/cni-plugin-startup.ts bundles the plugin with this
 * file in its place to price the codec alone. Not used by the product.
 */
import protobuf from 'protobufjs/light.js';
import { CNI_BACKEND_SERVICE } from '../../proto/ipam.js';
import type { IpamdClient } from '../../cni-plugin/ipamd-client.js';
import { IPAM_DESCRIPTOR } from '../../cni-plugin/generated/ipam-descriptor.js';
import { GrpcCallFailure, openUnixChannel } from '../../cni-plugin/grpc-http2.js';
import { GrpcStatus, grpcStatusName } from '../../proto/grpc-status.js';

/** Same as cni-plugin/ipamd-client.ts's. */
export class IpamdCallError extends Error {
  constructor(
    readonly method: string,
    readonly status: number,
    readonly details: string,
  ) {
    super(`ipamd ${method} failed: ${grpcStatusName(status)}: ${details}`);
    this.name = 'IpamdCallError';
  }

  /** The gRPC status name. */
  get statusName(): string {
    return grpcStatusName(this.status);
  }
}

/** Same as cni-plugin/ipamd-client.ts's. */
export const RETRYABLE_STATUSES: readonly number[] = [
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.RESOURCE_EXHAUSTED,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.ABORTED,
];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- decoded reply objects, read by the caller's typed wrappers
type Reply = any;

/** Same contract as cni-plugin/ipamd-client.ts's connectIpamd, protobufjs/light codecs. */
export function connectIpamd(socketPath: string): IpamdClient {
  const root = protobuf.Root.fromJSON(IPAM_DESCRIPTOR as protobuf.INamespace);
  const channel = openUnixChannel(socketPath);
  const unary = async (
    method: string,
    req: unknown,
    reqType: string,
    repType: string,
    timeoutMs: number,
  ): Promise<Reply> => {
    const q = root.lookupType(`eniipam.v1.${reqType}`);
    const r = root.lookupType(`eniipam.v1.${repType}`);
    let reply: Buffer;
    try {
      reply = await channel.unary(
        `/${CNI_BACKEND_SERVICE}/${method}`,
        q.encode(q.fromObject(req as Record<string, unknown>)).finish(),
        timeoutMs,
      );
    } catch (e) {
      throw new IpamdCallError(
        method,
        e instanceof GrpcCallFailure ? e.code : GrpcStatus.INTERNAL,
        e instanceof GrpcCallFailure ? e.details : (e as Error).message,
      );
    }
    return r.toObject(r.decode(reply), { longs: Number, defaults: true, arrays: true });
  };
  return {
    addNetwork: (req, t) => unary('AddNetwork', req, 'AddNetworkRequest', 'AddNetworkReply', t),
    delNetwork: (req, t) => unary('DelNetwork', req, 'DelNetworkRequest', 'DelNetworkReply', t),
    ipamStatus: (req, t) => unary('IpamStatus', req, 'IpamStatusRequest', 'IpamStatusReply', t),
    gcNetwork: (req, t) => unary('GcNetwork', req, 'GcNetworkRequest', 'GcNetworkReply', t),
    checkNetwork: (req, t) => unary('CheckNetwork', req, 'CheckNetworkRequest', 'CheckNetworkReply', t),
    close: () => channel.close(),
  };
}
