/**
 * Starts the real ipamd binary as a child process (for the demo, tests and benchmarks)
 * and waits until it logs "ipamd serving" (in JSON or pretty format, ./serving-line.ts). Its log goes to `logFile`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import { IPAMD_NODE_FLAGS } from '../ipamd/v8-flags.js';
import { ownPathEnv } from './own-paths.js';
import { servingScanner } from './serving-line.js';

/** Path of the compiled daemon entry point. */
export const IPAMD_PATH = fileURLToPath(new URL('../ipamd/main.js', import.meta.url));

/** A running ipamd child. */
export interface IpamdProcess {
  child: ChildProcess;
  pid: number;
  /** Port of the introspection endpoint on 127.0.0.1 (in ipamd's network namespace). */
  introspectionPort: number;
  /** Port of the metrics endpoint, when metrics are served (DISABLE_METRICS=false). */
  metricsPort?: number;
  /** Fetches `/v1/status` (only from the same network namespace). */
  status(): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Sends SIGTERM and resolves with the exit code (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<number | null>;
  /** SIGKILL, as a crash would. */
  kill9(): Promise<void>;
  /** Resolves with the exit code when the process ends. */
  exited: Promise<number | null>;
}

/**
 * The environment {@link startIpamd} gives ipamd: the current one without NODE_EXTRA_CA_CERTS,
 * no CNI install, no host networking, introspection on a free port, metrics off, every setting
 * whose default is a machine path owned by the harness (`ownPathEnv` under `p.dir`, default
 * the log file's dir), then `p.env` over all of it.
 */
export function ipamdChildEnv(p: { env: NodeJS.ProcessEnv; logFile: string; dir?: string }): NodeJS.ProcessEnv {
  // Never touch the machine's real /etc/cni/net.d, its routing/iptables or any machine path unless the caller asks for it.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0',
    DISABLE_METRICS: 'true',
    ENI_IPAM_INSTALL_CNI: 'false',
    ENI_IPAM_HOST_NETWORK: 'false',
    ...ownPathEnv(p.dir ?? path.dirname(path.resolve(p.logFile))),
    ...p.env,
  };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/**
 * Spawns ipamd with `env` added to the current environment (NODE_EXTRA_CA_CERTS
 * removed) and waits up to `timeoutMs` for it to serve. Readiness is read from its
 * "ipamd serving" info line, so the log level must be info or more verbose. `ipamdPath`
 * runs another build's ipamd/main.js (bench/shim-add-ab.ts compares two builds); default this one's.
 * node runs it with the image entrypoint's V8 flags (IPAMD_NODE_FLAGS), or after `prefix`
 * (a command that execs node with flags of its own, as the benches' do) with none added.
 * With AWS_VPC_K8S_CNI_LOG_FILE set to a path in `env` (the chart's default is a file),
 * the line is read from that file instead, and stdout carries only what ipamd writes there.
 * @throws Error with the log tail if it exits or does not get ready in time.
 */
export async function startIpamd(p: {
  env: NodeJS.ProcessEnv;
  logFile: string;
  /** The harness's dir for the machine-path settings the caller leaves unset (default: the log file's dir). */
  dir?: string;
  prefix?: string[];
  timeoutMs?: number; // ms until it serves (default 90 000)
  ipamdPath?: string;
}): Promise<IpamdProcess> {
  const env = ipamdChildEnv(p);
  if (/^(warn|error|fatal)$/i.test(env.AWS_VPC_K8S_CNI_LOGLEVEL ?? ''))
    throw new Error('startIpamd needs AWS_VPC_K8S_CNI_LOGLEVEL info or more verbose to see "ipamd serving"');
  // The image entrypoint's V8 flags (so the bundle's code cache applies), unless a prefix brings its own.
  const flags = p.prefix ? [] : IPAMD_NODE_FLAGS;
  const argv = [...(p.prefix ?? []), process.execPath, ...flags, p.ipamdPath ?? IPAMD_PATH];
  // A log file ipamd appends to: only what this start writes counts (an earlier start logged "ipamd serving" too).
  const logFile = env.AWS_VPC_K8S_CNI_LOG_FILE;
  const fromFile = logFile !== undefined && path.isAbsolute(logFile);
  const logFrom = fromFile ? sizeOf(logFile) : 0;
  const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(p.logFile, { flags: 'a' });
  let tail = '';
  let metricsPort: number | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code, sig) => resolve(code ?? (sig ? 128 : null))),
  );
  const ready = new Promise<number>((resolve, reject) => {
    let buf = '';
    let served = false;
    const serving = servingScanner();
    // Reads "ipamd serving" from its log lines (JSON or pretty): stdout, or the file AWS_VPC_K8S_CNI_LOG_FILE names.
    const scan = (text: string) => {
      if (served) return; // only the "ipamd serving" record is read: nothing parsed per later log line
      buf += text;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const r = serving.push(line);
        if (r) {
          metricsPort = r.metricsPort;
          served = true;
          resolve(r.introspectionPort);
          return;
        }
      }
    };
    child.stdout!.on('data', (d: Buffer) => {
      log.write(d);
      tail = (tail + d.toString()).slice(-4000);
      if (!fromFile) scan(d.toString());
    });
    if (fromFile) void followUntilServed(logFile, logFrom, () => served || child.exitCode !== null, scan);
    child.stderr!.on('data', (d: Buffer) => {
      log.write(d);
      tail = (tail + d.toString()).slice(-4000);
    });
    void exited.then((code) => reject(new Error(`ipamd exited with ${code} before serving:\n${tail}`)));
  });
  // 90 s: at load average 40 with stress-ng (CI's loaded safety pass beside two lanes) a
  // start that takes 1 s on a quiet machine took over 30 s.
  const timeoutMs = p.timeoutMs ?? 90_000;
  let timer: NodeJS.Timeout | undefined;
  const introspectionPort = await Promise.race([
    ready,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`ipamd not serving after ${timeoutMs} ms:\n${tail}`)), timeoutMs);
    }),
  ])
    .catch((e: Error) => {
      child.kill('SIGKILL');
      throw e;
    })
    .finally(() => clearTimeout(timer));
  return {
    child,
    pid: child.pid!,
    introspectionPort,
    ...(metricsPort ? { metricsPort } : {}),
    exited,
    status: async () => (await fetch(`http://127.0.0.1:${introspectionPort}/v1/status`)).json(),
    stop: async (graceMs = 15_000) => {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(t);
      log.end();
      return code;
    },
    kill9: async () => {
      child.kill('SIGKILL');
      await exited;
      log.end();
    },
  };
}

/**
 * Reads `file` from byte `from` on as it grows, handing each new chunk to `onText`, until
 * `done()`: every 5 ms, so a restart's time to serving is read to within that; a file not
 * there yet is "nothing yet".
 */
async function followUntilServed(
  file: string,
  from: number,
  done: () => boolean,
  onText: (text: string) => void,
): Promise<void> {
  let offset = from;
  const chunk = Buffer.alloc(64 * 1024);
  const utf8 = new StringDecoder('utf8');
  while (!done()) {
    const fh = await open(file, 'r').catch(() => undefined);
    if (fh) {
      try {
        for (let n; (n = (await fh.read(chunk, 0, chunk.length, offset)).bytesRead) > 0; offset += n)
          onText(utf8.write(chunk.subarray(0, n)));
      } finally {
        await fh.close();
      }
    }
    if (!done()) await new Promise((r) => setTimeout(r, 5)); // the poll interval of this follow-the-log wait
  }
}

/** Size of `file` in bytes; 0 when it does not exist. */
function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}
