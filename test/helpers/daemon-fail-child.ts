/**
 * Child process of test/integration/daemon-start-failure.test.ts: starts ipamd in this
 * process (startDaemon) with the environment in argv[2] (JSON), making part argv[3] fail
 * (or, with no argv[3], starting and then stopping it), then reports on stdout (one JSON
 * line) what is left: socket fds beyond those it had before, child processes, whether the
 * checkpoint directory's lock is free, and ipamd's error lines. It never calls
 * process.exit: the parent also checks that it ends by itself (no timer, socket or child
 * keeps the event loop alive).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../ipamd/config.js';
import { startDaemon, type DaemonPartName } from '../../ipamd/daemon.js';
import { pino } from 'pino';
import { acquireCheckpointLock } from '../../ipamd/startup/checkpoint-lock.js';
import { waitFor } from '../../kit/wait.js';

/** The socket inodes this process holds open. */
function sockets(): Set<string> {
  const out = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const l = readlinkSync(`/proc/self/fd/${fd}`);
      if (l.startsWith('socket:')) out.add(l);
    } catch {
      // closed while listing
    }
  }
  return out;
}

/**
 * What socket `sock` (`socket:[inode]`) is: a listening TCP or Unix socket, another Unix
 * socket, a TCP connection (with its /proc/net row), or other (e.g. netlink).
 */
function describe(sock: string): { kind: 'listening' | 'unix' | 'tcp' | 'other'; row: string } {
  const inode = sock.slice('socket:['.length, -1);
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6', '/proc/net/unix']) {
    const row = readFileSync(f, 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .find((cols) => cols.includes(inode));
    if (!row) continue;
    const line = `${f}: ${row.join(' ')}`;
    if (f === '/proc/net/unix') return { kind: row[3] === '00010000' ? 'listening' : 'unix', row: line };
    return { kind: row[3] === '0A' ? 'listening' : 'tcp', row: line };
  }
  return { kind: 'other', row: sock };
}

/** Pids of this process's children. */
function children(): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}

async function main(): Promise<void> {
  const env = JSON.parse(process.argv[2]!) as Record<string, string>;
  const failAt = process.argv[3] as DaemonPartName | undefined;
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  const log = pino({ level: 'info' }, sink); // synchronous into `sink`: every line is seen before the report
  const config = loadConfig(env);
  const before = sockets();
  let error: string | undefined;
  try {
    const daemon = await startDaemon(config, log, failAt ? { failAt } : {});
    await daemon.stop(2000);
  } catch (e) {
    error = (e as Error).message;
  }
  const left = () => [...sockets()].filter((s) => !before.has(s));
  // Closing is asynchronous (a socket's fd goes on a later tick): wait for it, with a deadline.
  await waitFor('no socket or child left', () => left().length === 0 && children().length === 0, 5000).catch(
    () => undefined,
  );
  let lockFree = false;
  try {
    const lock = await acquireCheckpointLock(path.dirname(config.checkpointPath));
    await lock.release();
    lockFree = true;
  } catch {
    lockFree = false;
  }
  const report = {
    error,
    socketsLeft: left().map(describe),
    childrenLeft: children(),
    lockFree,
    failLines: lines.filter((l) => /^ipamd part failed/.test(String(l.msg))),
    served: lines.some((l) => l.msg === 'ipamd serving'),
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

void main();
