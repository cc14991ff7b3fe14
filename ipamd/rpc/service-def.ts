/**
 * The CNIBackend gRPC service definition (proto/ipam.proto), loaded with the options
 * ipamd's server uses (field names as written, int64 as Number, enums as strings).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { IPAM_PROTO_PATH } from '../../proto/ipam.js';
import { stageTrace } from '../service/stage-trace.js';

let cniBackend: grpc.ServiceDefinition | undefined;

/**
 * The CNIBackend service definition from proto/ipam.proto, parsed once per process (it
 * never changes; a process running several daemons, e.g. the fleet simulation, parses it
 * once), AddNetwork's and DelNetwork's codecs timed into the stage trace once.
 * @throws Error when the proto file cannot be read or parsed.
 */
export function cniBackendService(): grpc.ServiceDefinition {
  if (cniBackend) return cniBackend;
  const def = protoLoader.loadSync(IPAM_PROTO_PATH, {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    eniipam: { v1: { CNIBackend: { service: grpc.ServiceDefinition } } };
  };
  const service = pkg.eniipam.v1.CNIBackend.service;
  traceCodecs(service.AddNetwork!, 'add');
  traceCodecs(service.DelNetwork!, 'del');
  cniBackend = service;
  return service;
}

/** Times AddNetwork's / DelNetwork's protobuf decode and encode into the stage trace (`add.decode`, `add.encode`, ...). */
function traceCodecs(m: grpc.MethodDefinition<unknown, unknown>, verb: 'add' | 'del'): void {
  const { requestDeserialize: dec, responseSerialize: enc } = m;
  m.requestDeserialize = (b) => stageTrace.time(`${verb}.decode`, () => dec(b));
  m.responseSerialize = (v) => stageTrace.time(`${verb}.encode`, () => enc(v));
}
