/**
 * bench: the transport's share of ipamd's ADD+DEL pair latency. A server in a child
 * process answers CNIBackend's AddNetwork and DelNetwork at once (a fixed reply, no
 * datastore, no checkpoint, no log), over a Unix socket, either through grpc-js (as ipamd
 * serves them: the same service definition, channelz off, the same V8 flags) or through
 * bare node:http2 with gRPC framing. Here, 64 clients on one channel of the plugin's own
 * gRPC client (cni-plugin/grpc-http2.ts), as in `bench/ipamd-rpc-throughput --client
 * plugin`, paced at `--rate` pairs/s. What is left of ipamd's pair p99 and CPU per pair
 * over these rows is ipamd's own work (datastore, durable commit, log, metrics) and its
 * garbage; what these rows show is the floor that replacing a part of the transport could
 * lower. The clients' own CPU per pair (this process, `process.cpuUsage`) is printed beside
 * the server's: both share the machine's cores, so at N pairs/s the two together take
 * N × (server + client) ms of CPU a second. Prints figures, no pass/fail.
 *
 * Each server first gets `--warmup` seconds (default 3) of the same load, not measured.
 *
 *   node dist/bench/rpc-transport-floor.js [--rate 2500] [--seconds 5] [--warmup 3] [--rounds 3]
 */
import http2 from 'node:http2';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { cniBackendService } from '../ipamd/rpc/service-def.js';
import { grpcServerOptions, RPC_CONNECTION_BOUNDS } from '../ipamd/rpc/server.js';
import { IPAMD_NODE_FLAGS } from '../ipamd/v8-flags.js';
import { CNI_BACKEND_SERVICE, type AddNetworkReply, type DelNetworkReply } from '../proto/ipam.js';
import { cpuMsOf, machineLine, pluginClient, row } from './bench-util.js';
import { offerLoad } from './offer-load.js';
import { quantile } from './stats.js';

type Server = 'grpc-js' | 'node:http2';

/** Replies of ipamd's size: an IP on a secondary ENI, the VPC's CIDR, the ENI id. */
const ADD_REPLY: AddNetworkReply = {
  success: true,
  ipv4_addr: '10.0.3.117',
  ipv6_addr: '',
  device_number: 2,
  route_table_id: 3,
  vpc_v4_cidrs: ['10.0.0.0/16'],
  use_external_snat: false,
  eni_id: 'eni-0a1b2c3d4e5f60718',
  message: '',
};
const DEL_REPLY: DelNetworkReply = {
  success: true,
  released: true,
  ipv4_addr: '10.0.3.117',
  device_number: 2,
  route_table_id: 3,
  message: '',
};

/** The child: serve `kind` on `sock`, print "ready". */
function serve(kind: Server, sock: string): void {
  const svc = cniBackendService();
  rmSync(sock, { force: true });
  if (kind === 'grpc-js') {
    const s = new grpc.Server(grpcServerOptions(RPC_CONNECTION_BOUNDS));
    const answer = (reply: unknown) => (_: unknown, cb: grpc.sendUnaryData<unknown>) =>
      void Promise.resolve().then(() => cb(null, reply));
    s.addService(svc, { AddNetwork: answer(ADD_REPLY), DelNetwork: answer(DEL_REPLY) });
    s.bindAsync(`unix://${sock}`, grpc.ServerCredentials.createInsecure(), () => console.log('ready'));
    return;
  }
  const byPath = new Map<string, [grpc.MethodDefinition<unknown, unknown>, unknown]>([
    [`/${CNI_BACKEND_SERVICE}/AddNetwork`, [svc.AddNetwork!, ADD_REPLY]],
    [`/${CNI_BACKEND_SERVICE}/DelNetwork`, [svc.DelNetwork!, DEL_REPLY]],
  ]);
  const srv = http2.createServer();
  srv.on('stream', (stream, headers) => {
    const m = byPath.get(String(headers[':path']));
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      if (!m) return void stream.respond({ ':status': 404 }, { endStream: true });
      m[0].requestDeserialize(Buffer.concat(chunks).subarray(5));
      void Promise.resolve().then(() => {
        const body = m[0].responseSerialize(m[1]);
        const framed = Buffer.alloc(5 + body.length);
        framed.writeUInt32BE(body.length, 1);
        body.copy(framed, 5);
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(framed);
      });
    });
  });
  srv.listen(sock, () => console.log('ready'));
}

async function measure(
  kind: Server,
  rate: number,
  seconds: number,
  warmupS: number,
  rounds: number,
  dir: string,
): Promise<string[]> {
  const sock = path.join(dir, `${kind.replace(':', '-')}.sock`);
  const self = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, [...IPAMD_NODE_FLAGS, self, '--serve', kind, '--socket', sock], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const out: string[] = [];
  try {
    await new Promise((resolve, reject) => {
      child.stdout.once('data', resolve);
      child.once('exit', (code) => reject(new Error(`the ${kind} server exited (${code}) before it was ready`)));
    });
    const c = pluginClient(sock);
    for (let i = 0; i < 200; i++) {
      await c.add(`warmup${i}`);
      await c.del(`warmup${i}`);
    }
    const level = { conc: 64, rate };
    // Unmeasured: a paced round started on a cold JIT falls behind and keeps its backlog.
    if (warmupS > 0) await offerLoad(c, level, warmupS, 'warm');
    for (let r = 0; r < rounds; r++) {
      const cpu0 = cpuMsOf(child.pid);
      const own0 = process.cpuUsage();
      const { pairMs: ms, errors } = await offerLoad(c, level, seconds, `r${r}`);
      if (errors) throw new Error(`${errors} pairs failed against the ${kind} server`);
      const cpu1 = cpuMsOf(child.pid);
      const own = process.cpuUsage(own0);
      const cpu = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : Number.NaN;
      out.push(
        row([
          kind,
          Math.round(ms.length / seconds),
          `${quantile(ms, 0.5).toFixed(2)} / ${quantile(ms, 0.99).toFixed(2)}`,
          (cpu / ms.length).toFixed(3),
          ((own.user + own.system) / 1000 / ms.length).toFixed(3),
        ]),
      );
    }
    c.close();
  } finally {
    child.kill('SIGKILL');
  }
  return out;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '2500' },
      seconds: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '3' },
      serve: { type: 'string' },
      socket: { type: 'string' },
    },
  });
  if (values.serve) {
    if (values.serve !== 'grpc-js' && values.serve !== 'node:http2') throw new Error(`--serve: ${values.serve}`);
    return serve(values.serve, values.socket!);
  }
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const warmupS = Number(values.warmup);
  if (!(rate > 0) || !(seconds > 0) || !(rounds >= 1) || !(warmupS >= 0))
    throw new Error('--rate, --seconds and --rounds take positive numbers, --warmup zero or more');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'rpc-floor-'));
  try {
    console.log(
      `Transport floor: a server answering AddNetwork/DelNetwork at once, 64 plugin clients on one channel paced at ${rate} pairs/s, ${seconds} s per row, ${machineLine(os.cpus().length)}`,
    );
    console.log(row(['server', 'pairs/s', 'pair p50 / p99 ms', 'server CPU ms / pair', 'clients CPU ms / pair']));
    console.log(row(Array(5).fill('---')));
    for (const kind of ['grpc-js', 'node:http2'] as const)
      for (const l of await measure(kind, rate, seconds, warmupS, rounds, dir)) console.log(l);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
