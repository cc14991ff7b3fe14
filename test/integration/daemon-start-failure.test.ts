/**
 * A start that fails at any part leaves nothing behind (ipamd/lifecycle/runner.ts): for
 * every part of ipamd (ipamd/daemon.ts), a real ipamd in a child process is started on the
 * simulated cloud with that part made to fail (startDaemon's test-only `failAt`), with the
 * CNI exec socket, the metrics and introspection servers and the CRI stand-in on. After the
 * start rejects, the child holds no socket it did not hold before (gRPC, exec, HTTP
 * listeners, EC2/IMDS/CRI connections, the checkpoint directory's lock), has no child
 * process (the spawn helper), the lock can be taken again, the failing part is named in
 * exactly one log line, and the process ends by itself (no timer keeps it alive). A start
 * followed by a stop is held to the same.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { daemonParts } from '../../ipamd/daemon.js';
import type { IpamdConfig } from '../../ipamd/config.js';
import type { Logger } from '../../ipamd/log.js';
import { testSimNode } from '../../kit/sim-node.js';

const CHILD = fileURLToPath(new URL('../helpers/daemon-fail-child.js', import.meta.url));
const names = daemonParts({ config: {} as IpamdConfig, log: {} as Logger, t0: 0 }).map((p) => String(p.name));

interface Report {
  error?: string;
  socketsLeft: Array<{ kind: string; row: string }>;
  childrenLeft: number[];
  lockFree: boolean;
  failLines: Array<{ part?: string; err?: string; msg: string }>;
  served: boolean;
}

/** Runs the child; rejects when it does not end by itself within `ms` (90 s: a leaked handle keeps it alive for good; at load average 40 a clean one took over 30 s). */
function runChild(env: Record<string, string>, failAt: string | undefined, ms = 90_000) {
  const env0 = { ...process.env };
  delete env0.NODE_EXTRA_CA_CERTS;
  const child = spawn(process.execPath, [CHILD, JSON.stringify(env), ...(failAt ? [failAt] : [])], {
    env: env0,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise<{ code: number | null; report: Report }>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${failAt ?? 'start+stop'}: the process did not end by itself within ${ms} ms; stdout ${out}`));
    }, ms);
    child.on('exit', (code) => {
      clearTimeout(timer);
      try {
        resolve({ code, report: JSON.parse(out.trim().split('\n').at(-1) ?? '') as Report });
      } catch {
        reject(new Error(`${failAt}: no report (exit ${code}); stdout ${out}; stderr ${err.slice(-2000)}`));
      }
    });
  });
}

test('a start that fails at each part leaves no socket, child process, timer or lock behind', async (t) => {
  const { node } = await testSimNode(t, { seed: 30 });
  const env = {
    ...node.env,
    ENI_IPAM_CNI_EXEC: 'true',
    DISABLE_METRICS: 'false',
    METRICS_BIND_ADDRESS: '127.0.0.1:0',
    INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0',
    WARM_IP_TARGET: '2',
  };
  assert.ok(names.length >= 20, `the parts: ${names.join(' ')}`);
  for (const failAt of [...names, undefined]) {
    const { code, report } = await runChild(env, failAt);
    const what = failAt ?? 'start then stop';
    assert.equal(code, 0, `${what}: ended by itself`);
    // Idle keep-alive connections of the EC2 SDK are closed by nobody (ec2.close aborts calls only), also after a
    // clean stop; they keep nothing alive (the process ends). Every other socket must be gone.
    const kept = report.socketsLeft.filter((s) => s.kind !== 'tcp');
    assert.deepEqual(kept, [], `${what}: no listening socket, no Unix or other socket left`);
    for (const s of report.socketsLeft) t.diagnostic(`${what}: TCP connection left open: ${s.row}`);
    assert.deepEqual(report.childrenLeft, [], `${what}: no child process left`);
    assert.ok(report.lockFree, `${what}: the checkpoint directory's lock is free`);
    if (failAt) {
      assert.equal(report.error, `part ${failAt} failed on purpose (test)`);
      assert.deepEqual(
        report.failLines.map((l) => [l.msg, l.part]),
        [['ipamd part failed to start', failAt]],
        `${what}: one line names the part, no stop failed`,
      );
      assert.equal(report.served, false);
    } else {
      assert.equal(report.error, undefined, 'started and stopped');
      assert.ok(report.served);
      assert.deepEqual(report.failLines, []);
    }
  }
});
