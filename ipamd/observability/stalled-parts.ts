/**
 * Parts of ipamd that cannot make progress and say so (docs/design.md#bounds-on-bad-input),
 * instead of spinning: a part that fails (a log file it cannot open or write, …) backs off,
 * and reports here. Each report is a warn line (the first failure of a streak, then at
 * failures 2, 4, 8, … so a long streak does not flood the log), the gauge
 * `eni_ipam_part_stalled{part}` (1 while stalled), the counter
 * `eni_ipam_part_failures_total{part}`, and an entry of `/v1/status`'s `stalled` list.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from 'pino';

/** One stalled part as `/v1/status` shows it. */
export interface StalledPart {
  /** The part, e.g. `plugin-log /var/log/aws-routed-eni/plugin.log`. */
  part: string;
  /** The last error's message. */
  error: string;
  /** Failures in this streak. */
  failures: number;
  /** When the streak began (ISO 8601, for people). */
  since: string;
  /** Delay before the part tries again (ms), as decided at the last failure. */
  retryInMs: number;
}

/** The book of stalled parts of one ipamd. */
export class StalledParts {
  private readonly parts = new Map<string, StalledPart>();
  private readonly gauge: Gauge<'part'> | undefined;
  private readonly counter: Counter<'part'> | undefined;

  constructor(private readonly o: { log: Logger; registry?: Registry }) {
    if (o.registry) {
      this.gauge = new Gauge({
        name: 'eni_ipam_part_stalled',
        help: 'Parts of ipamd that cannot make progress (1 while stalled; they back off and retry), by part',
        labelNames: ['part'],
        registers: [o.registry],
      });
      this.counter = new Counter({
        name: 'eni_ipam_part_failures_total',
        help: 'Failures of parts of ipamd that back off and retry (log files), by part',
        labelNames: ['part'],
        registers: [o.registry],
      });
    }
  }

  /** Records a failure of `part` (`error`), which retries in `retryInMs` ms. */
  failed(part: string, error: string, retryInMs: number): void {
    const p = this.parts.get(part) ?? { part, error, failures: 0, since: new Date().toISOString(), retryInMs };
    p.failures++;
    p.error = error;
    p.retryInMs = retryInMs;
    this.parts.set(part, p);
    this.gauge?.set({ part }, 1);
    this.counter?.inc({ part });
    if ((p.failures & (p.failures - 1)) === 0)
      this.o.log.warn({ part, err: error, failures: p.failures, retryInMs }, 'part stalled: backing off');
  }

  /** Records that `part` works again (no-op when it was not stalled). */
  recovered(part: string): void {
    const p = this.parts.get(part);
    if (!p) return;
    this.parts.delete(part);
    this.gauge?.set({ part }, 0);
    this.o.log.info({ part, failures: p.failures }, 'part recovered');
  }

  /** The stalled parts now, for `/v1/status`. */
  list(): StalledPart[] {
    return [...this.parts.values()].map((p) => ({ ...p }));
  }
}
