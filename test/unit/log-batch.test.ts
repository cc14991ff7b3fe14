/**
 * ipamd's log file writes (ipamd/observability/log-batch.ts, ipamd/log.ts): JSON lines reach
 * the rotating file stream in batches, not one write per line, with every line kept and in
 * order, across rotation, and through a flush right before the stream is ended (shutdown).
 * Real files: rotating-file-stream on a temp dir; the only wrapper counts the writes it is
 * handed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { createLogger } from '../../ipamd/log.js';
import { LineBatcher } from '../../ipamd/observability/log-batch.js';
import { closeLog, openRotatingLog } from '../../ipamd/observability/log-files.js';
import type { RotatingFileStream } from 'rotating-file-stream';

/** A rotating log in a temp dir, and a count of the writes handed to it. */
async function rotatingLog(maxSize = '10M', maxFiles = 100) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'log-batch-'));
  const file = path.join(dir, 'ipamd.log');
  const stream = openRotatingLog(file, { maxSize, maxFiles }, (e) => assert.fail(e));
  let writes = 0;
  const origWrite = stream.write.bind(stream) as RotatingFileStream['write'];
  stream.write = ((...a: Parameters<RotatingFileStream['write']>) => {
    writes++;
    return origWrite(...a);
  }) as RotatingFileStream['write'];
  return {
    dir,
    file,
    stream,
    writes: () => writes,
    /** Every line of the live file and the rotated ones, oldest file first. */
    async lines(): Promise<string[]> {
      const names = (await readdir(dir)).filter((n) => n !== 'ipamd.log');
      // rotating-file-stream's classical mode: ipamd.log.1.gz is the newest rotated file.
      names.sort((a, b) => Number(b.split('.')[2]) - Number(a.split('.')[2]));
      let text = '';
      for (const n of names) text += gunzipSync(await readFile(path.join(dir, n))).toString();
      text += await readFile(file, 'utf8').catch(() => '');
      return text.split('\n').filter(Boolean);
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

const turn = () => new Promise((r) => setImmediate(r));

test('lines written in one turn reach the file as one write, in order', async (t) => {
  const log = await rotatingLog();
  t.after(log.cleanup);
  const b = new LineBatcher(log.stream);
  for (let i = 0; i < 2000; i++) b.write(`line ${i}\n`);
  assert.equal(log.writes(), 0, 'nothing is written before the turn ends');
  await turn();
  assert.equal(log.writes(), 1);
  await closeLog(log.stream);
  assert.deepEqual(
    await log.lines(),
    Array.from({ length: 2000 }, (_, i) => `line ${i}`),
  );
});

test('lines written while a batch is in flight go in the next batch; none lost, order kept', async (t) => {
  const log = await rotatingLog('4K', 100);
  t.after(log.cleanup);
  const b = new LineBatcher(log.stream);
  let n = 0;
  for (let turnNo = 0; turnNo < 200; turnNo++) {
    for (let i = 0; i < 5; i++) b.write(`{"n":${n++},"pad":"${'x'.repeat(40)}"}\n`);
    await turn();
  }
  await new Promise<void>((resolve) => b.flush(() => resolve()));
  await closeLog(log.stream);
  const lines = await log.lines();
  assert.equal(lines.length, n, 'every line, across the rotated files');
  assert.deepEqual(
    lines.map((l) => (JSON.parse(l) as { n: number }).n),
    Array.from({ length: n }, (_, i) => i),
  );
  assert.ok(log.writes() <= 200, `${log.writes()} writes for ${n} lines`);
  assert.ok(
    (await readdir(log.dir)).some((f) => f.endsWith('.gz')),
    'the run crossed a rotation',
  );
});

test("ipamd's logger: a burst of lines is a few writes, and a flush before the end loses none", async (t) => {
  const log = await rotatingLog();
  t.after(log.cleanup);
  const logger = createLogger({ level: 'info', format: 'json', stream: log.stream });
  for (let i = 0; i < 1000; i++) logger.info({ containerID: `c${i}` }, 'AddNetwork');
  // As main.ts shuts down: flush the logger, then end the stream at once.
  logger.flush();
  await closeLog(log.stream);
  const lines = (await log.lines()).map((l) => JSON.parse(l) as { containerID: string; msg: string });
  assert.equal(lines.length, 1000);
  assert.deepEqual(
    lines.map((l) => l.containerID),
    Array.from({ length: 1000 }, (_, i) => `c${i}`),
  );
  assert.ok(log.writes() <= 2, `${log.writes()} writes for 1000 lines (one per line before batching)`);
});
