/** The demo's printed output: the pod table and the pool lines. */
import type { SimCloud } from '../sim/index.js';
import type { Pod, Probe } from './pods.js';

/** A line printer (the demo's stdout). */
export type Print = (line: string) => void;

const probeCell = (who: string, r: Probe | undefined): string =>
  r === undefined ? '-' : 'saw' in r ? `ok (${who} saw ${r.saw})` : `FAILED: ${r.error}`;

/**
 * The per-pod table: netns, IP, ENI, device, ADD time (ms), and the TCP probes to the node
 * (`node`: `host:port`) and to the VPC peer (`peer`: `host:port`) with the source address each saw.
 */
export function printPodTable(print: Print, node: string, peer: string, pods: Pod[]): void {
  printTable(
    print,
    ['pod', 'netns', 'IP', 'ENI', 'device', 'ADD ms', `TCP to node ${node}`, `TCP to VPC peer ${peer}`],
    pods.map((p) => [
      p.name,
      p.ns.path,
      p.ip ?? '-',
      p.eni ?? '-',
      String(p.device ?? '-'),
      p.addMs === undefined ? '-' : p.addMs.toFixed(1),
      probeCell('node', p.node),
      probeCell('VPC', p.vpc),
    ]),
  );
}

/** The part of ipamd's `GET /v1/status` that printPool reads. */
export interface PoolStatus {
  counts: { total: number; assigned: number; available: number; cooling: number; enis: number };
}

/** One line: the pool's counts and the EC2 calls the simulated cloud logged so far, by action. */
export function printPool(print: Print, title: string, s: PoolStatus, sim: SimCloud): void {
  const byAction = new Map<string, number>();
  for (const c of sim.calls) byAction.set(c.action, (byAction.get(c.action) ?? 0) + 1);
  const calls = [...byAction].map(([a, n]) => `${a}=${n}`).join(' ');
  print(
    `${title}: total=${s.counts.total} assigned=${s.counts.assigned} available=${s.counts.available} cooling=${s.counts.cooling} ENIs=${s.counts.enis} | EC2 calls: ${sim.calls.length} (${calls})`,
  );
}

function printTable(print: Print, head: string[], rows: string[][]): void {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(w[i]!))
      .join('  ')
      .trimEnd();
  print(line(head));
  print(w.map((n) => '-'.repeat(n)).join('  '));
  for (const r of rows) print(line(r));
}
