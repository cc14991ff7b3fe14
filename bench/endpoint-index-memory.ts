/**
 * bench: what the cooldown's EndpointSlice index (ipamd/kube/endpoint-index.ts) costs on a
 * node of a large cluster (docs/design.md#cooldown-that-ends-on-evidence): heap held per
 * listed address after `--slices` slices of `--per-slice` endpoints each are listed (fed in
 * pages of 500, as the watch lists them; the objects are dropped after each page, as the
 * index keeps addresses only), and the time one MODIFIED event takes to apply (µs, mean
 * of 1,000, the slice object built outside the timing). Run with `node --expose-gc` so the
 * heap is measured after a full GC. Prints figures, no pass/fail.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { EndpointIndex, type SliceLike } from '../ipamd/kube/endpoint-index.js';
import { machineLine } from './bench-util.js';

/** Slice `i` of `per` endpoints, addresses numbered from `i × per` in 10.0.0.0/8. */
function slice(i: number, per: number): SliceLike {
  const endpoints = Array.from({ length: per }, (_, j) => {
    const n = i * per + j;
    return { addresses: [`10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`] };
  });
  return { metadata: { namespace: `ns${i % 500}`, name: `svc-${i}` }, addressType: 'IPv4', endpoints };
}

function main(): void {
  const { values } = parseArgs({
    options: { slices: { type: 'string', default: '10000' }, 'per-slice': { type: 'string', default: '15' } },
  });
  const slices = Number(values.slices);
  const per = Number(values['per-slice']);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  const before = process.memoryUsage().heapUsed;
  const ix = new EndpointIndex(5_000);
  ix.replaceAll([], 0);
  for (let p = 0; p < slices; p += 500) {
    const page: SliceLike[] = [];
    for (let i = p; i < Math.min(slices, p + 500); i++) page.push(slice(i, per));
    for (const s of page) ix.apply('ADDED', s, 0);
  }
  gc();
  const heap = process.memoryUsage().heapUsed - before;
  const events = Array.from({ length: 1000 }, (_, i) => slice(i % slices, per));
  const t0 = performance.now();
  for (const s of events) ix.apply('MODIFIED', s, 1);
  const us = ((performance.now() - t0) * 1000) / events.length;
  const { addresses } = ix.size();
  console.log(`${machineLine(os.cpus().length)}, load ${os.loadavg()[0]!.toFixed(1)}`);
  console.log(
    `slices ${slices} × ${per} endpoints: ${addresses} addresses, heap ${(heap / 1048576).toFixed(1)} MiB ` +
      `(${Math.round(heap / addresses)} bytes per address), one MODIFIED event ${us.toFixed(1)} µs`,
  );
}

main();
