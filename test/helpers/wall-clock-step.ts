/**
 * Preloaded into a process under test (`NODE_OPTIONS=--import=<this file's URL>`) to step
 * its wall clock without touching the machine's: `Date.now()` and `new Date()` are shifted
 * by the number of ms in the file named by ENI_IPAM_TEST_WALL_OFFSET_FILE (re-read whenever
 * its mtime changes, so a write takes effect on the next call). `performance.timeOrigin`
 * (the wall clock when the process started) is shifted by the offset in force at start,
 * as a process started after a real step sees it; later steps leave it, as they leave the
 * monotonic clocks (`performance.now`, `process.hrtime`). Test-only: nothing in ipamd imports it.
 */
import { readFileSync, statSync } from 'node:fs';

const file = process.env.ENI_IPAM_TEST_WALL_OFFSET_FILE;
if (file) {
  const RealDate = Date;
  let offset = 0;
  let seen = -1;
  const current = (): number => {
    try {
      const m = statSync(file).mtimeMs;
      if (m !== seen) {
        seen = m;
        offset = Number(readFileSync(file, 'utf8').trim()) || 0;
      }
    } catch {
      /* no file: no offset change */
    }
    return offset;
  };
  class SteppedDate extends RealDate {
    constructor(...args: ConstructorParameters<DateConstructor> | []) {
      if (args.length === 0) super(RealDate.now() + current());
      else super(...(args as [number]));
    }
    static override now(): number {
      return RealDate.now() + current();
    }
  }
  globalThis.Date = SteppedDate as DateConstructor;
  const atStart = current();
  if (atStart !== 0)
    Object.defineProperty(performance, 'timeOrigin', {
      value: performance.timeOrigin + atStart,
      configurable: true,
      enumerable: true,
    });
}
