/**
 * One real API server per test run, shared by every test file that needs Kubernetes.
 *
 * node's test runner runs each file in its own process, so the server lives in a
 * detached supervisor (apiserver-main.ts) owned by the runner: the first file to ask
 * starts it (about 5 s, then the chart's RBAC and CRD), later files of the same run reuse
 * it, and it stops itself when the runner exits. A file run on its own
 * (`node dist/test/….test.js`) owns its server the same way and it goes with that process.
 * State: `$TMPDIR/eni-ipam-test-apiserver/owner-<pid>/state.json` (not a machine path; ENI_IPAM_TEST_APISERVER_STATE
 * moves the root). A supervisor whose owner and itself died (kill -9) is reaped by the
 * next run: its etcd and kube-apiserver are killed and its dirs removed.
 *
 * Tests on a shared server keep to names of their own (testNames in apiserver-objects.ts)
 * and delete what they made.
 */
import { spawn } from 'node:child_process';
import { openSync, closeSync, existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../kit/wait.js';
import { alive, type TestApiServerInfo } from './apiserver-main.js';

export type { TestApiServerInfo } from './apiserver-main.js';

const ROOT = process.env['ENI_IPAM_TEST_APISERVER_STATE'] ?? path.join(os.tmpdir(), 'eni-ipam-test-apiserver');
const MAIN = fileURLToPath(new URL('./apiserver-main.js', import.meta.url));

function readJson<T>(f: string): T | undefined {
  try {
    return JSON.parse(readFileSync(f, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/** Removes what supervisors that died with their owner left behind. Never throws. */
async function reapStale(): Promise<void> {
  const dirs = await readdir(ROOT).catch(() => [] as string[]);
  for (const d of dirs) {
    const owner = Number(/^owner-(\d+)$/.exec(d)?.[1]);
    const dir = path.join(ROOT, d);
    const sup = Number(readJson<number>(path.join(dir, 'supervisor.pid')));
    if (!owner || alive(owner) || (sup && alive(sup))) continue;
    const st = readJson<TestApiServerInfo>(path.join(dir, 'state.json'));
    for (const pid of st?.pids ?? []) killGroup(pid);
    if (st?.dir) await rm(st.dir, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
}

/** Starts the supervisor for `owner` in `dir` (which this process just created). */
async function spawnSupervisor(dir: string, owner: number): Promise<void> {
  const log = openSync(path.join(dir, 'supervisor.log'), 'a');
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['NODE_TEST_CONTEXT'];
  delete env['NODE_EXTRA_CA_CERTS'];
  const child = spawn(process.execPath, [MAIN, dir, String(owner)], {
    detached: true,
    stdio: ['ignore', log, log],
    env,
  });
  closeSync(log);
  child.unref();
  await writeFile(path.join(dir, 'supervisor.pid'), String(child.pid ?? 0));
}

/** What the supervisor in `dir` has published so far: its state, why it failed, or nothing yet. */
function published(dir: string): { state: TestApiServerInfo } | { error: string } | undefined {
  const state = readJson<TestApiServerInfo>(path.join(dir, 'state.json'));
  if (state) return { state };
  if (existsSync(path.join(dir, 'error.txt'))) return { error: readFileSync(path.join(dir, 'error.txt'), 'utf8') };
  const sup = Number(readJson<number>(path.join(dir, 'supervisor.pid')));
  if (sup && !alive(sup)) {
    const log = readFileSync(path.join(dir, 'supervisor.log'), 'utf8').trim().split('\n').slice(-10).join('\n');
    return { error: `the API server supervisor ${sup} exited before it was ready:\n${log}` };
  }
  return undefined;
}

/** Waits for the supervisor in `dir` to publish state.json. @throws its error.txt at once, or why it died. */
async function awaitState(dir: string, timeoutMs: number): Promise<TestApiServerInfo> {
  const p = await waitFor('the shared test API server', () => published(dir), timeoutMs, 200).catch((e: Error) => {
    throw new Error(`the shared test API server did not start: ${e.message}`);
  });
  if ('error' in p) throw new Error(`the shared test API server did not start: ${p.error}`);
  return p.state;
}

/**
 * Ends the shared server of `owner` (a test runner that has exited): waits up to
 * `timeoutMs` for its supervisor to stop etcd and kube-apiserver and remove its dirs, then
 * kills what is left (process groups) and removes the dirs itself. Never throws.
 * @returns what it had to do: 'none' (no server for that owner), 'stopped' or 'killed'.
 */
export async function reapOwner(owner: number, timeoutMs = 20_000): Promise<'none' | 'stopped' | 'killed'> {
  const dir = path.join(ROOT, `owner-${owner}`);
  if (!existsSync(dir)) return 'none';
  const gone = await waitFor(`the API server of ${owner} to stop`, () => !existsSync(dir), timeoutMs, 200).catch(
    () => false,
  );
  if (gone) return 'stopped';
  const sup = Number(readJson<number>(path.join(dir, 'supervisor.pid')));
  const st = readJson<TestApiServerInfo>(path.join(dir, 'state.json'));
  for (const pid of [...(st?.pids ?? []), ...(sup ? [sup] : [])]) killGroup(pid);
  if (st?.dir) await rm(st.dir, { recursive: true, force: true });
  await rm(dir, { recursive: true, force: true });
  return 'killed';
}

let shared: Promise<TestApiServerInfo> | undefined;

/**
 * The run's shared API server, started on first use (memoised per process).
 * @throws Error naming why the server did not start (build missing, a port taken, a log tail).
 */
export function testApiServer(): Promise<TestApiServerInfo> {
  return (shared ??= (async () => {
    const owner = process.env['NODE_TEST_CONTEXT'] ? process.ppid : process.pid;
    const dir = path.join(ROOT, `owner-${owner}`);
    await mkdir(ROOT, { recursive: true });
    await reapStale();
    const st = readJson<TestApiServerInfo>(path.join(dir, 'state.json'));
    if (st && alive(st.supervisor)) return st;
    try {
      await mkdir(dir);
      await spawnSupervisor(dir, owner);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      // Another file of this run is starting it (or a dead start left the dir): wait for it.
    }
    return awaitState(dir, 180_000);
  })());
}
