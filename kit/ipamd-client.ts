/**
 * A gRPC client of ipamd for tests, built the way any third party would build one:
 * `@grpc/grpc-js` + `@grpc/proto-loader` over `proto/ipam.proto` on the Unix socket.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { IPAM_API_VERSION, IPAM_PROTO_PATH, type AddNetworkReply, type DelNetworkReply } from '../proto/ipam.js';

/** ADD/DEL by container id with sensible defaults for the other fields. */
export interface TestIpamdClient {
  add(containerId: string, extra?: Record<string, unknown>): Promise<AddNetworkReply>;
  del(containerId: string, extra?: Record<string, unknown>): Promise<DelNetworkReply>;
  close(): void;
}

/** gRPC error with its status code (`grpc.status`). */
export type GrpcError = Error & { code: number; details: string };

let pkg: any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Connects to ipamd at `socketPath` (the proto is parsed once per process). Calls have a 30 s deadline. */
export function ipamdClient(socketPath: string, networkName = 'aws-cni'): TestIpamdClient {
  pkg ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(IPAM_PROTO_PATH, { keepCase: true, longs: Number, defaults: true }),
  );
  const c = new pkg.eniipam.v1.CNIBackend(`unix://${socketPath}`, grpc.credentials.createInsecure());
  const base = (id: string) => ({
    api_version: IPAM_API_VERSION,
    client_version: 'test',
    container_id: id,
    if_name: 'eth0',
    network_name: networkName,
    netns: `/var/run/netns/cni-${id}`,
    k8s_pod_name: `pod-${id}`,
    k8s_pod_namespace: 'default',
    k8s_pod_infra_container_id: id,
    k8s_pod_uid: `uid-${id}`,
  });
  const call = <T>(m: string, req: object) =>
    new Promise<T>((resolve, reject) => {
      c[m](req, { deadline: Date.now() + 30_000 }, (err: GrpcError | null, rep: T) =>
        err ? reject(err) : resolve(rep),
      );
    });
  return {
    add: (id, extra = {}) => call<AddNetworkReply>('AddNetwork', { ...base(id), ...extra }),
    del: (id, extra = {}) => call<DelNetworkReply>('DelNetwork', { ...base(id), reason: 'test', ...extra }),
    close: () => c.close(),
  };
}
