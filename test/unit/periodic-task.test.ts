/**
 * The periodic-task helper behind every background loop of ipamd, in virtual time
 * (node:test mock timers): the period counts from the end of a run, runs never overlap,
 * an extra run replaces the pending one, errors do not stop the loop, stop() waits.
 */
import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { PeriodicTask } from '../../ipamd/controller/periodic-task.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval'] }));
afterEach(() => mock.timers.reset());

/** Lets the promise jobs queued by a fired timer run. */
const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

test('start(0) runs at once, then once per period after each run ends', async () => {
  let runs = 0;
  const t = new PeriodicTask({
    intervalMs: 1000,
    run: () => {
      runs++;
    },
  });
  t.start(0);
  assert.equal(runs, 1, 'started synchronously');
  await settle();
  mock.timers.tick(999);
  await settle();
  assert.equal(runs, 1);
  mock.timers.tick(1);
  await settle();
  assert.equal(runs, 2);
  mock.timers.tick(1000);
  await settle();
  assert.equal(runs, 3);
  await t.stop();
  mock.timers.tick(5000);
  await settle();
  assert.equal(runs, 3, 'nothing after stop');
});

test('start() waits one period; start(ms) waits ms; a second start does nothing', async () => {
  let runs = 0;
  const t = new PeriodicTask({
    intervalMs: 1000,
    run: () => {
      runs++;
    },
  });
  t.start(300);
  t.start(0);
  assert.equal(runs, 0);
  mock.timers.tick(300);
  await settle();
  assert.equal(runs, 1);
  await t.stop();
  const u = new PeriodicTask({
    intervalMs: 1000,
    run: () => {
      runs++;
    },
  });
  u.start();
  mock.timers.tick(999);
  await settle();
  assert.equal(runs, 1);
  mock.timers.tick(1);
  await settle();
  assert.equal(runs, 2);
  await u.stop();
});

test('runs never overlap: a run asked for while one is in flight joins it', async () => {
  let runs = 0;
  let release!: () => void;
  const t = new PeriodicTask({
    intervalMs: 1000,
    run: () => {
      runs++;
      return new Promise<void>((r) => {
        release = r;
      });
    },
  });
  const a = t.runNow();
  const b = t.runNow();
  assert.equal(a, b);
  assert.equal(runs, 1);
  assert.equal(t.running, true);
  release();
  await a;
  assert.equal(t.running, false);
  const c = t.runNow();
  assert.notEqual(c, a, 'a new run once the first ended');
  assert.equal(runs, 2);
  release();
  await c;
});

test('a slow run delays the next periodic run (period from the end of the run)', async () => {
  let runs = 0;
  let release!: () => void;
  const t = new PeriodicTask({
    intervalMs: 1000,
    run: () => {
      runs++;
      return new Promise<void>((r) => {
        release = r;
      });
    },
  });
  t.start(0);
  mock.timers.tick(5000);
  await settle();
  assert.equal(runs, 1, 'no run while the first is in flight');
  release();
  await settle();
  mock.timers.tick(999);
  await settle();
  assert.equal(runs, 1);
  mock.timers.tick(1);
  await settle();
  assert.equal(runs, 2);
  release();
  await t.stop();
});

test('runAfter schedules one extra run, replacing a pending one; cancelExtra drops it', async () => {
  let runs = 0;
  const t = new PeriodicTask({
    intervalMs: 60_000,
    run: () => {
      runs++;
    },
  });
  t.start();
  t.runAfter(500);
  t.runAfter(200);
  mock.timers.tick(200);
  await settle();
  assert.equal(runs, 1);
  mock.timers.tick(300);
  await settle();
  assert.equal(runs, 1, 'the 500 ms one was replaced');
  t.runAfter(100);
  t.cancelExtra();
  mock.timers.tick(100);
  await settle();
  assert.equal(runs, 1);
  await t.stop();
  t.runAfter(10);
  mock.timers.tick(10);
  await settle();
  assert.equal(runs, 1, 'ignored once stopped');
});

test('a failing run goes to onError and the loop goes on', async () => {
  const errors: string[] = [];
  let runs = 0;
  const t = new PeriodicTask({
    intervalMs: 100,
    run: async () => {
      runs++;
      throw new Error(`boom ${runs}`);
    },
    onError: (e) => errors.push(e.message),
  });
  t.start(0);
  await settle();
  mock.timers.tick(100);
  await settle();
  assert.deepEqual(errors, ['boom 1', 'boom 2']);
  await t.stop();
});

test('stop() waits for the run in flight', async () => {
  let done = false;
  let release!: () => void;
  const t = new PeriodicTask({
    intervalMs: 100,
    run: async () => {
      await new Promise<void>((r) => {
        release = r;
      });
      done = true;
    },
  });
  t.start(0);
  const stopping = t.stop();
  let stopped = false;
  void stopping.then(() => {
    stopped = true;
  });
  await settle();
  assert.equal(stopped, false);
  release();
  await stopping;
  assert.equal(done, true);
});

test('an interval that is not > 0 is refused', () => {
  assert.throws(() => new PeriodicTask({ intervalMs: 0, run: () => undefined }), /intervalMs must be > 0/);
});
