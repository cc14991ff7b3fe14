/**
 * Starts the plugin code's `ip`/`nsenter` children from a worker thread inside ipamd.
 * libuv forks the whole process for each child, and in a process of ipamd's size that
 * fork blocks the calling thread for 1–3.5 ms (measured on ADD, two children per pod):
 * from the main thread it stalls the event loop that is answering that very ADD's
 * `AddNetwork` (checkpoint write included). From a worker the fork runs beside the loop.
 * The worker only spawns and relays stdio and exit codes (in order, by message); the
 * plugin code uses it through the `IpSpawner` the CNI exec server puts in the host it
 * hands the plugin (cni-plugin/host.ts). {@link acquireSpawnWorker} gives every CNI exec
 * server of a process the same worker (ipamd has one; a fleet simulation runs hundreds
 * in one process, where a worker thread each would be a V8 isolate each).
 *
 * If the worker dies, the children it ran are reported failed and later spawns by its
 * spawner go through `child_process.spawn` in the main thread again.
 */
import { Worker } from 'node:worker_threads';
import { localSpawner, type IpChildEvents, type IpSpawner } from '../../netfacts/ip-batch.js';

/** The worker's code (CommonJS, evaluated): spawn on request, relay every event back. */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const kids = new Map();
const post = (m) => parentPort.postMessage(m);
parentPort.on('message', (m) => {
  if (m.op !== 'spawn') {
    const p = kids.get(m.id);
    if (p && m.op === 'kill') { p.kill('SIGKILL'); return; }
    if (!p || !p.stdin.writable) return;
    if (m.op === 'write') p.stdin.write(m.data); else p.stdin.end();
    return;
  }
  let p;
  const t0 = performance.now();
  try {
    p = spawn(m.argv[0], m.argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], env: m.env });
  } catch (e) {
    post({ id: m.id, ev: 'failed', message: String(e && e.message) });
    return;
  }
  post({ id: m.id, ev: 'spawned', ms: performance.now() - t0 });
  kids.set(m.id, p);
  let over = false;
  p.stdout.setEncoding('utf8').on('data', (d) => post({ id: m.id, ev: 'stdout', data: d }));
  p.stderr.setEncoding('utf8').on('data', (d) => post({ id: m.id, ev: 'stderr', data: d }));
  p.stdin.on('error', () => undefined);
  p.on('error', (e) => { if (over) return; over = true; kids.delete(m.id); post({ id: m.id, ev: 'failed', message: e.message }); });
  p.on('close', (code) => { if (over) return; over = true; kids.delete(m.id); post({ id: m.id, ev: 'exit', code }); });
});
`;

type FromWorker =
  | { id: number; ev: 'spawned'; ms: number }
  | { id: number; ev: 'stdout'; data: string }
  | { id: number; ev: 'stderr'; data: string }
  | { id: number; ev: 'exit'; code: number | null }
  | { id: number; ev: 'failed'; message: string };

/** A running spawn worker; {@link SpawnWorker.stop} ends it. */
export interface SpawnWorker {
  /** Starts a child through the worker (through the main thread once the worker ended). */
  readonly spawner: IpSpawner;
  /** Children started and not yet exited. */
  readonly running: number;
  /** Ends the worker; its spawner then starts children from the main thread. */
  stop(): Promise<void>;
  /** False once the worker ended (stopped, or died). */
  readonly alive: boolean;
}

/**
 * Starts the worker; its {@link SpawnWorker.spawner} starts children through it.
 * The worker does not keep the process alive. `onSpawned(callMs, roundTripMs)`, when
 * given, is told of each child started: how long the worker's `spawn()` call took (ms,
 * fork + exec up to libuv's return) and the time from the request to the worker's
 * report of it arriving back on this thread (ms).
 */
export function startSpawnWorker(onSpawned?: (callMs: number, roundTripMs: number) => void): SpawnWorker {
  const worker = new Worker(WORKER_SOURCE, { eval: true });
  worker.unref();
  const children = new Map<number, IpChildEvents>();
  const asked = new Map<number, number>();
  let nextId = 1;
  let dead = false;
  worker.on('message', (m: FromWorker) => {
    if (m.ev === 'spawned') {
      const t0 = asked.get(m.id);
      asked.delete(m.id);
      if (t0 !== undefined) onSpawned?.(m.ms, performance.now() - t0);
      return;
    }
    const on = children.get(m.id);
    if (!on) return;
    if (m.ev === 'stdout') on.stdout(m.data);
    else if (m.ev === 'stderr') on.stderr(m.data);
    else if (m.ev === 'exit') {
      children.delete(m.id);
      on.exit(m.code);
    } else {
      children.delete(m.id);
      asked.delete(m.id);
      on.failed(new Error(m.message));
    }
  });
  const die = (why: string) => {
    if (dead) return;
    dead = true;
    for (const on of children.values()) on.failed(new Error(`the spawn worker ended (${why})`));
    children.clear();
    asked.clear();
  };
  worker.on('error', (e: Error) => die(e.message));
  worker.on('exit', (code) => die(`exit ${code}`));

  const spawner: IpSpawner = (argv, env, on) => {
    if (dead) return localSpawner(argv, env, on);
    const id = nextId++;
    children.set(id, on);
    if (onSpawned) asked.set(id, performance.now());
    worker.postMessage({ op: 'spawn', id, argv, env: { ...env } });
    return {
      write: (data) => {
        if (!dead) worker.postMessage({ op: 'write', id, data });
      },
      end: () => {
        if (!dead) worker.postMessage({ op: 'end', id });
      },
      kill: () => {
        if (!dead) worker.postMessage({ op: 'kill', id });
      },
    };
  };
  return {
    spawner,
    get running() {
      return children.size;
    },
    get alive() {
      return !dead;
    },
    stop: async () => {
      die('stopped');
      await worker.terminate();
    },
  };
}

let shared: { worker: SpawnWorker; users: number } | undefined;

/**
 * This process's spawn worker, started by the first caller (whose `onSpawned` it keeps;
 * ipamd's is the process-wide stage trace) and shared until every caller has stopped its
 * handle: a handle's {@link SpawnWorker.stop} ends the worker only when it is the last
 * (`running` counts every user's children). A worker that died is replaced for later callers.
 */
export function acquireSpawnWorker(onSpawned?: (callMs: number, roundTripMs: number) => void): SpawnWorker {
  if (!shared?.worker.alive) shared = { worker: startSpawnWorker(onSpawned), users: 0 };
  const s = shared;
  s.users++;
  let stopped = false;
  return {
    spawner: s.worker.spawner,
    get running() {
      return s.worker.running;
    },
    get alive() {
      return s.worker.alive;
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      if (--s.users > 0) return;
      if (shared === s) shared = undefined;
      await s.worker.stop();
    },
  };
}
