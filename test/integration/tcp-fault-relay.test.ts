/**
 * The fault relay (test/helpers/tcp-fault-relay.ts) must never keep a test process from
 * exiting. Each scenario runs in a child process (real sockets on 127.0.0.1) that has to
 * end by itself once its work is done: a socket reset while its shutdown is in progress
 * used to leak its handle, and Node then spun at 100 % CPU in its exit cleanup forever
 * (the kube-source test process, about 1 run in 10).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { waitFor } from '../../kit/wait.js';

const RELAY = new URL('../helpers/tcp-fault-relay.js', import.meta.url).href;

/** Runs `body` (an ES module's top level, with `net` and `relay` imported) in a child; its exit code and output. */
async function runChild(
  t: { after(fn: () => void): void },
  body: string,
): Promise<{ code: number | null; out: string }> {
  const src = `import net from 'node:net';\nimport * as relay from ${JSON.stringify(RELAY)};\n${body}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', src], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => void child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  let code: number | null | undefined;
  child.on('exit', (c) => (code = c));
  await waitFor('the child process to exit by itself', () => code !== undefined, 15_000, 50).catch((e: Error) => {
    throw new Error(`${e.message}\n--- child output ---\n${out}`);
  });
  return { code: code!, out };
}

test('resetSocket on a socket whose shutdown is in progress: no leaked handle, the process exits', async (t) => {
  const { code, out } = await runChild(
    t,
    `
const srv = net.createServer((s) => {
  s.on('error', (e) => console.log('server socket error', e.code));
  s.end(); // the shutdown is in progress until the next turn of the loop
  relay.resetSocket(s);
});
srv.listen(0, '127.0.0.1', () => {
  const c = net.connect(srv.address().port, '127.0.0.1');
  c.on('error', (e) => console.log('client error', e.code));
  c.on('close', () => { srv.close(); console.log('client closed'); });
  c.resume();
});
`,
  );
  assert.equal(code, 0, out);
  assert.match(out, /client closed/);
  assert.doesNotMatch(out, /EINVAL/, 'no refused reset');
});

test('resetSocket on an open socket resets it: the peer sees ECONNRESET', async (t) => {
  const { code, out } = await runChild(
    t,
    `
const srv = net.createServer((s) => {
  s.on('error', () => undefined);
  setTimeout(() => relay.resetSocket(s), 50);
});
srv.listen(0, '127.0.0.1', () => {
  const c = net.connect(srv.address().port, '127.0.0.1');
  c.on('error', (e) => console.log('client error', e.code));
  c.on('close', () => srv.close());
});
`,
  );
  assert.equal(code, 0, out);
  assert.match(out, /client error ECONNRESET/);
});

test('a relay cut and closed while its clients half-close: every run of the process exits', async (t) => {
  // Connections that end (FIN both ways through the relay) while cut() and close() reset
  // whatever is open: the relay's sockets are in every state a reset can meet.
  const { code, out } = await runChild(
    t,
    `
const target = net.createServer((s) => { s.on('error', () => undefined); s.on('data', () => s.end('bye')); });
await new Promise((r) => target.listen(0, '127.0.0.1', r));
const r = await relay.startFaultRelay({ host: '127.0.0.1', port: target.address().port });
let closed = 0;
for (let round = 0; round < 20; round++) {
  const done = [];
  for (let i = 0; i < 10; i++) {
    const c = net.connect(r.port, '127.0.0.1');
    c.on('error', () => undefined);
    c.on('data', () => undefined);
    done.push(new Promise((res) => c.on('close', () => { closed++; res(); })));
    c.on('connect', () => c.end('hi'));
  }
  await new Promise((res) => setTimeout(res, round % 5)); // varies where the cut lands (0-4 ms); nothing is waited for
  r.cut();
  await Promise.all(done);
}
await r.close();
target.close();
console.log('closed', closed);
`,
  );
  assert.equal(code, 0, out);
  assert.match(out, /closed 200/);
});
