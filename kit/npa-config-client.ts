/**
 * The network policy agent's one call to ipamd, made as the agent makes it
 * (aws-network-policy-agent main.go `getNetworkPolicyConfigsFromIpamd`): gRPC over a Unix
 * socket, `rpc.ConfigServerBackend/GetNetworkPolicyConfigs` with an empty request
 * (`google.protobuf.Empty`), through `@grpc/grpc-js` + `@grpc/proto-loader` over
 * proto/network-policy-config.proto.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { NPA_CONFIG_PROTO_PATH, type NetworkPolicyAgentConfigReply } from '../proto/network-policy-config.js';

type ConfigClient = grpc.Client & {
  GetNetworkPolicyConfigs(
    req: object,
    opts: grpc.CallOptions,
    cb: (e: grpc.ServiceError | null, r?: NetworkPolicyAgentConfigReply) => void,
  ): void;
};

/**
 * Asks the server on `socket` (a path) for the agent's configuration, within `timeoutMs` (ms).
 * @throws grpc.ServiceError as the call fails (UNAVAILABLE: nothing serves there;
 *   UNIMPLEMENTED: something serves, not this service; DEADLINE_EXCEEDED).
 */
export async function askNpaConfig(socket: string, timeoutMs = 5000): Promise<NetworkPolicyAgentConfigReply> {
  const def = protoLoader.loadSync(NPA_CONFIG_PROTO_PATH, { keepCase: true, longs: Number, defaults: true });
  const Ctor = (
    grpc.loadPackageDefinition(def) as unknown as {
      rpc: { ConfigServerBackend: new (t: string, c: grpc.ChannelCredentials) => ConfigClient };
    }
  ).rpc.ConfigServerBackend;
  const client = new Ctor(`unix://${socket}`, grpc.credentials.createInsecure());
  try {
    return await new Promise<NetworkPolicyAgentConfigReply>((resolve, reject) =>
      client.GetNetworkPolicyConfigs({}, { deadline: Date.now() + timeoutMs }, (e, r) => (e ? reject(e) : resolve(r!))),
    );
  } finally {
    client.close();
  }
}
