/**
 * Starts ipamd's `ip`/`nsenter` children through `eni-ipam-spawn`
 * (ipamd/cni-exec/spawn/eni-ipam-spawn.c), a small long-lived process that forks them, so
 * ipamd itself does not fork. libuv forks the whole process for each child: in ipamd that
 * blocks the forking thread for 1–3.5 ms (measured on ADD) and leaves copy-on-write faults
 * on the event loop's next writes to every page; in a fleet simulation's 300–450 MiB
 * process, tens of ms per child. The helper forks at its own few hundred KiB and relays
 * each child's stdin, stdout, stderr and exit (the frame format is the C file's docstring).
 *
 * The plugin code and the kernel evidence use it through an `IpSpawner`
 * (netfacts/ip-batch.ts). If the helper exits, the children it ran are reported failed
 * (a kernel read counts as unreadable, never as empty) and the next spawn starts it again;
 * a helper that is missing, or ends before its first answer (it cannot run), leaves later
 * spawns on `child_process.spawn` in this thread, as a build without it would.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import { holdChild } from '../../netfacts/child-ref.js';
import { localSpawner, type IpChildEvents, type IpSpawner } from '../../netfacts/ip-batch.js';
import { stageTrace } from '../service/stage-trace.js';

/** The helper of this build (dist/cni-plugin/eni-ipam-spawn). */
export const BUNDLED_SPAWN_HELPER = fileURLToPath(new URL('../../cni-plugin/eni-ipam-spawn', import.meta.url));

/** Frame header: u32 payload length, u8 type, u32 id (host byte order, as the helper's). */
const HDR = 9;

/** A child in flight: its callbacks and a decoder per output stream (UTF-8 split across chunks). */
interface Running {
  on: IpChildEvents;
  out: StringDecoder;
  err: StringDecoder;
  askedAt: number;
}

/** A running spawn helper; {@link SpawnHelper.stop} ends it. */
export interface SpawnHelper {
  /** Starts a child through the helper (in this thread when the helper cannot run). */
  readonly spawner: IpSpawner;
  /** Children started and not yet exited. */
  readonly running: number;
  /** Ends the helper; children still running are reported failed. */
  stop(): Promise<void>;
}

/** Encodes one request frame. */
function frame(type: string, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.allocUnsafe(HDR);
  h.writeUInt32LE(payload.length, 0);
  h.write(type, 4, 'latin1');
  h.writeUInt32LE(id, 5);
  return payload.length ? Buffer.concat([h, payload]) : h;
}

