/**
 * Small helpers shared by the warm-pool benchmarks: EC2 call tallies from the simulated
 * cloud's call log, pacing, markdown table rows, and a seeded checkpoint file.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readBootId } from '../ipamd/checkpoint/index.js';
import type { ApiCallRecord } from '../sim/index.js';

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** EC2 calls by action (failed calls included), sorted by action name. */
export function callsByAction(calls: readonly ApiCallRecord[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const c of calls) m.set(c.action, (m.get(c.action) ?? 0) + 1);
  return new Map([...m].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** True for the actions EC2 throttles in its mutating class (everything but Describe*). */
export function isMutating(action: string): boolean {
  return !action.startsWith('Describe');
}

/** Calls answered with `RequestLimitExceeded`. */
export function throttledCalls(calls: readonly ApiCallRecord[]): number {
  return calls.filter((c) => c.errorCode === 'RequestLimitExceeded').length;
}

/** A markdown table row. */
export function row(cells: Array<string | number>): string {
  return `| ${cells.join(' | ')} |`;
}

/** Resident set size of this process in MiB. */
export function rssMiB(): number {
  return Math.round(process.memoryUsage().rss / 2 ** 20);
}

/** `yyyy-mm-dd, N vCPU, Node vX` for the header line of a bench. */
export function machineLine(cpus: number): string {
  return `${new Date().toISOString().slice(0, 10)}, ${cpus} vCPU, Node ${process.version}`;
}

/**
 * Writes a checkpoint of this boot (ipamd/checkpoint format, version 1) at `file` with no
 * allocation and `n` remembered DELs (the datastore keeps at most 4096,
 * RELEASED_CONTAINERS_KEPT): the state of a node after `n` pod deletions, so a bench starts
 * in that steady state instead of filling it while it measures.
 */
export async function seedReleasedCheckpoint(file: string, n: number): Promise<void> {
  const released = Array.from({ length: n }, (_, i) => ({
    containerID: `gone${String(i).padStart(60, '0')}`,
    releasedAt: Date.now() - 60_000 + i,
  }));
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, JSON.stringify({ version: 1, bootId: readBootId(), allocations: [], cooldown: [], released }));
}
