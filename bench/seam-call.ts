/**
 * bench: the cost of the plugin→ipamd hop inside ipamd (the CNI exec server's ADD), old
 * against new, in one run and one process: the same RpcServer handler behind a stub IPAM
 * service (answers at once, so only the seam is timed), reached
 *  - new: through `RpcServer.directClient()` (request object in, reply object out);
 *  - before: through another build's plugin gRPC client with its in-process endpoint
 *    registered (generated codec encode → in-process registry → proto-loader decode →
 *    handler → encode → decode), as ipamd did before the host object.
 * `--before DIR` is that build's dist/ (e.g. a copy made before the change). Prints
 * medians and p90 in µs of `AddNetwork` calls, interleaved in rounds.
 *
 *   node dist/bench/seam-call.js --before dist-before [--calls 5000]
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { IPAM_API_VERSION, type AddNetworkReply, type AddNetworkRequest } from '../proto/ipam.js';
import { RpcServer } from '../ipamd/rpc/server.js';
import type { IpamService } from '../ipamd/service/ipam-service.js';
import type { Logger } from '../ipamd/log.js';
import { summarize } from './timed-exec.js';

const quiet = {
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
} as unknown as Logger;

/** A service answering every ADD at once with the same allocation. */
const service = {
  add: async () => ({
    allocation: { ipv4: '10.0.0.5' },
    eni: { deviceNumber: 1, eniId: 'eni-1' },
    routeTableId: 2,
    existing: false,
  }),
} as unknown as IpamService;

const req = (i: number): AddNetworkRequest => ({
  api_version: IPAM_API_VERSION,
  client_version: 'bench',
  container_id: `c${i}`,
  if_name: 'eth0',
  network_name: 'aws-cni',
  netns: '/var/run/netns/x',
  k8s_pod_name: `pod-${i}`,
  k8s_pod_namespace: 'default',
  k8s_pod_infra_container_id: `c${i}`,
  k8s_pod_uid: '',
});

type Add = (r: AddNetworkRequest) => Promise<AddNetworkReply>;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { before: { type: 'string' }, calls: { type: 'string', default: '5000' } } });
  if (!values.before) throw new Error("--before DIR (another build's dist/) is required");
  const dist = path.resolve(values.before);
  const imp = (p: string) => import(pathToFileURL(path.join(dist, p)).href);
  const socket = '/nonexistent/eni-ipam-bench.sock';
  const opts = { socketPath: socket, service, log: quiet, vpcCidrs: () => ['10.0.0.0/16'], externalSnat: false };

  const { RpcServer: OldRpc } = await imp('ipamd/rpc/server.js');
  const { registerInProcessEndpoint } = await imp('cni-plugin/in-process-endpoint.js');
  const { connectIpamd } = await imp('cni-plugin/ipamd-client.js');
  const old = new OldRpc(opts);
  registerInProcessEndpoint(socket, (p: string, b: Uint8Array) => old.invokeInProcess(p, b));
  const oldClient = connectIpamd(socket);
  const direct = new RpcServer(opts).directClient();
  const ways: Record<'before' | 'after', Add> = {
    before: (r) => oldClient.addNetwork(r, 5000),
    after: (r) => direct.addNetwork(r, 5000),
  };
  const us: Record<'before' | 'after', number[]> = { before: [], after: [] };
  const calls = Number(values.calls);
  for (let i = -200; i < calls; i++) {
    // the first 200 warm up the JIT
    for (const k of (i % 2 ? ['before', 'after'] : ['after', 'before']) as Array<'before' | 'after'>) {
      const t0 = performance.now();
      const rep = await ways[k](req(i));
      const dt = (performance.now() - t0) * 1000;
      if (rep.ipv4_addr !== '10.0.0.5' || rep.route_table_id !== 2)
        throw new Error(`${k}: unexpected reply ${JSON.stringify(rep)}`);
      if (i >= 0) us[k].push(dt);
    }
  }
  oldClient.close();
  const row = (k: 'before' | 'after') => {
    const s = summarize(us[k]);
    return `${s.median.toFixed(1)} / ${s.p90.toFixed(1)}`;
  };
  console.log(`plugin→ipamd AddNetwork inside ipamd, ${calls} calls each, stub service (µs, median / p90)`);
  console.log('| path | µs |');
  console.log('|---|---|');
  console.log(`| before: codec + in-process registry + proto-loader (${values.before}) | ${row('before')} |`);
  console.log(`| after: RpcServer.directClient | ${row('after')} |`);
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(e.stack);
    process.exit(1);
  },
);
