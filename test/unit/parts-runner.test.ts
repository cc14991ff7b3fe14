/**
 * The parts runner (ipamd/lifecycle/runner.ts): dependency order, reverse stop, a start
 * that fails at each step stops exactly the parts that had started, a stop that throws
 * does not keep the others from stopping, cycles and missing needs refused by name.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { onceOnly, partOf, startOrder, startParts, type AnyPart } from '../../ipamd/lifecycle/runner.js';

interface R {
  a: number;
  b: number;
  c: number;
  d: number;
}
const part = partOf<R>();

/** A log that keeps its lines. */
function memLog() {
  const lines: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  return { lines, error: (obj: object, msg: string) => lines.push({ obj: obj as Record<string, unknown>, msg }) };
}

/** Four parts (d needs b and c, b and c need a) recording their starts and stops in `events`. */
function diamond(events: string[], o: { throwAt?: keyof R; stopThrows?: keyof R } = {}): AnyPart<R>[] {
  const mk = (name: keyof R, needs: (keyof R)[], value: (got: Partial<R>) => number) =>
    part({
      name,
      needs,
      start(got: Partial<R>) {
        if (o.throwAt === name) throw new Error(`${name} broke`);
        events.push(`start ${name}`);
        return {
          value: value(got),
          stop: () => {
            events.push(`stop ${name}`);
            if (o.stopThrows === name) throw new Error(`${name} would not stop`);
          },
        };
      },
    });
  // Declared out of order on purpose: the runner must order them.
  return [
    mk('d', ['b', 'c'], (g) => g.b! + g.c!),
    mk('b', ['a'], (g) => g.a! + 1),
    mk('a', [], () => 1),
    mk('c', ['a'], (g) => g.a! * 10),
  ];
}

const opts = (log = memLog()) => ({ log, failedStartStop: { graceMs: 0 } });

test('parts start after what they need, get what it provided, and stop in reverse', async () => {
  const events: string[] = [];
  const running = await startParts(diamond(events), opts());
  assert.deepEqual(running.started, ['a', 'b', 'c', 'd']);
  assert.equal(running.get('d'), 12, 'd got b (2) and c (10)');
  await running.stop({ graceMs: 5 });
  assert.deepEqual(events, ['start a', 'start b', 'start c', 'start d', 'stop d', 'stop c', 'stop b', 'stop a']);
  await running.stop({ graceMs: 5 });
  assert.equal(events.length, 8, 'a second stop stops nothing again');
});

test('a start that fails at each step stops exactly the parts that had started, in reverse, and is named once', async () => {
  for (const [at, before] of [
    ['a', []],
    ['b', ['a']],
    ['c', ['a', 'b']],
    ['d', ['a', 'b', 'c']],
  ] as const) {
    const events: string[] = [];
    const log = memLog();
    await assert.rejects(startParts(diamond(events, { throwAt: at }), opts(log)), { message: `${at} broke` });
    assert.deepEqual(events, [...before.map((p) => `start ${p}`), ...[...before].reverse().map((p) => `stop ${p}`)]);
    assert.deepEqual(log.lines, [{ obj: { part: at, err: `${at} broke` }, msg: 'ipamd part failed to start' }]);
  }
});

test('failAt makes that part fail as its start would, without running it', async () => {
  const events: string[] = [];
  const log = memLog();
  await assert.rejects(startParts(diamond(events), { ...opts(log), failAt: 'c' }), /part c failed on purpose/);
  assert.deepEqual(events, ['start a', 'start b', 'stop b', 'stop a']);
  assert.equal(log.lines.length, 1);
});

test('a stop that throws is named, the others still stop, and the stop rejects with its error', async () => {
  const events: string[] = [];
  const log = memLog();
  const running = await startParts(diamond(events, { stopThrows: 'c' }), opts(log));
  await assert.rejects(running.stop({ graceMs: 0 }), { message: 'c would not stop' });
  assert.deepEqual(events.slice(4), ['stop d', 'stop c', 'stop b', 'stop a']);
  assert.deepEqual(log.lines, [{ obj: { part: 'c', err: 'c would not stop' }, msg: 'ipamd part failed to stop' }]);
});

test('a failed start whose clean-up stop throws still throws the start error', async () => {
  const events: string[] = [];
  const log = memLog();
  await assert.rejects(startParts(diamond(events, { throwAt: 'd', stopThrows: 'b' }), opts(log)), {
    message: 'd broke',
  });
  assert.deepEqual(events.slice(3), ['stop c', 'stop b', 'stop a']);
  assert.deepEqual(
    log.lines.map((l) => [l.obj.part, l.msg]),
    [
      ['d', 'ipamd part failed to start'],
      ['b', 'ipamd part failed to stop'],
    ],
  );
});

test('the stop gets the options it was given; a failed start stops with failedStartStop', async () => {
  const seen: number[] = [];
  const p = part({ name: 'a', needs: [], start: () => ({ value: 1, stop: ({ graceMs }) => void seen.push(graceMs) }) });
  const q = part({ name: 'b', needs: ['a'], start: () => Promise.reject(new Error('no')) });
  await (await startParts([p], opts())).stop({ graceMs: 7 });
  await assert.rejects(startParts([p, q], { log: memLog(), failedStartStop: { graceMs: 3 } }));
  assert.deepEqual(seen, [7, 3]);
});

test('a cycle, a missing need and a duplicate are refused by name before anything starts', () => {
  const p = (name: keyof R, needs: (keyof R)[]) => part({ name, needs, start: () => ({ value: 0 }) });
  assert.throws(() => startOrder([p('a', []), p('b', ['c']), p('c', ['b'])]), {
    message: 'parts need each other in a cycle: b, c',
  });
  assert.throws(() => startOrder([p('a', ['d'])]), { message: 'part a needs d, which no part provides' });
  assert.throws(() => startOrder([p('a', []), p('a', [])]), { message: 'part a is declared twice' });
  assert.deepEqual(
    startOrder([p('c', []), p('b', []), p('a', ['b'])]).map((x) => x.name),
    ['c', 'b', 'a'],
    'the declared order where the needs allow',
  );
});

test('get of a part that is not running throws; onceOnly runs once', async () => {
  const running = await startParts([part({ name: 'a', needs: [], start: () => ({ value: 1 }) })], opts());
  assert.throws(() => running.get('b'), /part b is not running/);
  let n = 0;
  const close = onceOnly(async (_ms: number) => void n++);
  await Promise.all([close(1), close(2)]);
  assert.equal(n, 1);
});