/** The 'S' payload: u32 argc, u32 envc, then argv and NAME=value strings, each NUL-terminated. */
function spawnPayload(argv: string[], env: NodeJS.ProcessEnv): Buffer {
  const vars = Object.entries(env)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${k}=${v}`);
  const counts = Buffer.allocUnsafe(8);
  counts.writeUInt32LE(argv.length, 0);
  counts.writeUInt32LE(vars.length, 4);
  return Buffer.concat([counts, Buffer.from([...argv, ...vars].map((s) => `${s}\0`).join(''))]);
}

/**
 * A stdout `data` handler cutting the helper's byte stream (frames possibly split across
 * chunks) into frames: `deliver(type, id, payload)` for each complete one, in order.
 */
function frameReader(deliver: (type: string, id: number, body: Buffer) => void): (d: Buffer) => void {
  let buf: Buffer = Buffer.alloc(0);
  return (d) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    let off = 0;
    while (buf.length - off >= HDR) {
      const len = buf.readUInt32LE(off);
      if (buf.length - off < HDR + len) break;
      deliver(String.fromCharCode(buf[off + 4]!), buf.readUInt32LE(off + 5), buf.subarray(off + HDR, off + HDR + len));
      off += HDR + len;
    }
    buf = off === buf.length ? Buffer.alloc(0) : buf.subarray(off);
  };
}

/**
 * Starts the helper at `path` (default {@link BUNDLED_SPAWN_HELPER}) lazily, on the first
 * spawn, and again after it exited. `onSpawned(callMs, roundTripMs)`, when given, is told of
 * each child started: the helper's fork and exec (ms) and the time from the request to its
 * report arriving here (ms). The helper does not keep this process alive while no child runs.
 * Throws nothing: argv or env strings holding a NUL byte make that spawn fail (`failed`).
 */
export function startSpawnHelper(
  path: string = BUNDLED_SPAWN_HELPER,
  onSpawned?: (callMs: number, roundTripMs: number) => void,
): SpawnHelper {
  let usable = true;
  try {
    accessSync(path, constants.X_OK);
  } catch {
    usable = false;
  }
  let helper: ChildProcessWithoutNullStreams | undefined;
  const kids = new Map<number, Running>();
  let nextId = 1;
  let stopped = false;

  const hold = holdChild;

  const deliver = (type: string, id: number, body: Buffer) => {
    const k = kids.get(id);
    if (!k) return;
    if (type === 'O') k.on.stdout(k.out.write(body));
    else if (type === 'R') k.on.stderr(k.err.write(body));
    else if (type === 'P') onSpawned?.(body.readUInt32LE(0) / 1000, performance.now() - k.askedAt);
    else if (type === 'X' || type === 'F') {
      kids.delete(id);
      if (!kids.size && helper) hold(helper, false);
      if (type === 'F') return k.on.failed(new Error(body.subarray(4).toString('utf8')));
      const rest = [k.out.end(), k.err.end()];
      if (rest[0]) k.on.stdout(rest[0]);
      if (rest[1]) k.on.stderr(rest[1]);
      const code = body.readInt32LE(0);
      k.on.exit(code >= 0 ? code : null);
    }
  };

  const start = (): ChildProcessWithoutNullStreams => {
    const p = spawn(path, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    let answered = false;
    const frames = frameReader(deliver);
    p.stdout.on('data', (d: Buffer) => {
      answered = true;
      frames(d);
    });
    p.stderr.setEncoding('utf8').on('data', (d: string) => {
      err = (err + d).slice(-1000);
    });
    p.stdin.on('error', () => undefined); // it exited: reported below
    let gone = false;
    const end = (why: string) => {
      if (gone) return;
      gone = true;
      if (helper === p) helper = undefined;
      // One that ended without a single answer (cannot start: e.g. exec refused) would fail every
      // child it is handed, kernel reads included: later spawns go through this thread instead.
      if (!answered) usable = false;
      const lost = [...kids.values()];
      kids.clear();
      for (const k of lost) k.on.failed(new Error(`eni-ipam-spawn ${why}${err ? `: ${err.trim()}` : ''}`));
    };
    p.on('error', (e) => end(`could not run (${e.message})`));
    p.on('close', (code, signal) => end(`exited (${signal ?? code})`));
    hold(p, false);
    return p;
  };

  const spawner: IpSpawner = (argv, env, on) => {
    if (stopped || !usable) return localSpawner(argv, env, on);
    const p = (helper ??= start());
    const id = nextId++;
    if (nextId > 0x7fffffff) nextId = 1;
    kids.set(id, { on, out: new StringDecoder('utf8'), err: new StringDecoder('utf8'), askedAt: performance.now() });
    hold(p, true);
    const send = (b: Buffer) => {
      if (kids.has(id) && helper === p) p.stdin.write(b);
    };
    if ([...argv, ...Object.values(env)].some((s) => s?.includes('\0'))) {
      queueMicrotask(() => deliver('F', id, Buffer.concat([Buffer.alloc(4), Buffer.from('spawn: NUL byte in argv')])));
    } else send(frame('S', id, spawnPayload(argv, env)));
    return {
      write: (data) => send(frame('W', id, Buffer.from(data))),
      end: () => send(frame('E', id)),
      kill: () => send(frame('K', id)),
    };
  };

  return {
    spawner,
    get running() {
      return kids.size;
    },
    stop: async () => {
      stopped = true;
      const p = helper;
      if (!p) return;
      const closed = new Promise<void>((resolve) => p.once('close', () => resolve()));
      hold(p, true); // until it has gone
      p.stdin.end();
      await closed;
    },
  };
}

/**
 * ipamd's `onSpawned`: each child's spawn call and relay time (ms) into the process-wide
 * stage trace (`cni.spawn.call`, `cni.spawn.relay`; GET /v1/stage-trace).
 */
export function traceSpawn(callMs: number, roundTripMs: number): void {
  stageTrace.record('cni.spawn.call', callMs);
  stageTrace.record('cni.spawn.relay', roundTripMs - callMs);
}

/** The shared helpers by path: one per helper binary, as netlink-start.ts keeps one netlink helper per node netns. */
const shared = new Map<string, { helper: SpawnHelper; users: number }>();

/**
 * This process's spawn helper at `path` (default {@link BUNDLED_SPAWN_HELPER}), started by
 * its first caller (whose `onSpawned` it keeps; ipamd's is the process-wide stage trace) and
 * shared until every caller of that path has stopped its handle: a handle's
 * {@link SpawnHelper.stop} ends the helper only when it is the last (`running` counts every
 * user's children). A caller naming another path gets a helper of its own. ipamd's users are
 * its kernel reads (from the first evidence pass on) and its CNI exec server; a fleet
 * simulation has hundreds of each in one process, which then share one helper.
 */
export function acquireSpawnHelper(
  onSpawned?: (callMs: number, roundTripMs: number) => void,
  path?: string,
): SpawnHelper {
  const key = path ?? BUNDLED_SPAWN_HELPER;
  const s = shared.get(key) ?? { helper: startSpawnHelper(key, onSpawned), users: 0 };
  shared.set(key, s);
  s.users++;
  let stopped = false;
  return {
    spawner: s.helper.spawner,
    get running() {
      return s.helper.running;
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      if (--s.users > 0) return;
      if (shared.get(key) === s) shared.delete(key);
      await s.helper.stop();
    },
  };
}
