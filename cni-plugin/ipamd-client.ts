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
  type AddNetworkReply,
  type AddNetworkRequest,
  type DelNetworkReply,
  type DelNetworkRequest,
  type CheckNetworkReply,
  type CheckNetworkRequest,
  type GcNetworkReply,
  type GcNetworkRequest,
  type IpamStatusReply,
  type IpamStatusRequest,
} from '../proto/ipam.js';
import { IPAM_CODECS } from './generated/ipam-codec.js';
import { GrpcCallFailure, openUnixChannel, type SessionPool } from './grpc-http2.js';
import { GrpcStatus } from '../proto/grpc-status.js';
import { IpamdCallError, type IpamdClient } from '../proto/ipamd-api.js';

export { IpamdCallError, RETRYABLE_STATUSES, type IpamdClient } from '../proto/ipamd-api.js';

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
 * With `pool` (a long-lived process: ipamd's CNI exec server for a socket other than
 * its own) the HTTP/2 connection is the pool's, shared and kept open between calls.
 */
export function connectIpamd(socketPath: string, pool?: SessionPool): IpamdClient {
  const c = codecs();
  const channel = openUnixChannel(socketPath, pool);
  const unary = async <Req, Rep>(
    method: string,
    req: Req,
    reqCodec: Codec<Req>,
    repCodec: Codec<Rep>,
    timeoutMs: number,
  ): Promise<Rep> => {
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
