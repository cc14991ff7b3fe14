/**
 * `npm run demo` (README command one, demo/main.ts) as a user runs it: the real binary in a
 * node namespace of its own plugged into the simulated VPC's data plane (kit/vpc/dataplane.ts),
 * ipamd with host networking on, real pods. Asserts what its table claims: every pod got an
 * address, some of them on a secondary ENI, and both the node and the VPC peer (an address
 * in the VPC outside the node's subnet, across the data plane with EC2's source/destination
 * check) saw each pod's own IP (no SNAT inside the VPC). Then that the demo leaves nothing:
 * no namespace of its prefix and no ipamd, after a full run, after Ctrl-C in the middle of
 * it, and after SIGTERM in `--daemon` mode. Each run uses a namespace prefix of its own.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { waitFor } from '../../kit/wait.js';

const execFileP = promisify(execFile);
const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../demo/main.js');
/** A loaded 2-core machine runs the demo in well under a minute; this is the outer bound. */
const RUN_MS = 240_000;

/** A running demo: its output so far and its exit. */
interface DemoRun {
  out: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(sig: NodeJS.Signals): void;
  /** Ends the demo if it still runs: SIGTERM, SIGKILL after 60 s. Never throws. */
  stop(): Promise<void>;
}

function startDemo(prefix: string, args: string[] = []): DemoRun {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  const child = spawn(process.execPath, [MAIN, '--ns-prefix', prefix, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  // SIGTERM first (the demo removes what it made); SIGKILL and the pipes closed only if it hangs.
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const gone = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(r, 60_000, false))]);
    if (!gone) child.kill('SIGKILL');
    child.stdout.destroy();
    child.stderr.destroy();
  };
  return { out: () => out, exited, kill: (sig) => child.kill(sig), stop };
}

