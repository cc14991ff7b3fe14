/**
 * Process warnings into ipamd's structured log (observability/process-warnings.ts): a real
 * `process.emitWarning` reaches a real pino logger as one warn line, and stops doing so
 * once the returned function is called.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { logProcessWarnings } from '../../ipamd/observability/process-warnings.js';

function capture(): { log: pino.Logger; lines: () => Array<Record<string, unknown>> } {
  const out: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString());
      cb();
    },
  });
  const log = pino({ level: 'info' }, stream);
  return {
    log,
    lines: () =>
      out
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
  };
}

/** Resolves once the process has emitted a warning named `name` (emitWarning delivers on a later tick). */
function nextWarning(name: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (w: Error) => {
      if (w.name !== name) return;
      process.off('warning', on);
      resolve();
    };
    process.on('warning', on);
  });
}

test('a process warning reaches the structured log at warn, with its name, code and detail', async () => {
  const { log, lines } = capture();
  const stop = logProcessWarnings(log);
  try {
    const seen = nextWarning('EniIpamTestWarning');
    process.emitWarning('first line\nsecond line', { type: 'EniIpamTestWarning', code: 'ENI_TEST', detail: 'why' });
    await seen;
  } finally {
    stop();
  }
  const got = lines().filter((l) => l.warning === 'EniIpamTestWarning');
  assert.equal(got.length, 1, JSON.stringify(lines()));
  assert.equal(got[0]!.level, 40); // pino's warn
  assert.equal(got[0]!.msg, 'first line\nsecond line');
  assert.equal(got[0]!.code, 'ENI_TEST');
  assert.equal(got[0]!.detail, 'why');
});

test('after the returned stop, warnings are no longer logged', async () => {
  const { log, lines } = capture();
  logProcessWarnings(log)();
  const seen = nextWarning('EniIpamLaterWarning');
  process.emitWarning('not logged', 'EniIpamLaterWarning');
  await seen;
  assert.equal(lines().length, 0);
});
