/**
 * Runs iproute2 command batches (`ip -batch -`, commands on stdin, one process per
 * batch), optionally inside another network namespace entered by path with
 * `nsenter --net=<path>` (never by a PID parsed out of the path). The `ip` runner of the
 * plugin's wiring and of ipamd's reads of pod wiring (ip-query.ts builds on it), shared
 * from netfacts/ so neither imports the other.
 *
 * `ip` and `nsenter` are looked up once, in the children's PATH order (the process's PATH,
 * then the system dirs), and spawned by absolute path: a PATH walk per spawn costs several
 * failed execve in the child (seen in an strace of ipamd).
 * The child's environment is fixed at module load (PATH plus the system dirs, `LC_ALL=C`
 * so iproute2's messages are the English ones the callers match): nothing here reads the
 * invocation's or the host process's environment per call, so the same code runs in the
 * plugin process and inside ipamd (ipamd/cni-exec), where the CNI exec server builds an {@link IpRunner} on its spawn helper.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

/** Directories appended to PATH for `ip` and `nsenter` (runtimes may pass a minimal PATH). */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Environment of every `ip`/`nsenter` child (read once; immutable). */
const IP_ENV: NodeJS.ProcessEnv = Object.freeze({
  PATH: process.env.PATH ? `${process.env.PATH}:${SYSTEM_PATH}` : SYSTEM_PATH,
  LC_ALL: 'C',
});

const resolved = new Map<string, string>();

/**
 * Absolute path of the executable `name`: the first directory of the children's PATH
 * ({@link IP_ENV}) holding an executable file by that name; `name` itself (a PATH lookup
 * by the child) when none does. Cached for the life of the process.
 */
export function executablePath(name: string): string {
  let found = resolved.get(name);
  if (found !== undefined) return found;
  found = name;
  for (const dir of IP_ENV.PATH!.split(':')) {
    if (!dir.startsWith('/')) continue;
    try {
      accessSync(`${dir}/${name}`, constants.X_OK);
      found = `${dir}/${name}`;
      break;
    } catch {
      /* not here */
    }
  }
  resolved.set(name, found);
  return found;
}

/** argv of `ip <flags> -batch -` (`ipPath`, default the resolved `ip`), inside the netns at `netnsPath` when given. */
function ipArgv(flags: string[], netnsPath?: string, ipPath?: string): string[] {
  const ip = [ipPath ?? executablePath('ip'), ...flags, '-batch', '-'];
  return netnsPath ? [executablePath('nsenter'), `--net=${netnsPath}`, ...ip] : ip;
}

/** A started child (`ip` or `nsenter`) with piped stdin, stdout and stderr. */
export interface IpChild {
  /** Appends to the child's stdin (ignored once it exited). */
  write(data: string): void;
  /** Closes the child's stdin. */
  end(): void;
  /** Kills the child (SIGKILL); its `exit` follows. */
  kill(): void;
}

/** Callbacks of an {@link IpChild}: output chunks, then exactly one of `exit` (the code) or `failed` (spawn error). */
export interface IpChildEvents {
  stdout(data: string): void;
  stderr(data: string): void;
  exit(code: number | null): void;
  failed(e: Error): void;
}

/** Starts `argv` with `env`; events are delivered asynchronously. */
export type IpSpawner = (argv: string[], env: NodeJS.ProcessEnv, on: IpChildEvents) => IpChild;

/** The default spawner: `child_process.spawn` in this thread. */
export const localSpawner: IpSpawner = (argv, env, on) => {
  const p = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], env });
  p.stdout.setEncoding('utf8').on('data', on.stdout);
  p.stderr.setEncoding('utf8').on('data', on.stderr);
  p.stdin.on('error', () => undefined); // ip may exit before reading everything
  let over = false;
  p.on('error', (e) => {
    if (!over) {
      over = true;
      on.failed(e);
    }
  });
  p.on('close', (code) => {
    if (!over) {
      over = true;
      on.exit(code);
    }
  });
  return {
    write: (d) => {
      if (p.stdin.writable) p.stdin.write(d);
    },
    end: () => {
      if (p.stdin.writable) p.stdin.end();
    },
    kill: () => {
      p.kill('SIGKILL');
    },
  };
};

/** A failed `ip` batch: `stderr` is iproute2's message (e.g. "RTNETLINK answers: File exists"). */
export class IpBatchError extends Error {
  constructor(
    readonly argv: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`${argv.join(' ')} exited ${exitCode}: ${stderr.trim() || '(no message)'}`);
    this.name = 'IpBatchError';
  }
}

