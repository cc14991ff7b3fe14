/**
 * Log lines to a file stream in batches: rotating-file-stream (log-files.ts) writes every
 * chunk it is given as a write of its own, one after the other (its `_writev` loops over
 * the chunks), so one log line per AddNetwork/DelNetwork cost ipamd one trip to libuv's
 * thread pool per line (the hand-offs, `writeBuffer`, took 7.6 % of its main thread at
 * 1,500 pairs/s logging to a file, 3.1 % logging to stdout;
 * docs/design.md#16-footprint-and-latency). {@link LineBatcher} joins the lines written
 * while its last batch is being written, or within one event-loop turn, into one chunk.
 */

/** The part of a Writable a {@link LineBatcher} writes to (rotating-file-stream's stream). */
export interface BatchTarget {
  write(chunk: string, cb: (err?: Error | null) => void): boolean;
}

/**
 * A destination for pino (`write(line)`, `flush(cb)`) that hands `target` one chunk per
 * batch: the lines written since the last batch, sent once the event loop's turn is over
 * and the target's previous batch has been written (so at most one batch of ours is in
 * flight, and batches grow with the load instead of the writes). Lines keep their order.
 * Nothing is dropped: like the stream it writes to, it holds what the disk has not taken
 * yet in memory. {@link flush} hands over what is held at once (shutdown: before the
 * target is ended).
 */
export class LineBatcher {
  private parts: string[] = [];
  private scheduled = false;
  private inFlight = false;

  constructor(private readonly target: BatchTarget) {}

  /** Queues `line` (a whole log line, newline included) for the next batch; always true. */
  write(line: string): boolean {
    this.parts.push(line);
    if (!this.scheduled && !this.inFlight) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        if (!this.inFlight) this.send();
      });
    }
    return true;
  }

  /** Hands everything held to the target now; `cb` once the target has written it (or at once if nothing was held). */
  flush(cb?: (err?: Error | null) => void): void {
    if (!this.parts.length) {
      cb?.();
      return;
    }
    this.send(cb);
  }

  /** Writes the held lines as one chunk; when it is written, the lines queued meanwhile go next. */
  private send(cb?: (err?: Error | null) => void): void {
    if (!this.parts.length) return;
    const chunk = this.parts.length === 1 ? this.parts[0]! : this.parts.join('');
    this.parts = [];
    this.inFlight = true;
    this.target.write(chunk, (err) => {
      this.inFlight = false;
      if (this.parts.length && !this.scheduled) this.send();
      cb?.(err);
    });
  }
}
