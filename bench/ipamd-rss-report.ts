/**
 * The table bench/ipamd-rss.ts prints, and the shapes of what its steps measured: ipamd's
 * resident memory (VmRSS, MiB) idle, with the pods held, after the churn and after the
 * restarts; the churn's pairs, peak and CPU per pair; the restarts' times (ms).
 */
import os from 'node:os';
import { machineLine, row } from './bench-util.js';
import { quantile } from './stats.js';

/** The part of ipamd's `GET /v1/status` the table shows: the allocations it holds. */
export interface NodeStatus {
  counts: { assigned: number };
}

/** What the churn measured (bench/ipamd-rss.ts `churn`). */
export interface ChurnResult {
  /** DEL+ADD pairs done. */
  pairs: number;
  /** Highest VmRSS (MiB) of the samples every 10 s, and of `held`. */
  peak: number;
  /** One sample a minute: "VmRSS MiB (V8 heap committed/used/external MiB)". */
  perMinute: string[];
  /** CPU (user + system) ipamd used per pair, ms. */
  cpuMsPerPair: number;
}

/**
 * What the restarts measured (bench/ipamd-rss.ts `restartLoop`); times are ms after the
 * spawn's start, the A lists `--a-dist`'s build's.
 */
export interface RestartResult {
  /** To the first ADD of a held pod answered, this build. */
  restarts: number[];
  restartsA: number[];
  /** To `node.start()` returning (its log shows "ipamd serving"), this build. */
  logLines: number[];
  logLinesA: number[];
  /** EC2 actions called during the restarts, in order. */
  restartCalls: string[];
  /** ipamd's status after the last restart (`before` when none ran). */
  s2: NodeStatus;
  /** `--a-dist`'s ipamd/main.js, absolute; undefined without it. */
  aMain: string | undefined;
}

/** The resident-memory samples (VmRSS, MiB), the status after the churn and each ADD's time. */
export interface RssSamples {
  idle: number;
  held: number;
  after: number;
  afterRestart: number;
  /** ipamd's status after the churn, before the restarts. */
  s: NodeStatus;
  /** Each ADD's gRPC round trip, ms. */
  addMs: number[];
}

/** The run's settings the table shows: `--v8-defaults`, `--a-dist`, the pods held and the churn's seconds. */
export interface RssRun {
  values: { 'v8-defaults'?: boolean; 'a-dist'?: string };
  pods: number;
  churnS: number;
}

/** Prints the table: the memory and churn row, the restart rows (A's too with `--a-dist`). */
export function printRssReport(run: RssRun, m: RssSamples, ch: ChurnResult, rs: RestartResult): void {
  const { values, pods, churnS } = run;
  const { idle, held, after, afterRestart, s, addMs } = m;
  const { restarts, restartsA, logLines, logLinesA, restartCalls, s2, aMain } = rs;
  const restartMs = quantile(restarts, 0.5);
  console.log(machineLine(os.cpus().length));
  console.log(
    row([
      'ipamd RSS (MiB)',
      'idle',
      `${pods} held`,
      `after ${churnS} s churn`,
      'peak during churn',
      'churn pairs',
      'assigned',
      'ADD p50 / p90 ms (gRPC, one client)',
      'ipamd CPU ms per churn pair',
    ]),
  );
  console.log(
    row([
      values['v8-defaults'] ? 'm5.large, prefix mode, V8 defaults' : 'm5.large, prefix mode',
      idle,
      held,
      after,
      ch.peak,
      ch.pairs,
      s.counts.assigned,
      `${quantile(addMs, 0.5).toFixed(2)} / ${quantile(addMs, 0.9).toFixed(2)}`,
      ch.cpuMsPerPair.toFixed(1),
    ]),
  );
  console.log(
    row([
      'restart',
      `to the first ADD answered (ms, spawn included; median of ${restarts.length}: ${restarts.map((r) => Math.round(r)).join(', ')}); to "ipamd serving" in its log: ${Math.round(quantile(logLines, 0.5))}`,
      'EC2 calls until serving',
      'assigned after',
      'RSS 2 s after (MiB)',
    ]),
  );
  if (aMain)
    console.log(
      row([
        `A: ${values['a-dist']}`,
        `${Math.round(quantile(restartsA, 0.5))} (median of ${restartsA.length}: ${restartsA.map((r) => Math.round(r)).join(', ')}); log line: ${Math.round(quantile(logLinesA, 0.5))}`,
        '',
        '',
        '',
      ]),
    );
  console.log(
    row([
      `${s.counts.assigned} held`,
      Math.round(restartMs),
      restartCalls.length ? restartCalls.join(' ') : 0,
      s2.counts.assigned,
      afterRestart,
    ]),
  );
}
