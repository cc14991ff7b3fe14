/**
 * The load both RPC benches offer (bench/ipamd-rpc-throughput, bench/rpc-transport-floor):
 * N clients looping AddNetwork → DelNetwork, closed loop or paced at a fixed rate.
 */
import { sleep } from './bench-util.js';

/** One row's latencies (ms) and failed pairs. */
export interface Samples {
  pairMs: number[];
  addMs: number[];
  delMs: number[];
  errors: number;
}

/**
 * Offers `level`'s load for `seconds`: `conc` workers, each looping ADD(new id) → DEL(same
 * id), closed loop or paced. Ids are `<prefix>w<worker>i<n>`, unique per row as sandbox ids
 * are: a row reusing an earlier row's ids would ADD containers ipamd remembers as released,
 * and each such ADD rewrites the checkpoint's whole window of them.
 */
export async function offerLoad(
  c: { add(id: string): Promise<unknown>; del(id: string): Promise<unknown> },
  level: { conc: number; rate?: number },
  seconds: number,
  prefix: string,
): Promise<Samples> {
  const { conc, rate } = level;
  const s: Samples = { pairMs: [], addMs: [], delMs: [], errors: 0 };
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: conc }, async (_, w) => {
      for (let i = 0; ; i++) {
        // Paced: pair i of worker w is due at t0 + (i·conc + w) / rate; its latency counts from then
        // (a late start is the system's delay too, not left out). Closed loop: from when it starts.
        const due = rate ? t0 + ((i * conc + w) * 1000) / rate : performance.now();
        if (due >= end) break;
        if (due > performance.now()) await sleep(due - performance.now());
        const id = `${prefix}w${w}i${i}`;
        const a = performance.now();
        try {
          await c.add(id);
          const b = performance.now();
          await c.del(id);
          const d = performance.now();
          s.addMs.push(b - Math.min(a, due));
          s.delMs.push(d - b);
          s.pairMs.push(d - Math.min(a, due));
        } catch {
          s.errors++;
        }
      }
    }),
  );
  return s;
}
