/**
 * Executes the real CNI plugin binary the way a container runtime does: `CNI_*`
 * environment variables, the network configuration on stdin, the result (or the CNI
 * error object) on stdout. Used by the demo, the tests and the benchmarks.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Path of the bundled plugin (`npm run build` writes it). */
export const PLUGIN_PATH = fileURLToPath(new URL('../cni-plugin/eni-ipam.cjs', import.meta.url));

/** Path of the native shim (`npm run build` writes it): the binary ipamd installs as `eni-ipam`. */
export const SHIM_PATH = fileURLToPath(new URL('../cni-plugin/eni-ipam', import.meta.url));

/** One plugin invocation. */
export interface CniCall {
  command: 'ADD' | 'DEL' | 'CHECK' | 'VERSION' | 'GC' | 'STATUS';
  containerId?: string;
  netns?: string;
  ifName?: string;
  /** CNI_ARGS as key/value pairs (joined with `;`). */
  args?: Record<string, string>;
  config: unknown;
  /** Extra env (e.g. to run under `nsenter`). */
  env?: NodeJS.ProcessEnv;
  /** Command prefix, e.g. `['nsenter', '--net=/var/run/netns/node']`. */
  prefix?: string[];
  /** The plugin command (default: Node running the bundled plugin, `[node, PLUGIN_PATH]`). */
  plugin?: string[];
}

/** What the plugin did: exit code, parsed stdout (if JSON), raw stdout/stderr, wall time in ms. */
export interface CniOutcome {
  code: number;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Runs the plugin once. NODE_EXTRA_CA_CERTS is removed from its environment (it adds
 * ~130 ms to every Node start on these machines; see shared reference facts).
 */
export function execPlugin(c: CniCall): Promise<CniOutcome> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...c.env };
  delete env.NODE_EXTRA_CA_CERTS;
  Object.assign(env, {
    CNI_COMMAND: c.command,
    CNI_CONTAINERID: c.containerId ?? '',
    CNI_NETNS: c.netns ?? '',
    CNI_IFNAME: c.ifName ?? 'eth0',
    CNI_ARGS: Object.entries(c.args ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(';'),
    CNI_PATH: '/opt/cni/bin',
  });
  const argv = [...(c.prefix ?? []), ...(c.plugin ?? [process.execPath, PLUGIN_PATH])];
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0]!, argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      let json: unknown;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code: code ?? -1, json, stdout, stderr, ms: performance.now() - t0 });
    });
    p.stdin.on('error', () => undefined); // a plugin may exit before reading stdin; its output tells why
    p.stdin.end(typeof c.config === 'string' ? c.config : JSON.stringify(c.config));
  });
}
