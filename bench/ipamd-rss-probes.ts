/**
 * What bench/ipamd-rss.ts reads of the ipamd it runs in a child process: its resident
 * memory and CPU time (/proc, Linux), its V8 heap (its Prometheus endpoint), its log
 * file (the restart timeline), and the time its first ADD is answered after a restart.
 */
import { readFileSync, statSync } from 'node:fs';
import { pluginClient, sleep } from './bench-util.js';

/** VmRSS of `pid` in MiB (Linux /proc). @throws Error when the process is gone. */
export function vmRssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Math.round((Number(m[1]) / 1024) * 10) / 10;
}

/** CPU seconds (user + system) `pid` has used (/proc/<pid>/stat fields 14 and 15, clock ticks of 1/100 s). */
export function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Size of `file` in bytes, 0 when it does not exist. */
export function statSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * Prints each log line ipamd wrote from byte `from` of `file` on, as ms after `spawnedAt`
 * (epoch ms) with its message: where the time between spawn and "ipamd serving" went.
 */
export function printTimeline(file: string, from: number, spawnedAt: number): void {
  const text = readFileSync(file, 'utf8').slice(from);
  const out: string[] = [];
  for (const line of text.split('\n')) {
    try {
      const o = JSON.parse(line) as { time?: string; msg?: string };
      if (o.time && o.msg) out.push(`${String(Date.parse(o.time) - spawnedAt).padStart(5)} ms  ${o.msg}`);
      if (o.msg === 'ipamd serving') break;
    } catch {
      /* not JSON */
    }
  }
  console.log(`restart timeline (ms after spawn):\n${out.join('\n')}`);
}

/**
 * ipamd's V8 heap, committed / used, and external memory (MiB) from its Prometheus
 * endpoint (prom-client's default `nodejs_heap_size_total_bytes`,
 * `nodejs_heap_size_used_bytes`, `nodejs_external_memory_bytes`); its port is read from
 * the "ipamd serving" log line (`metricsPort`) of `logFile`. "n/a" when unreadable.
 */
export async function heapMiB(logFile: string): Promise<string> {
  try {
    const serving = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"ipamd serving"'))
      .at(-1);
    const port = (JSON.parse(serving ?? '{}') as { metricsPort?: number }).metricsPort;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const v = (name: string) =>
      (Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1]) / 1048576).toFixed(1);
    return `${v('nodejs_heap_size_total_bytes')}/${v('nodejs_heap_size_used_bytes')}/${v('nodejs_external_memory_bytes')}`;
  } catch {
    return 'n/a';
  }
}

/** Anonymous and file-backed resident MiB of `pid` (/proc/<pid>/smaps_rollup, Linux ≥ 4.14). */
export function rssSplit(pid: number): string {
  const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(t)?.[1] ?? NaN);
  const mib = (v: number) => (v / 1024).toFixed(1);
  return `rss ${mib(kb('Rss'))} = anonymous ${mib(kb('Anonymous'))} + file-backed ${mib(kb('Rss') - kb('Anonymous'))} MiB`;
}

/**
 * Repeats the ADD of held pod `id` on `socket` from now on, each try on a new connection
 * 2 ms after the last failed, until one is answered; resolves with the time it was
 * answered (performance.now(), ms). @throws Error when the answer is another address than
 * `expectIp` (the restart lost the allocation), or after `timeoutMs` without an answer.
 */
export async function firstAddAnswered(
  socket: string,
  id: string,
  expectIp: string,
  timeoutMs: number,
): Promise<number> {
  for (const until = performance.now() + timeoutMs; performance.now() < until; await sleep(2)) {
    const c = pluginClient(socket);
    const r = (await c.add(id).catch(() => undefined)) as { ipv4_addr?: string } | undefined; // not serving yet
    const at = performance.now();
    c.close();
    if (!r) continue;
    if (r.ipv4_addr !== expectIp)
      throw new Error(`restart: ADD of held ${id} answered ${r.ipv4_addr}, had ${expectIp}`);
    return at;
  }
  throw new Error(`restart: no ADD of ${id} answered within ${timeoutMs} ms`);
}