/** Waits for the demo's exit within `ms`. @throws Error with its output when it does not end. */
async function ended(d: DemoRun, ms = RUN_MS): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      d.kill('SIGKILL');
      reject(new Error(`the demo did not end within ${ms} ms:\n${d.out()}`));
    }, ms);
  });
  try {
    return await Promise.race([d.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Named network namespaces whose name starts with `<prefix>-`. */
async function namespacesOf(prefix: string): Promise<string[]> {
  const { stdout } = await execFileP('ip', ['netns', 'list']);
  return stdout
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith(`${prefix}-`));
}

/** The ipamd pid the demo printed (`ipamd pid N serving …`). @throws Error when it printed none. */
function ipamdPid(out: string): number {
  const m = /ipamd pid (\d+) serving/.exec(out);
  if (!m) throw new Error(`no "ipamd pid" line in the demo's output:\n${out}`);
  return Number(m[1]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Asserts the demo left no namespace of `prefix` and no ipamd `pid`. */
async function assertNothingLeft(prefix: string, pid: number | undefined, out: string): Promise<void> {
  assert.deepEqual(await namespacesOf(prefix), [], `namespaces of ${prefix} left:\n${out}`);
  if (pid !== undefined) await waitFor(`ipamd ${pid} gone`, () => !alive(pid), 20_000);
}

/** One row of the demo's pod table: name, IP, device, and the addresses the node and the VPC peer saw. */
interface Row {
  pod: string;
  ip: string;
  device: string;
  nodeSaw: string | undefined;
  vpcSaw: string | undefined;
}

function podRows(out: string): Row[] {
  const rows: Row[] = [];
  for (const line of out.split('\n')) {
    const m = /^(demo-\d+)\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+\s+(.*)$/.exec(line);
    if (!m) continue;
    const saw = (who: string) => new RegExp(`ok \\(${who} saw (\\S+)\\)`).exec(m[5]!)?.[1];
    rows.push({ pod: m[1]!, ip: m[2]!, device: m[4]!, nodeSaw: saw('node'), vpcSaw: saw('VPC') });
  }
  return rows;
}

test('npm run demo: every pod reaches the node and a VPC peer with its own IP, some through a secondary ENI; nothing left', async (t) => {
  const prefix = `eni-dt${process.pid}`;
  const d = startDemo(prefix);
  t.after(async () => {
    await d.stop();
    for (const n of await namespacesOf(prefix)) await execFileP('ip', ['netns', 'delete', n]).catch(() => undefined);
  });
  const { code } = await ended(d);
  const out = d.out();
  assert.equal(code, 0, out);
  const rows = podRows(out);
  assert.equal(rows.length, 12, `12 pods by default:\n${out}`);
  for (const r of rows) {
    assert.match(r.ip, /^10\.0\.0\.\d+$/, `${r.pod} has an address in the node's subnet:\n${out}`);
    assert.equal(r.nodeSaw, r.ip, `the node saw ${r.pod}'s own IP:\n${out}`);
    assert.equal(r.vpcSaw, r.ip, `the VPC peer saw ${r.pod}'s own IP (no SNAT inside the VPC):\n${out}`);
  }
  assert.equal(new Set(rows.map((r) => r.ip)).size, rows.length, `no address given twice:\n${out}`);
  assert.ok(
    rows.some((r) => r.device !== '0'),
    `some pods on a secondary ENI (12 pods > an m5.large's 9 secondary IPs per ENI):\n${out}`,
  );
  assert.match(out, /pool after DEL: total=\d+ assigned=0 /, out);
  assert.match(out, /ipamd stopped on SIGTERM with exit code 0/, out);
  await assertNothingLeft(prefix, ipamdPid(out), out);
});

test('Ctrl-C in the middle of the demo: exit 130, and every namespace and ipamd of it is gone', async (t) => {
  const prefix = `eni-di${process.pid}`;
  const d = startDemo(prefix);
  t.after(async () => {
    await d.stop();
    for (const n of await namespacesOf(prefix)) await execFileP('ip', ['netns', 'delete', n]).catch(() => undefined);
  });
  await waitFor('ipamd serving in the demo', () => /ipamd pid \d+ serving/.test(d.out()), RUN_MS);
  d.kill('SIGINT');
  const { code } = await ended(d);
  const out = d.out();
  assert.equal(code, 130, out);
  assert.match(out, /interrupted: removing everything the demo made/, out);
  await assertNothingLeft(prefix, ipamdPid(out), out);
});

test('npm run demo -- --daemon: ipamd serves on the data plane until SIGTERM, then nothing is left', async (t) => {
  const prefix = `eni-dd${process.pid}`;
  const d = startDemo(prefix, ['--daemon']);
  t.after(async () => {
    await d.stop();
    for (const n of await namespacesOf(prefix)) await execFileP('ip', ['netns', 'delete', n]).catch(() => undefined);
  });
  await waitFor('the daemon mode lines', () => /operator CLI/.test(d.out()), RUN_MS);
  const port = /curl http:\/\/127\.0\.0\.1:(\d+)\/v1\/status/.exec(d.out())?.[1];
  assert.ok(port, d.out());
  // ipamd answers inside the node namespace, and the VPC namespace holds the node's primary ENI link.
  const { stdout: status } = await execFileP('nsenter', [
    `--net=/var/run/netns/${prefix}-node`,
    process.execPath,
    '-e',
    `fetch('http://127.0.0.1:${port}/v1/status').then(r=>r.text()).then(t=>process.stdout.write(t))`,
  ]);
  const s = JSON.parse(status) as { counts: { enis: number } };
  assert.ok(s.counts.enis >= 1, status);
  const { stdout: links } = await execFileP('ip', ['-n', `${prefix}-vpc`, '-o', 'link', 'show']);
  assert.ok(links.split('\n').filter((l) => l.trim() && !/ lo:/.test(l)).length >= 1, links);
  d.kill('SIGTERM');
  const { code } = await ended(d);
  const out = d.out();
  assert.equal(code, 0, out);
  await assertNothingLeft(prefix, ipamdPid(out), out);
});

test('the scenario killed (SIGKILL) in --daemon mode: the demo still removes its namespaces and kills its ipamd', async (t) => {
  const prefix = `eni-dk${process.pid}`;
  const d = startDemo(prefix, ['--daemon']);
  t.after(async () => {
    await d.stop();
    for (const n of await namespacesOf(prefix)) await execFileP('ip', ['netns', 'delete', n]).catch(() => undefined);
  });
  await waitFor('the daemon mode lines', () => /operator CLI/.test(d.out()), RUN_MS);
  const ipamd = ipamdPid(d.out());
  const { stdout } = await execFileP('pgrep', ['-f', '--', `--ns-prefix ${prefix} --daemon --inside`]);
  const scenario = Number(stdout.trim().split('\n')[0]);
  assert.ok(scenario > 0 && alive(ipamd), d.out());
  process.kill(scenario, 'SIGKILL');
  const { code } = await ended(d);
  const out = d.out();
  assert.equal(code, 1, out);
  assert.match(out, /killed the processes the scenario left/, out);
  await assertNothingLeft(prefix, ipamd, out);
});
