/**
 * Pieces of the "VPC in network namespaces" test bed: commands inside a namespace, which
 * node link carried a flow (tx packet counters), and TCP echo servers that answer with the
 * peer address they see (so a test learns whether a flow was SNATed). Everything here
 * runs inside namespaces the test created; nothing touches the host's own namespace.
 */
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { promisify } from 'node:util';
import type { Netns } from '../../kit/netns.js';

const execFileP = promisify(execFile);

/** TCP servers answering with the peer address they see: the kit's, used by the demo too. */
export { startEchoServers } from '../../kit/echo-servers.js';

/** Runs `cmd args` and resolves with stdout. @throws Error with stderr when it fails. */
export const sh = async (cmd: string, args: string[]): Promise<string> => (await execFileP(cmd, args)).stdout;
/** Runs `cmd args` inside `ns`. @throws as {@link sh} */
export const inNs = (ns: Netns, cmd: string, ...args: string[]): Promise<string> =>
  sh('nsenter', [`--net=${ns.path}`, cmd, ...args]);
/** `ip args` inside `ns`. @throws as {@link sh} */
export const ip = (ns: Netns, ...args: string[]): Promise<string> => inNs(ns, 'ip', ...args);
/** `ip -j args` inside `ns`, parsed. @throws as {@link sh} */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const ipj = async (ns: Netns, ...args: string[]): Promise<any[]> =>
  JSON.parse((await ip(ns, '-j', ...args)) || '[]');
/** The MAC of `dev` in `ns`. */
export const macOf = async (ns: Netns, dev: string): Promise<string> =>
  (await ipj(ns, 'link', 'show', 'dev', dev))[0].address;

/** Our environment without NODE_EXTRA_CA_CERTS (it adds ~130 ms to every Node start here). */
export function nodeEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/** tx packets of each of `devs` in `ns`. */
export async function txPackets(ns: Netns, devs: string[]): Promise<Record<string, number>> {
  const links = await ipj(ns, '-s', 'link', 'show');
  return Object.fromEntries(
    devs.map((d) => [d, Number(links.find((l: { ifname: string }) => l.ifname === d).stats64.tx.packets)]),
  );
}

const client = (
  port: number,
  localPort?: number,
) => `const s=require('net').connect({host:process.argv[1],port:${port},${localPort ? `localPort:${localPort},` : ''}timeout:3000});let d='';
s.on('data',b=>d+=b);s.on('end',()=>{console.log(d.trim());process.exit(0)});
s.on('timeout',()=>{console.log('timeout');process.exit(1)});s.on('error',e=>{console.log(e.code);process.exit(1)});`;

/**
 * Packets of one TCP flow (its client port `port`, either direction) that `node` forwarded
 * out of each of `devs`, counted by rules this inserts in its filter FORWARD chain
 * (iptables-nft; before any SNAT rewrites the port) around `run`, then removes.
 */
async function flowForwarded<T>(
  node: Netns,
  devs: string[],
  port: number,
  run: () => Promise<T>,
): Promise<{ out: T; tx: Record<string, number> }> {
  const rules = devs.flatMap((d) =>
    ['--sport', '--dport'].map((m) => ['FORWARD', '-o', d, '-p', 'tcp', m, String(port)]),
  );
  const ipt = (...args: string[]) => inNs(node, 'iptables-nft', '-w', '5', '-t', 'filter', ...args);
  for (const r of rules) await ipt('-I', ...r);
  try {
    const out = await run();
    const list = (await ipt('-L', 'FORWARD', '-v', '-x', '-n')).split('\n');
    const counted = (d: string): number => {
      const lines = list.filter((l) => new RegExp(`\\s${d}\\s.*tcp [sd]pt:${port}\\s*$`).test(l));
      if (lines.length !== 2) throw new Error(`no FORWARD counters for ${d} port ${port} in\n${list.join('\n')}`);
      return lines.reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0]), 0);
    };
    return { out, tx: Object.fromEntries(devs.map((d) => [d, counted(d)])) };
  } finally {
    for (const r of rules) await ipt('-D', ...r);
  }
}

/** Client ports of the `flow` probes: distinct within a run, so one probe never counts another's. */
let nextClientPort = randomInt(20_000, 30_000);

/**
 * Opens one TCP connection from `from` to `host:port` and reads the server's answer
 * (the peer address it saw, or `timeout`/an error code when the connection failed).
 * `flow`: count only this connection's packets `node` forwards (by its client port, in
 * `node`'s filter FORWARD chain), not every packet a device sends; strays such as an
 * earlier connection's SYN-ACK retransmissions or IPv6 neighbour discovery then cannot
 * land in the count on a slow machine.
 * @returns that answer and how many packets each of `devs` of `node` sent meanwhile.
 */
export async function probe(
  node: Netns,
  devs: string[],
  from: Netns,
  host: string,
  port: number,
  o: { flow?: boolean } = {},
): Promise<{ seenAs: string; tx: Record<string, number> }> {
  const connect = (localPort?: number) =>
    execFileP('nsenter', [`--net=${from.path}`, process.execPath, '-e', client(port, localPort), host], {
      env: nodeEnv(),
    }).then(
      (r) => r.stdout.trim(),
      (e: { stdout?: string }) => (e.stdout ?? 'failed').trim(),
    );
  if (o.flow) {
    const localPort = nextClientPort++;
    const { out, tx } = await flowForwarded(node, devs, localPort, () => connect(localPort));
    return { seenAs: out, tx };
  }
  const before = await txPackets(node, devs);
  const seenAs = await connect();
  const after = await txPackets(node, devs);
  return { seenAs, tx: Object.fromEntries(devs.map((d) => [d, after[d]! - before[d]!])) };
}
