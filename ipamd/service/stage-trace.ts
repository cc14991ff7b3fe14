/**
 * Always-on per-stage latency trace of the request path (AddNetwork, DelNetwork) and of
 * the checkpoint writes that make them durable: each stage keeps its last
 * {@link STAGE_TRACE_SAMPLES} durations (ms, a ring buffer), and {@link StageTrace.summary}
 * gives count / p50 / p90 / p99 / max over them. Recording is two `performance.now()`
 * calls and a typed-array store (well under 1 µs), so it stays on in production; ipamd
 * serves the summary on its introspection endpoint (`GET /v1/stage-trace`) and the
 * bench `bench/ipamd-rpc-throughput` prints it.
 *
 * Stages: per request `add.decode` (protobuf request), `add.datastore` (assign in memory),
 * `add.durable` (waiting for the checkpoint write holding the change: group commit),
 * `add.encode` (protobuf reply), `add.handler` (the whole handler: datastore → reply);
 * likewise `del.*`; per checkpoint write the writer's stages (checkpoint/writer.ts),
 * prefixed `checkpoint.`.
 */

/** Samples kept per stage. */
export const STAGE_TRACE_SAMPLES = 4096;

/** Quantiles of one stage over its kept samples; all in ms. */
export interface StageSummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

class Ring {
  readonly buf = new Float64Array(STAGE_TRACE_SAMPLES);
  n = 0;
  total = 0;
}

/** See the module docstring. */
export class StageTrace {
  private readonly stages = new Map<string, Ring>();

  /** Records one duration `ms` of `stage`. */
  record(stage: string, ms: number): void {
    let r = this.stages.get(stage);
    if (!r) this.stages.set(stage, (r = new Ring()));
    r.buf[r.n % STAGE_TRACE_SAMPLES] = ms;
    r.n++;
    r.total++;
  }

  /** Runs `fn`, records its duration under `stage`, returns its result (a throw is recorded too). */
  time<T>(stage: string, fn: () => T): T {
    const t0 = performance.now();
    try {
      return fn();
    } finally {
      this.record(stage, performance.now() - t0);
    }
  }

  /** Per stage (sorted by name): `count` = samples since start or {@link reset}, quantiles over the kept ones (ms). */
  summary(): Record<string, StageSummary> {
    const out: Record<string, StageSummary> = {};
    for (const name of [...this.stages.keys()].sort()) {
      const r = this.stages.get(name)!;
      const xs = r.buf.slice(0, Math.min(r.n, STAGE_TRACE_SAMPLES)).sort();
      const q = (p: number) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]! : 0);
      out[name] = { count: r.total, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: xs.length ? xs[xs.length - 1]! : 0 };
    }
    return out;
  }

  /** Forgets every sample (a bench calls this between runs). */
  reset(): void {
    this.stages.clear();
  }
}

/** The process's trace (one ipamd per process; in-process test daemons share it). */
export const stageTrace = new StageTrace();
