/**
 * ipamd's answer to the network policy agent (aws-network-policy-agent): the service
 * `rpc.ConfigServerBackend` (proto/network-policy-config.proto, amazon-vpc-cni-k8s
 * rpc/rpc.proto) on its own Unix socket, ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET (default
 * aws-node's /var/run/aws-node/ipamd.sock, where the agent dials it). The agent calls
 * `GetNetworkPolicyConfigs` once at start and exits when it fails (docs/network-policy.md).
 *
 * Nothing else is served there: no health service, so ipamd's own look for a live aws-node
 * (startup/aws-node-presence.ts: the health service `grpc.health.v1.aws-node` on that
 * socket) gets UNIMPLEMENTED from it, which is no sign of aws-node. A stale socket file is
 * replaced, a live server on the path refuses the start; on stop the file is removed only
 * while it is still the one this server bound.
 */
import { promises as fs } from 'node:fs';
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  NPA_CONFIG_PROTO_PATH,
  type NetworkPolicyAgentConfigReply,
  type NetworkPolicyMode,
} from '../../proto/network-policy-config.js';
import type { Logger } from '../log.js';
import { grpcServerOptions, RPC_CONNECTION_BOUNDS } from './server.js';
import { listenUnixGrpc } from './unix-listener.js';

/** What the reply says (docs/network-policy.md): the mode, and the node as ipamd discovered it. */
export interface NpaConfigAnswer {
  mode: NetworkPolicyMode;
  /** The node's primary IPv4 (IMDS local-ipv4); '' in IPv6 mode (as upstream: one family). */
  nodeIpv4: string;
  /** The node's IPv6 (IMDS ipv6), in IPv6 and dual mode; '' otherwise or when IMDS has none. */
  nodeIpv6: string;
  instanceId: string;
  region: string;
}

/** Options of {@link startNpaConfigServer}. */
export interface NpaConfigServerOptions {
  socketPath: string;
  answer: NpaConfigAnswer;
  log: Logger;
}

/** A serving config server: how many calls it answered, and its stop. */
export interface NpaConfigServer {
  answered(): number;
  /** Stops accepting, lets calls in flight finish for up to `graceMs` (ms), removes its socket file. */
  close(graceMs: number): Promise<void>;
}

/** At most this many agent connections at once: one agent per node calls once per start. */
const MAX_CONNECTIONS = 16;

let service: grpc.ServiceDefinition | undefined;

/**
 * The `rpc.ConfigServerBackend` definition, parsed once per process.
 * @throws Error when the .proto file cannot be read or parsed.
 */
export function npaConfigService(): grpc.ServiceDefinition {
  if (service) return service;
  const def = protoLoader.loadSync(NPA_CONFIG_PROTO_PATH, { keepCase: true, longs: Number, defaults: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    rpc: { ConfigServerBackend: { service: grpc.ServiceDefinition } };
  };
  service = pkg.rpc.ConfigServerBackend.service;
  return service;
}

/** The reply for `a` (field names as in the .proto). Pure. */
export function npaConfigReply(a: NpaConfigAnswer): NetworkPolicyAgentConfigReply {
  return {
    NetworkPolicyMode: a.mode,
    MultiNICEnabled: false,
    NodeIPv4: a.nodeIpv4,
    NodeIPv6: a.nodeIpv6,
    InstanceID: a.instanceId,
    Region: a.region,
  };
}

/**
 * Serves `GetNetworkPolicyConfigs` on `o.socketPath` (its directory created 0755, as aws-node's;
 * the socket 0660), answering `o.answer` to every call.
 * @throws Error when another process serves on the socket, the path is not a socket, or the bind fails.
 */
export async function startNpaConfigServer(o: NpaConfigServerOptions): Promise<NpaConfigServer> {
  const server = new grpc.Server(grpcServerOptions(RPC_CONNECTION_BOUNDS));
  const reply = npaConfigReply(o.answer);
  let answered = 0;
  server.addService(npaConfigService(), {
    GetNetworkPolicyConfigs: (_call: unknown, cb: grpc.sendUnaryData<NetworkPolicyAgentConfigReply>) => {
      answered++;
      o.log.info({ reply }, 'the network policy agent asked for its configuration');
      cb(null, reply);
    },
  });
  let bound: { listener: net.Server; ino: number };
  try {
    bound = await listenUnixGrpc(server, o.socketPath, {
      maxConnections: MAX_CONNECTIONS,
      dirMode: 0o755,
      onError: (e) => o.log.error({ err: e.message }, 'network policy config socket error'),
    });
  } catch (e) {
    server.forceShutdown();
    throw e;
  }
  o.log.info(
    { socket: o.socketPath, mode: o.answer.mode },
    "serving the network policy agent's configuration (rpc.ConfigServerBackend)",
  );
  return {
    answered: () => answered,
    async close(graceMs) {
      bound.listener.close();
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      });
      // Another process may have replaced the file since (aws-node's ipamd removes it before binding): not ours to remove.
      const st = await fs.lstat(o.socketPath).catch(() => undefined);
      if (st?.ino === bound.ino) await fs.rm(o.socketPath, { force: true });
    },
  };
}
