/**
 * One long-running process of the test cluster (etcd, kube-apiserver, containerd,
 * kubelet…): started through `nsenter` into the node's network (and optionally mount)
 * namespace, its output appended to a log file, stopped with SIGTERM then SIGKILL.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

/** A started process. */
export interface DaemonProcess {
  name: string;
  pid: number;
  logFile: string;
  /** True once the process has exited. */
  exited(): boolean;
  /** The last `n` lines of its log. */
  tail(n?: number): string;
  /** SIGTERM, then SIGKILL after `graceMs` (default 10 000; 0: SIGKILL at once); resolves when it has exited. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts `argv` in the namespaces given (paths of `/var/run/netns/<n>` or `/proc/<pid>/ns/*`).
 * The environment is the caller's minus NODE_EXTRA_CA_CERTS (containerd passes its whole
 * environment to CNI plugins).
 * @throws Error when the process cannot be spawned.
 */
export function startDaemon(o: {
  name: string;
  argv: string[];
  logFile: string;
  netns?: string;
  mountns?: string;
  /** A UTS namespace (the node's hostname). */
  uts?: string;
  env?: Record<string, string>;
}): DaemonProcess {
  const env: NodeJS.ProcessEnv = { ...process.env, ...o.env };
  delete env['NODE_EXTRA_CA_CERTS'];
  const ns = [
    ...(o.netns ? [`--net=${o.netns}`] : []),
    ...(o.mountns ? [`--mount=${o.mountns}`] : []),
    ...(o.uts ? [`--uts=${o.uts}`] : []),
  ];
  const fd = openSync(o.logFile, 'a');
  const child = ns.length
    ? spawn('nsenter', [...ns, '--', ...o.argv], { env, stdio: ['ignore', fd, fd], detached: true })
    : spawn(o.argv[0]!, o.argv.slice(1), { env, stdio: ['ignore', fd, fd], detached: true });
  closeSync(fd);
  child.unref();
  let done = false;
  const exitP = new Promise<void>((resolve) => {
    child.once('exit', () => ((done = true), resolve()));
    child.once('error', () => ((done = true), resolve()));
  });
  const pid = child.pid ?? -1;
  let stopping: Promise<void> | undefined;
  return {
    name: o.name,
    pid,
    logFile: o.logFile,
    exited: () => done,
    tail(n = 20) {
      try {
        return readFileSync(o.logFile, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
      } catch {
        return '';
      }
    },
    stop(graceMs = 10_000) {
      return (stopping ??= (async () => {
        if (done || pid <= 0) return;
        const signal = (s: NodeJS.Signals): void => {
          try {
            process.kill(-pid, s); // the process group: nsenter and what it started
          } catch {
            /* gone */
          }
        };
        if (graceMs <= 0) {
          signal('SIGKILL');
          await exitP;
          return;
        }
        signal('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        const killed = await Promise.race([
          exitP.then(() => false),
          new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs))),
        ]);
        clearTimeout(timer);
        if (killed) {
          signal('SIGKILL');
          await exitP;
        }
      })());
    },
  };
}

/**
 * Polls `ready` every `intervalMs` until it returns true. Fails at once when `p` exits, and
 * after `timeoutMs` otherwise; either error names the process and `what`, with its log tail.
 * @throws Error as said.
 */
export async function waitStarted(
  p: DaemonProcess,
  what: string,
  ready: () => Promise<boolean>,
  timeoutMs: number,
  intervalMs = 250,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    if (p.exited())
      throw new Error(`${p.name} exited while waiting for ${what}\n--- ${p.logFile} (tail) ---\n${p.tail()}`);
    try {
      if (await ready()) return;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${p.name} did not start: no ${what} within ${timeoutMs} ms${last ? ` (${last})` : ''}\n--- ${p.logFile} (tail) ---\n${p.tail()}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs)); // the poll interval of this wait (it also watches for an exit)
  }
}

/** True while process `pid` exists (signal 0). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
