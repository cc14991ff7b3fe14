/**
 * A plugin log file ipamd cannot open (a conflist naming one under /proc) backs off and is
 * reported as a stalled part, instead of Node's recursive mkdir spinning for ever
 * (observability/log-files.ts, observability/stalled-parts.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { PluginLogFiles } from '../../ipamd/observability/log-files.js';
import { StalledParts } from '../../ipamd/observability/stalled-parts.js';

test('a plugin log under /proc fails at once, backs off, and is reported (log, metric, status list)', async () => {
  const registry = new Registry();
  const lines: string[] = [];
  const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(l) });
  const stalled = new StalledParts({ log, registry });
  const files = new PluginLogFiles({ maxSize: '1M', maxFiles: 1, stalled });
  const file = '/proc/eni-ipam-x/plugin.log';
  const t0 = performance.now();
  for (let i = 0; i < 1000; i++) assert.equal(files.append(file, '{"verb":"ADD"}\n'), true);
  assert.ok(performance.now() - t0 < 1000, 'no spinning');
  const [part] = stalled.list();
  assert.equal(part?.part, `plugin-log ${file}`);
  assert.equal(part?.failures, 1, 'one try: the other lines were dropped during the backoff');
  assert.ok(part!.retryInMs >= 500 && part!.retryInMs <= 1000, `${part!.retryInMs}`);
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /part stalled: backing off/);
  const text = await registry.metrics();
  assert.match(text, /eni_ipam_part_stalled\{part="plugin-log \/proc\/eni-ipam-x\/plugin.log"\} 1/);
  assert.match(text, /eni_ipam_part_failures_total\{part="plugin-log \/proc\/eni-ipam-x\/plugin.log"\} 1/);
  await files.close();
});

test('a good plugin log path is written, and a recovered part leaves the list', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-plog-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const stalled = new StalledParts({ log: pino({ level: 'silent' }) });
  const files = new PluginLogFiles({ maxSize: '1M', maxFiles: 1, stalled });
  const file = path.join(dir, 'a', 'b', 'plugin.log');
  files.append(file, 'one\n');
  await files.close();
  assert.equal(await readFile(file, 'utf8'), 'one\n');
  stalled.failed('x', 'boom', 10);
  stalled.recovered('x');
  assert.deepEqual(stalled.list(), []);
});
