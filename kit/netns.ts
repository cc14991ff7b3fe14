/**
 * Network-namespace plumbing shared by the demo, the tests and the benchmarks: named
 * namespaces (`ip netns add`, the `/var/run/netns/<name>` shape containerd and CRI-O
 * use) and anonymous ones held by a sleeping process (the `/proc/<pid>/ns/net` shape of
 * docker-shim). Everything created here can be removed with the returned handles.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { waitFor } from './wait.js';

const execFileP = promisify(execFile);

/** Runs a command, resolving with stdout. @throws Error with the command's stderr. */
export async function run(
  cmd: string,
  args: string[],
  opts: { input?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, {
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      env: opts.env ?? process.env,
    });
    let out = '';
    let err = '';
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${err.trim()}`)),
    );
    if (p.stdin) {
      p.stdin.on('error', () => undefined); // the command may exit without reading; its exit code tells
      p.stdin.end(opts.input);
    }
  });
}

/** A network namespace with the path to enter it by, and how to remove it. */
export interface Netns {
  /** `/var/run/netns/<name>` or `/proc/<pid>/ns/net`. */
  path: string;
  name: string;
  shape: 'named' | 'proc';
  /** Removes the namespace (idempotent, never throws). */
  remove(): Promise<void>;
}

/**
 * A maker of named netns for one test: `mk(name)` creates `<prefix>-<name>-<tag>` with
 * {@link createNamedNetns}; every netns it made is removed after the test, last made first.
 */
export function netnsMaker(
  t: { after(fn: () => unknown): void },
  prefix: string,
  tag: string,
): (name: string) => Promise<Netns> {
  const made: Netns[] = [];
  t.after(async () => {
    for (const ns of made.reverse()) await ns.remove();
  });
  return async (name) => {
    const ns = await createNamedNetns(`${prefix}-${name}-${tag}`);
    made.push(ns);
    return ns;
  };
}

/** Creates `/var/run/netns/<name>` (replacing a stale one) with `lo` up. */
export async function createNamedNetns(name: string): Promise<Netns> {
  await execFileP('ip', ['netns', 'delete', name]).catch(() => undefined);
  await execFileP('ip', ['netns', 'add', name]);
  await execFileP('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  return {
    path: `/var/run/netns/${name}`,
    name,
    shape: 'named',
    remove: async () => {
      await execFileP('ip', ['netns', 'delete', name]).catch(() => undefined);
    },
  };
}

/**
 * Creates an anonymous namespace held by `sleep infinity` (started with
 * `unshare --net`), reachable only as `/proc/<pid>/ns/net`. Removing it kills the sleeper.
 */
export async function createProcNetns(name: string): Promise<Netns> {
  const child: ChildProcess = spawn('unshare', ['--net', '--', 'sleep', 'infinity'], {
    stdio: 'ignore',
    detached: true,
  });
  child.unref();
  if (!child.pid) throw new Error('unshare did not start');
  const path = `/proc/${child.pid}/ns/net`;
  // unshare execs sleep once the namespace exists: wait until the ns differs from ours.
  const mine = await execFileP('readlink', ['/proc/self/ns/net']).then((r) => r.stdout.trim());
  await waitFor(
    `the namespace of unshare at ${path}`,
    async () => {
      const theirs = await execFileP('readlink', [path]).then(
        (r) => r.stdout.trim(),
        () => '',
      );
      return theirs && theirs !== mine;
    },
    10_000,
    10,
  );
  await execFileP('nsenter', [`--net=${path}`, 'ip', 'link', 'set', 'lo', 'up']);
  return {
    path,
    name,
    shape: 'proc',
    remove: async () => {
      try {
        process.kill(child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    },
  };
}

/** Runs `ip -batch -` inside the namespace at `path` (entered by path) and returns stdout. */
export async function ipIn(path: string, args: string[]): Promise<string> {
  return run('nsenter', [`--net=${path}`, 'ip', ...args]);
}

/**
 * Opens a TCP connection from inside the namespace at `path` to `host:port`, sends
 * `payload` (one line), reads one line back and closes (bash's /dev/tcp; no extra binaries).
 * @returns the line the server answered (without its newline).
 * @throws Error if the connection, the send or the answer fails within `timeoutS` seconds.
 */
export async function tcpSendFrom(
  path: string,
  host: string,
  port: number,
  payload: string,
  timeoutS = 5,
): Promise<string> {
  return run('nsenter', [
    `--net=${path}`,
    'timeout',
    String(timeoutS),
    'bash',
    '-c',
    `exec 3<>/dev/tcp/${host}/${port} && printf '%s\\n' "$1" >&3 && read -t ${timeoutS} -r reply <&3 && printf '%s' "$reply"`,
    'tcp',
    payload,
  ]);
}
