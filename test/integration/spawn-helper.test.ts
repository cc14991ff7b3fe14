/**
 * ipamd's spawn helper (ipamd/cni-exec/spawn-helper.ts over the built
 * ipamd/cni-exec/spawn/eni-ipam-spawn.c), with real children: the children are the helper's,
 * not this process's (ipamd does not fork); stdin larger than a pipe, multi-byte output
 * split across chunks, exit codes, SIGKILL and a missing program come back as
 * `child_process.spawn` reports them; many children at once keep their own output; and a
 * helper killed under a running kernel read fails that read (unreadable, never "no pods")
 * and is started again for the next; an idle helper does not keep its process alive; the
 * helpers shared in a process are one per binary path.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { acquireSpawnHelper, startSpawnHelper, BUNDLED_SPAWN_HELPER } from '../../ipamd/cni-exec/spawn-helper.js';
import { KernelSource, KernelUnavailableError } from '../../ipamd/restore/kernel-source.js';
import { createIpRunner, type IpSpawner } from '../../netfacts/ip-batch.js';

interface Outcome {
  stdout: string;
  stderr: string;
  code?: number | null;
  failed?: Error;
}

/** Runs `argv` through `spawner`, writing `input` (if any) then closing stdin. */
function run(
  spawner: IpSpawner,
  argv: string[],
  input?: string,
  onStart?: (kill: () => void) => void,
): Promise<Outcome> {
  return new Promise((resolve) => {
    const o: Outcome = { stdout: '', stderr: '' };
    const c = spawner(
      argv,
      { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' },
      {
        stdout: (d) => (o.stdout += d),
        stderr: (d) => (o.stderr += d),
        exit: (code) => resolve({ ...o, code }),
        failed: (e) => resolve({ ...o, failed: e }),
      },
    );
    if (input !== undefined) c.write(input);
    onStart?.(() => c.kill());
    if (!onStart) c.end();
  });
}

test('the build has the spawn helper', () => {
  assert.ok(existsSync(BUNDLED_SPAWN_HELPER), BUNDLED_SPAWN_HELPER);
});

test('children are the helper’s, with stdio, exit codes, kills and failures as spawn reports them', async (t) => {
  const h = startSpawnHelper();
  t.after(() => h.stop());
  // The child's parent is the helper, not this process: nothing here forked.
  const parent = Number((await run(h.spawner, ['sh', '-c', 'echo $PPID'])).stdout.trim());
  assert.ok(parent > 0 && parent !== process.pid, `child's parent ${parent}, this process ${process.pid}`);

  // 300 KB in (more than a pipe holds, so the helper has to wait for the child to read),
  // multi-byte characters out in chunks that split them.
  const input = 'é€😀x\n'.repeat(30_000);
  const echoed = await run(h.spawner, ['cat'], input);
  assert.equal(echoed.code, 0);
  assert.equal(echoed.stdout, input, 'stdin relayed whole and stdout decoded across chunk boundaries');

  const failing = await run(h.spawner, ['sh', '-c', 'echo out; echo oops >&2; exit 7']);
  assert.deepEqual([failing.code, failing.stdout, failing.stderr], [7, 'out\n', 'oops\n']);

  const killed = await run(h.spawner, ['sleep', '30'], undefined, (kill) => kill());
  assert.equal(killed.code, null, 'a killed child exits with no code, as with child_process');

  const missing = await run(h.spawner, [`no-such-program-${process.pid}`]);
  assert.ok(missing.failed, 'a program that is not there fails the spawn');
  assert.match(missing.failed.message, /No such file or directory/);

  // Many at once, each with its own output and code.
  const many = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      run(h.spawner, ['sh', '-c', `for n in 1 2 3; do echo ${i}.$n; done; exit ${i % 5}`]),
    ),
  );
  many.forEach((o, i) => assert.deepEqual([o.stdout, o.code], [`${i}.1\n${i}.2\n${i}.3\n`, i % 5], `child ${i}`));
  assert.equal(h.running, 0);
});

