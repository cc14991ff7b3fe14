/**
 * bench helper: the trace of the native shim's CNI ADD end to end (bench/cni-vs-go.ts part
 * (d)). The shim, run with ENI_IPAM_SHIM_TRACE=1, prints `eni-ipam-trace start=<µs since
 * the epoch at main> connected=<µs> sent=<µs> answered=<µs>` (µs since main,
 * cni-plugin/shim/eni-ipam-shim.c); with bash's `$EPOCHREALTIME` around the exec
 * (timed-exec.ts) that gives the shim's stages. ipamd's exec server records each ADD's
 * marks (`cni.add.<mark>`, ms since it accepted the connection) in its stage trace.
 */
import type { TimedRun } from './timed-exec.js';
import { ms, summarize } from './timed-exec.js';

/** Per shim ADD, ms: bash's exec → shim main, main → connected, → sent, → answer read, → bash sees the exit. */
export interface ShimTrace {
  start: number[];
  connect: number[];
  send: number[];
  roundTrip: number[];
  exit: number[];
}

/** One stage of ipamd's trace (ipamd/service/stage-trace.ts `StageSummary`), ms. */
export type StageSummary = { count: number; p50: number; p90: number };

/** An empty {@link ShimTrace}. */
export const newShimTrace = (): ShimTrace => ({ start: [], connect: [], send: [], roundTrip: [], exit: [] });

/**
 * Adds one traced ADD (`a`, run with ENI_IPAM_SHIM_TRACE=1) to `t`.
 * @throws Error when the shim printed no trace line.
 */
export function recordShimTrace(t: ShimTrace, a: TimedRun): void {
  const m = /eni-ipam-trace start=(\d+) connected=(\d+) sent=(\d+) answered=(\d+)/.exec(a.stderr);
  if (!m) throw new Error(`no trace line from the shim: ${a.stderr}`);
  const [start, connected, sent, answered] = m.slice(1).map(Number) as [number, number, number, number];
  t.start.push((start - a.startUs) / 1000);
  t.connect.push(connected / 1000);
  t.send.push((sent - connected) / 1000);
  t.roundTrip.push((answered - sent) / 1000);
  t.exit.push((a.endUs - start - answered) / 1000);
}

/** ADD marks of the exec server, in the order an ADD reaches them (ms since accept). */
const ADD_MARKS: Array<[string, string]> = [
  ['decoded', 'request read and decoded'],
  ['checked', 'netns identity checks (stat)'],
  ['parsed', 'config parsed and validated, handler called'],
  ['netns-checked', 'pod netns checked (stat)'],
  ['ip-started', 'both `ip -batch` processes asked of the spawn helper'],
  ['ip-ready', 'node-side `ip` ran its first line (process started)'],
  ['veth-up', 'veth pair created, host end up (ip batch: that line; netlink helper: all of stage 1)'],
  ['pod-routes-sent', 'pod-side lines that need no IP written'],
  ['ipamd-replied', "ipamd's AddNetwork answered (durable)"],
  ['host-exited', 'node side: host route + rules added (helper answered / ip batch exited)'],
  ['pod-exited', 'pod side: address added (helper answered / ip batch exited)'],
  ['finished', 'result built and serialised'],
  ['answered', 'answer handed to the socket'],
];

/**
 * Prints the trace of the shim's ADDs as a markdown table: the shim's stages (`t`), then
 * ipamd's marks (`tr`, its `GET /v1/stage-trace`; each row the time since the previous
 * mark's median), then the spawn helper and AddNetwork figures. `shimAdd`, `goAdd`: the
 * same runs' ADD wall times, ms.
 */
export function printShimTrace(
  t: ShimTrace,
  tr: Record<string, StageSummary>,
  shimAdd: number[],
  goAdd: number[],
): void {
  const med = (xs: number[]) => summarize(xs).median;
  const rt = med(t.roundTrip);
  console.log('');
  console.log(
    `Where the shim's ADD goes (medians over ${t.start.length} ADDs, ms; ipamd's marks are ms since its accept, medians of its last ${tr['cni.add.answered']?.count ?? 0} ADDs incl. warm-up):`,
  );
  console.log('');
  console.log('| stage | median ms | at (since accept) |');
  console.log('|---|---|---|');
  console.log(`| shim: exec by bash → shim's main (fork + exec of the static shim) | ${ms(med(t.start))} | |`);
  console.log(`| shim: main → connected (stdin read, config scan, connect) | ${ms(med(t.connect))} | |`);
  console.log(`| shim: request written | ${ms(med(t.send))} | |`);
  console.log(`| shim: request written → whole answer read (exec socket round trip, ipamd below) | ${ms(rt)} | |`);
  let prev = 0;
  for (const [mark, what] of ADD_MARKS) {
    const s = tr[`cni.add.${mark}`];
    if (!s) continue;
    console.log(`| ipamd: ${what} | ${ms(Math.max(0, s.p50 - prev))} | ${ms(s.p50)} |`);
    if (mark !== 'ipamd-replied' || s.p50 > prev) prev = s.p50;
  }
  console.log(`| round trip − ipamd's accept → answered (socket, wake-ups) | ${ms(rt - prev)} | |`);
  console.log(`| shim: answer read → bash sees the exit (output, exit, wait) | ${ms(med(t.exit))} | |`);
  console.log(`| **shim ADD wall (same runs)** | **${ms(med(shimAdd))}** | |`);
  const sc = tr['cni.spawn.call'];
  const sr = tr['cni.spawn.relay'];
  const ah = tr['add.handler'];
  console.log('');
  console.log(
    `${sc && sr ? `Spawn helper: its fork and exec took ${ms(sc.p50)} ms per child (p90 ${ms(sc.p90)}), frames to and from it ${ms(sr.p50)} ms.` : 'Spawn helper: no child started (ADD and DEL went through the netlink helper).'} ipamd's AddNetwork handler ${ms(ah?.p50 ?? NaN)} ms (durable wait ${ms(tr['add.durable']?.p50 ?? NaN)}). Go ptp + host-local ADD ${ms(med(goAdd))} ms.`,
  );
}
