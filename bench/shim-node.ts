/**
 * bench helper: a node set up as in production for the CNI shim's fast path: ipamd in
 * the same network namespace as the plugin (a throw-away netns standing for the host
 * network of a hostNetwork DaemonSet), with its own simulated cloud process
 * (dist/sim/main.js) in that netns too, since ipamd there cannot reach loopback
 * servers of this process. The CNI bin dir holds the shim as `eni-ipam` (as ipamd
 * installs it) and, for comparisons, the Node plugin beside it as `eni-ipam.cjs` (not
 * named in the config, so the shim never runs it). `stop()` removes it all.
 */
import { spawn, execFile } from 'node:child_process';
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PLUGIN_PATH } from '../kit/cni-exec.js';
import { startIpamd } from '../kit/ipamd-process.js';
import { createNamedNetns, type Netns } from '../kit/netns.js';
import type { ApiCallRecord } from '../sim/index.js';

const SIM_MAIN = fileURLToPath(new URL('../sim/main.js', import.meta.url));
const SHIM = fileURLToPath(new URL('../cni-plugin/eni-ipam', import.meta.url));

/** A running shim node. */
export interface ShimNode {
  netns: Netns;
  /** The installed shim (`<binDir>/eni-ipam`). */
  plugin: string;
  /** The plugin config: network name, ipamd and exec sockets. */
  config: Record<string, unknown>;
  /** Available IPs in ipamd's pool (introspection read from inside the netns). */
  available(): Promise<number>;
  /** GETs an introspection path of ipamd (e.g. `/v1/stage-trace`) from inside the netns; the parsed JSON. */
  introspect(path: string): Promise<unknown>;
  /** Process id of ipamd (its CPU time: bench-util `cpuMsOf`). */
  ipamdPid: number;
  /** Every EC2 call this node's sim has answered so far (its `GET /_sim/calls`), oldest first. */
  ec2Calls(): Promise<ApiCallRecord[]>;
  stop(): Promise<void>;
}

/**
 * Starts sim + ipamd inside a new netns named `eni-shim-<tag>-<pid>`, files under `dir`.
 * `ipamdPath`: another build's dist/ipamd/main.js (default this build's). `simArgs`: more
 * flags of the sim process (sim/main.ts), e.g. `['--vpc-ipv6-cidr', '2600:1f14:abc:de00::/56']`
 * for a dual-stack subnet.
 * @throws Error (after cleaning up) when the sim or ipamd does not start.
 */
export async function startShimNode(
  dir: string,
  tag: string,
  ipamdEnv: NodeJS.ProcessEnv,
  ipamdPath?: string,
  simArgs: readonly string[] = [],
): Promise<ShimNode> {
  const cleanups: Array<() => Promise<unknown>> = [];
  const stop = async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
  };
  try {
    const netns = await createNamedNetns(`eni-shim-${tag}-${process.pid}`);
    cleanups.push(() => netns.remove());
    const env = { ...process.env };
    delete env.NODE_EXTRA_CA_CERTS;
    const sim = spawn(
      'nsenter',
      [
        `--net=${netns.path}`,
        process.execPath,
        SIM_MAIN,
        '--instance-type',
        'c5.4xlarge',
        '--subnet-cidr',
        '10.0.0.0/22',
        ...simArgs,
      ],
      { env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    cleanups.push(async () => {
      sim.kill('SIGTERM');
    });
    const endpoints = await new Promise<{ ec2Endpoint: string; imdsEndpoint: string }>((resolve, reject) => {
      let out = '';
      sim.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n')[0];
        if (out.includes('\n')) {
          try {
            resolve(JSON.parse(line!));
          } catch (e) {
            reject(e);
          }
        }
      });
      sim.on('exit', (code) => reject(new Error(`sim exited ${code}`)));
    });
    const binDir = path.join(dir, 'bin');
    await mkdir(binDir, { recursive: true });
    await copyFile(PLUGIN_PATH, path.join(binDir, 'eni-ipam.cjs'));
    const plugin = path.join(binDir, 'eni-ipam');
    await copyFile(SHIM, plugin);
    const socket = path.join(dir, 'ipamd.sock');
    const ipamd = await startIpamd({
      prefix: ['nsenter', `--net=${netns.path}`],
      env: {
        AWS_EC2_ENDPOINT: endpoints.ec2Endpoint,
        AWS_EC2_METADATA_SERVICE_ENDPOINT: endpoints.imdsEndpoint,
        ENI_IPAM_SOCKET: socket,
        ENI_IPAM_CHECKPOINT_PATH: path.join(dir, 'ipam.json'),
        ENI_IPAM_POOL_INTERVAL: '200ms',
        AWS_VPC_K8S_CNI_LOGLEVEL: 'info',
        ...ipamdEnv,
      },
      logFile: path.join(dir, 'ipamd.log'),
      ...(ipamdPath ? { ipamdPath } : {}),
    });
    cleanups.push(() => ipamd.stop());
    const config = {
      cniVersion: '1.0.0',
      name: 'aws-cni',
      type: 'eni-ipam',
      ipamdSocket: socket,
      execSocket: path.join(dir, 'cni-exec.sock'),
    };
    const getJson = async (url: string): Promise<unknown> => {
      const script = `fetch(${JSON.stringify(url)}).then(r=>r.text()).then(t=>process.stdout.write(t))`;
      const out = await promisify(execFile)('nsenter', [`--net=${netns.path}`, process.execPath, '-e', script], {
        env,
        maxBuffer: 64 << 20,
      });
      return JSON.parse(out.stdout) as unknown;
    };
    const introspect = (p: string) => getJson(`http://127.0.0.1:${ipamd.introspectionPort}${p}`);
    const ec2Calls = async () => (await getJson(`${endpoints.ec2Endpoint}/_sim/calls`)) as ApiCallRecord[];
    const available = async () =>
      ((await introspect('/v1/status')) as { counts: { available: number } }).counts.available;
    return { netns, plugin, config, available, introspect, ec2Calls, ipamdPid: ipamd.pid, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