test('a helper killed under a kernel read fails that read; the next read starts it again', async (t) => {
  const h = startSpawnHelper();
  t.after(() => h.stop());
  const helperPid = Number((await run(h.spawner, ['sh', '-c', 'echo $PPID'])).stdout.trim());
  // The read's `ip -batch` waits for the end of its stdin: kill the helper before that end is sent.
  let killFirst = true;
  const spawner: IpSpawner = (argv, env, on) => {
    const c = h.spawner(argv, env, on);
    return {
      ...c,
      end: () => {
        if (killFirst) {
          killFirst = false;
          process.kill(helperPid, 'SIGKILL');
        }
        c.end();
      },
    };
  };
  const src = new KernelSource({ ipRunner: () => createIpRunner(spawner) });
  await assert.rejects(
    src.readKernel(),
    (e: Error) => e instanceof KernelUnavailableError && /eni-ipam-spawn exited/.test(e.message),
    'the read is unreadable, not empty',
  );
  const again = await src.readKernel();
  assert.ok(again.pods instanceof Map, 'the next read went through a new helper');
  const newPid = Number((await run(h.spawner, ['sh', '-c', 'echo $PPID'])).stdout.trim());
  assert.notEqual(newPid, helperPid);
});

test('a helper that is not there, or cannot run, leaves spawning to this thread', async (t) => {
  const h = startSpawnHelper(`/nonexistent/eni-ipam-spawn-${process.pid}`);
  const parent = Number((await run(h.spawner, ['sh', '-c', 'echo $PPID'])).stdout.trim());
  assert.equal(parent, process.pid);
  await h.stop();

  // One that exits before its first answer: the child asked of it fails, later ones fork from here.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-spawn-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const broken = path.join(dir, 'eni-ipam-spawn');
  await writeFile(broken, '#!/bin/sh\necho cannot start >&2\nexit 1\n', { mode: 0o755 });
  const b = startSpawnHelper(broken);
  const first = await run(b.spawner, ['true']);
  assert.match(String(first.failed?.message), /eni-ipam-spawn exited \(1\): cannot start/);
  const next = Number((await run(b.spawner, ['sh', '-c', 'echo $PPID'])).stdout.trim());
  assert.equal(next, process.pid);
  await b.stop();
});

test('an idle helper does not keep its process alive', async () => {
  // A process that ran a child through the helper and never stopped it ends on its own
  // (ipamd's sockets keep ipamd alive; the helper must not keep a CLI or a test alive).
  const mod = fileURLToPath(new URL('../../ipamd/cni-exec/spawn-helper.js', import.meta.url));
  const script = `const { startSpawnHelper } = await import(${JSON.stringify(mod)});
const h = startSpawnHelper();
const code = await new Promise((res) => h.spawner(['true'], { PATH: '/usr/bin:/bin' }, { stdout() {}, stderr() {}, exit: res, failed: res }).end());
console.log('child exited', code);`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    timeout: 60_000,
  });
  assert.equal(stdout.trim(), 'child exited 0');
});

test('shared helpers are one per path: a caller naming another binary gets that binary', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'spawn-helper-path-'));
  const other = path.join(dir, 'eni-ipam-spawn-copy');
  await copyFile(BUNDLED_SPAWN_HELPER, other);
  // The program that forked the child: the helper binary its spawner talks to.
  const forkedBy = async (spawner: IpSpawner) =>
    (await run(spawner, ['sh', '-c', 'readlink /proc/$PPID/exe'])).stdout.trim();
  const a = acquireSpawnHelper();
  const b = acquireSpawnHelper(undefined, other);
  const c = acquireSpawnHelper(undefined, other);
  try {
    assert.notEqual(a.spawner, b.spawner, 'another path, another helper');
    assert.equal(b.spawner, c.spawner, 'the same path shares one helper');
    assert.equal(await forkedBy(a.spawner), BUNDLED_SPAWN_HELPER);
    assert.equal(await forkedBy(b.spawner), other);
  } finally {
    await Promise.all([a.stop(), b.stop(), c.stop()]);
    await rm(dir, { recursive: true, force: true });
  }
});
