/**
 * The network policy agent's configuration (rpc/npa-config-server.ts) as a part of ipamd:
 * served from once the node is discovered (the agent asks once at start, with a 30 s
 * deadline, and exits without an answer) until ipamd stops. daemon.ts lists it.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { startNpaConfigServer, type NpaConfigAnswer } from '../rpc/npa-config-server.js';
import type { NodeInventory } from '../startup/discover.js';
import type { DaemonParts } from './daemon-registry.js';
import type { PartEnv } from './parts-restore.js';
import { partOf } from './runner.js';

const part = partOf<DaemonParts>();

/**
 * What ipamd answers the agent on this node: the mode, the instance, and the node's address
 * of each family served (upstream: IPv4 unless in IPv6 mode; in IPv6 and dual mode the
 * IPv6 from IMDS `ipv6`, read once here; unreadable: empty, logged, as the v1.4.1 agent
 * reads IMDS itself).
 */
async function answerOf(env: PartEnv, inv: NodeInventory, log: Logger): Promise<NpaConfigAnswer> {
  const { config } = env;
  let nodeIpv6 = '';
  if (config.ipFamily !== 'ipv4')
    nodeIpv6 = await inv.imds.localIpv6().then(
      (v) => v ?? '',
      (e: Error) => {
        log.warn({ err: e.message }, "IMDS ipv6 unreadable: the network policy agent's NodeIPv6 is left empty");
        return '';
      },
    );
  return {
    mode: config.networkPolicyMode,
    nodeIpv4: config.ipFamily === 'ipv6' ? '' : inv.instance.localIpv4,
    nodeIpv6,
    instanceId: inv.instance.instanceId,
    region: inv.instance.region,
  };
}

/**
 * `GetNetworkPolicyConfigs` on ENI_IPAM_NETWORK_POLICY_CONFIG_SOCKET, from discovery to the
 * stop; only when the socket's directory exists (the chart mounts the node's
 * /var/run/aws-node, creating it): ipamd never creates that machine path itself. Without it
 * the value is undefined and one line says the agent's configuration is not served.
 */
export const npaConfigPart = (env: PartEnv) =>
  part({
    name: 'npa-config',
    needs: ['node'],
    async start({ node: { inv } }) {
      const dir = path.dirname(env.config.networkPolicyConfigSocket);
      if (!existsSync(dir)) {
        env.log.warn(
          { socket: env.config.networkPolicyConfigSocket },
          `${dir} does not exist (the chart mounts the node's /var/run/aws-node): the network policy agent's configuration is not served`,
        );
        return { value: undefined };
      }
      const server = await startNpaConfigServer({
        socketPath: env.config.networkPolicyConfigSocket,
        answer: await answerOf(env, inv, env.log),
        log: env.log,
      });
      return { value: server, stop: ({ graceMs }) => server.close(Math.min(graceMs, 2000)) };
    },
  });