/**
 * Outcome of one `ip` process; `killed` says why it was killed (then `code` is null and
 * the output partial): it ran past the run's `timeoutMs`, or printed more than its `maxOutputBytes`.
 */
export interface IpRun {
  argv: string[];
  code: number | null;
  stdout: string;
  stderr: string;
  killed?: 'timeout' | 'output';
}

/** Bounds of one run: kill the process after `timeoutMs` ms, or once its stdout exceeds `maxOutputBytes` (UTF-16 units counted). */
export interface IpRunLimits {
  timeoutMs?: number;
  maxOutputBytes?: number;
}

/**
 * Runs `ip <flags> -batch -` with `lines` on stdin, inside the netns at `netnsPath` when
 * given (`nsenter --net=<path>`). Stdout is collected only when `wantStdout`.
 * @throws Error when the process cannot be spawned (a non-zero exit is in the result).
 */
function runIpWith(
  spawner: IpSpawner,
  ipPath: string | undefined,
  flags: string[],
  lines: string[],
  netnsPath?: string,
  wantStdout = false,
  limits: IpRunLimits = {},
): Promise<IpRun> {
  const argv = ipArgv(flags, netnsPath, ipPath);
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let killed: IpRun['killed'];
    const kill = (why: NonNullable<IpRun['killed']>) => {
      if (killed) return;
      killed = why;
      child.kill();
    };
    const timer = limits.timeoutMs !== undefined ? setTimeout(() => kill('timeout'), limits.timeoutMs) : undefined;
    const child = spawner(argv, IP_ENV, {
      stdout: (d) => {
        if (!wantStdout || killed) return;
        stdout += d;
        if (limits.maxOutputBytes !== undefined && stdout.length > limits.maxOutputBytes) kill('output');
      },
      stderr: (d) => {
        stderr += d;
      },
      exit: (code) => {
        clearTimeout(timer);
        resolve({ argv, code, stdout, stderr, ...(killed ? { killed } : {}) });
      },
      failed: (e) => {
        clearTimeout(timer);
        reject(e);
      },
    });
    child.write(`${lines.join('\n')}\n`);
    child.end();
  });
}

/**
 * Runs `lines` as one `ip -batch -` process; inside the netns at `netnsPath` when given.
 * Each line is one `ip` command without the leading `ip` (e.g. `link set dev lo up`);
 * arguments must not contain whitespace or quotes. The batch stops at the first failing
 * command (earlier commands stay applied).
 * @throws IpBatchError when ip exits non-zero; Error when it cannot be spawned.
 */
async function ipBatchWith(spawner: IpSpawner, lines: string[], netnsPath?: string): Promise<void> {
  const r = await runIpWith(spawner, undefined, [], lines, netnsPath);
  if (r.code !== 0) throw new IpBatchError(r.argv, r.code, r.stderr);
}

/**
 * One `ip -o -batch -` process kept open so that commands can be fed to it as they become
 * known (ADD spawns its processes before ipamd answers and sends the address lines
 * after, so no process start lies on the path after the answer). iproute2 runs each
 * line as soon as it reads it and stops at the first failing one.
 */
export interface IpStream {
  /** Sends `lines` (run as soon as ip reads them; a dead process ignores them). */
  write(lines: string[]): void;
  /**
   * Sends a marker command and resolves once ip ran it: every line sent before ran OK.
   * @throws IpBatchError when ip exited first (a line failed).
   */
  barrier(): Promise<void>;
  /**
   * Sends `lines`, closes ip's stdin and waits for its exit.
   * @throws IpBatchError when ip exits non-zero; Error when it cannot be spawned.
   */
  end(lines?: string[]): Promise<void>;
}

/** Marker of {@link IpStream.barrier}: prints exactly one line under `-o`, in any netns. */
const BARRIER_LINE = 'link show dev lo';

/**
 * Starts `ip -o -batch -` (inside the netns at `netnsPath` when given, by `nsenter`)
 * reading its commands from an open stdin; see {@link IpStream}. The caller must call
 * `end()` on every path, or the process waits for input forever.
 */
