/**
 * The DaemonSet's probe commands against a real ipamd, each test run for both: the static
 * C probe the chart runs (dist/cni-plugin/eni-ipam-probe) and the Node probe it ran before
 * (dist/ipamd/probe.js, same arguments and exit codes). Exit 0 while ipamd serves;
 * 2 once it is killed and its socket file is left behind (a crash), when no socket
 * exists, and while ipamd is hung (SIGSTOP: the kernel still accepts the connection, no
 * answer comes) within the timeout; 1 when the health service says NOT_SERVING.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { createNode } from '../../kit/node-harness.js';

const NODE_PROBE = fileURLToPath(new URL('../../ipamd/probe.js', import.meta.url));
const NATIVE_PROBE = fileURLToPath(new URL('../../cni-plugin/eni-ipam-probe', import.meta.url));
const PROBES: Array<[string, string[]]> = [
  ['eni-ipam-probe', [NATIVE_PROBE]],
  ['probe.js', [process.execPath, NODE_PROBE]],
];

function run(cmd: string[], args: string[]): Promise<{ code: number; out: string }> {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  return new Promise((resolve) => {
    execFile(cmd[0]!, [...cmd.slice(1), ...args], { timeout: 20_000, env }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, out: `${stdout}${stderr}`.trim() });
    });
  });
}

for (const [name, cmd] of PROBES) {
  const probe = (...args: string[]) => run(cmd, args);

  test(`${name}: 0 against a serving ipamd, 2 on the stale socket a crash leaves, 2 with no socket`, async (t) => {
    const h = await createNode();
    t.after(() => h.close());
    const d = await h.startIpamd();
    const up = await probe('--socket', h.socket);
    assert.equal(up.code, 0, up.out);
    assert.match(up.out, /SERVING/);
    const cni = await probe('--socket', h.socket, '--service', 'eniipam.v1.CNIBackend');
    assert.equal(cni.code, 0, cni.out);

    await d.kill9();
    assert.ok(existsSync(h.socket), 'SIGKILL leaves the socket file behind');
    const t0 = Date.now();
    const stale = await probe('--socket', h.socket, '--timeout', '3000');
    assert.equal(stale.code, 2, stale.out);
    assert.match(stale.out, /not serving on .*ipamd\.sock: UNAVAILABLE/);
    assert.ok(Date.now() - t0 < 10_000, 'a refused connection fails fast');

    const none = await probe('--socket', path.join(h.dir, 'absent.sock'), '--timeout', '3000');
    assert.equal(none.code, 2, none.out);
  });

  test(`${name}: 1 when the health service answers NOT_SERVING; 3 on bad arguments`, async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-probe-'));
    const server = new grpc.Server();
    t.after(async () => {
      server.forceShutdown();
      await rm(dir, { recursive: true, force: true });
    });
    new HealthImplementation({ '': 'NOT_SERVING' }).addToServer(server);
    const sock = path.join(dir, 'ipamd.sock');
    await new Promise<void>((res, rej) =>
      server.bindAsync(`unix://${sock}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? rej(e) : res())),
    );
    const r = await probe('--socket', sock);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /NOT_SERVING/);
    const bad = await probe('--socket', 'relative.sock');
    assert.equal(bad.code, 3);
    assert.match(bad.out, /--socket "relative.sock" is invalid: expected an absolute path/);
    const badT = await probe('--timeout', '5s');
    assert.equal(badT.code, 3);
    assert.match(badT.out, /--timeout "5s" is invalid/);
    const unknown = await probe('--socket', sock, '--service', 'no.such.Service');
    assert.equal(unknown.code, 2, `an unknown service is a gRPC error, not SERVING: ${unknown.out}`);
  });

  test(`${name}: 2 within the timeout while ipamd is hung (stopped), 0 again once it runs`, async (t) => {
    const h = await createNode();
    t.after(() => h.close());
    const d = await h.startIpamd();
    assert.equal((await probe('--socket', h.socket)).code, 0);
    process.kill(d.pid, 'SIGSTOP');
    t.after(() => {
      try {
        process.kill(d.pid, 'SIGCONT');
      } catch {
        /* already gone */
      }
    });
    const t0 = Date.now();
    const hung = await probe('--socket', h.socket, '--timeout', '1000');
    const took = Date.now() - t0;
    assert.equal(hung.code, 2, hung.out);
    assert.match(hung.out, /DEADLINE_EXCEEDED/);
    assert.ok(took >= 1000 && took < 10_000, `failed at its deadline, not before or long after: ${took} ms`);
    process.kill(d.pid, 'SIGCONT');
    assert.equal((await probe('--socket', h.socket)).code, 0, 'serving again');
  });
}