function openIpStreamWith(spawner: IpSpawner, netnsPath?: string): IpStream {
  const argv = ipArgv(['-o'], netnsPath);
  let stderr = '';
  let lines = 0;
  let barriers = 0;
  const waiting: { n: number; resolve: () => void; reject: (e: Error) => void }[] = [];
  let exit: Error | undefined;
  let ended = false;
  let child: IpChild | undefined;
  const exited = new Promise<void>((resolve, reject) => {
    const done = (e: Error | undefined) => {
      exit = e ?? new IpBatchError(argv, 0, 'ip exited before the marker');
      for (const w of waiting.splice(0)) w.reject(exit);
      if (e) reject(e);
      else resolve();
    };
    child = spawner(argv, IP_ENV, {
      stdout: (d) => {
        for (let i = d.indexOf('\n'); i >= 0; i = d.indexOf('\n', i + 1)) lines++;
        while (waiting.length && waiting[0]!.n <= lines) waiting.shift()!.resolve();
      },
      stderr: (d) => {
        stderr += d;
      },
      exit: (code) => done(code === 0 ? undefined : new IpBatchError(argv, code, stderr)),
      failed: (e) => done(e),
    });
  });
  exited.catch(() => undefined); // observed through end()/barrier()
  const write = (more: string[]) => {
    if (more.length && !ended) child!.write(`${more.join('\n')}\n`);
  };
  return {
    write,
    barrier: () => {
      if (exit) return Promise.reject(exit);
      write([BARRIER_LINE]);
      const n = ++barriers;
      return new Promise((resolve, reject) => waiting.push({ n, resolve, reject }));
    },
    end: (more = []) => {
      write(more);
      if (!ended) {
        ended = true;
        child!.end();
      }
      return exited;
    },
  };
}

/**
 * How the plugin code runs `ip`: the three primitives above bound to one {@link IpSpawner}.
 * The plugin process uses {@link LOCAL_IP} (children forked from its own thread); ipamd's
 * CNI exec server builds one on its spawn helper (ipamd/cni-exec/spawn-helper.ts) and
 * hands it to the plugin code in its host (host.ts), so nothing here is switched globally.
 */
export interface IpRunner {
  /** See {@link runIp}; `limits` bound the process's time and output. */
  runIp(
    flags: string[],
    lines: string[],
    netnsPath?: string,
    wantStdout?: boolean,
    limits?: IpRunLimits,
  ): Promise<IpRun>;
  /** See {@link ipBatch}. */
  ipBatch(lines: string[], netnsPath?: string): Promise<void>;
  /** See {@link openIpStream}. */
  openIpStream(netnsPath?: string): IpStream;
}

/**
 * A runner starting its children with `spawner` (default `child_process.spawn` in this
 * thread). `o.ipPath` replaces the `ip` binary of {@link IpRunner.runIp} (tests point it
 * at a script printing garbage); default the `ip` found on the children's PATH.
 */
export function createIpRunner(spawner: IpSpawner = localSpawner, o: { ipPath?: string } = {}): IpRunner {
  return {
    runIp: (flags, lines, netnsPath, wantStdout, limits) =>
      runIpWith(spawner, o.ipPath, flags, lines, netnsPath, wantStdout, limits),
    ipBatch: (lines, netnsPath) => ipBatchWith(spawner, lines, netnsPath),
    openIpStream: (netnsPath) => openIpStreamWith(spawner, netnsPath),
  };
}

/** The runner of a process that forks its own children (the plugin process, tools, tests). */
export const LOCAL_IP: IpRunner = createIpRunner();

/**
 * Runs `ip <flags> -batch -` with `lines` on stdin, inside the netns at `netnsPath` when
 * given (`nsenter --net=<path>`), from this thread. Stdout is collected only when `wantStdout`.
 * @throws Error when the process cannot be spawned (a non-zero exit is in the result).
 */
export function runIp(flags: string[], lines: string[], netnsPath?: string, wantStdout = false): Promise<IpRun> {
  return LOCAL_IP.runIp(flags, lines, netnsPath, wantStdout);
}

/**
 * Runs `lines` as one `ip -batch -` process from this thread; inside the netns at
 * `netnsPath` when given. Each line is one `ip` command without the leading `ip` (e.g.
 * `link set dev lo up`); arguments must not contain whitespace or quotes. The batch
 * stops at the first failing command (earlier commands stay applied).
 * @throws IpBatchError when ip exits non-zero; Error when it cannot be spawned.
 */
export function ipBatch(lines: string[], netnsPath?: string): Promise<void> {
  return LOCAL_IP.ipBatch(lines, netnsPath);
}

/** {@link IpStream} started from this thread; see {@link IpRunner.openIpStream}. */
export function openIpStream(netnsPath?: string): IpStream {
  return LOCAL_IP.openIpStream(netnsPath);
}
