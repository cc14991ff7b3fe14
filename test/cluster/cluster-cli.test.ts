/**
 * `npm run cluster -- up|down|status` when things go wrong: an `up` that cannot start
 * exits non-zero with one line naming what failed and leaves nothing behind; `down` and
 * `status` with nothing running say so and exit 0.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../kit/cluster/main.js', import.meta.url));
// A state dir of this test's own (ENI_IPAM_CLUSTER_STATE): an `npm run cluster` on the machine,
// or another test run's, is not this test's business.
const STATE_DIR = mkdtempSync(path.join(os.tmpdir(), 'eni-ipam-cluster-state-'));
process.on('exit', () => rmSync(STATE_DIR, { recursive: true, force: true }));
const STATE = path.join(STATE_DIR, 'state.json');
const skip = process.getuid?.() !== 0 ? 'needs root' : false;

const clusterNetns = (): string[] => {
  try {
    return readdirSync('/var/run/netns').filter((n) => n.startsWith('eni-k8s'));
  } catch {
    return [];
  }
};

test('up without Go and without built binaries: one line naming it, exit 1, nothing left', { skip }, () => {
  const cache = mkdtempSync(path.join(os.tmpdir(), 'eni-ipam-empty-cache-'));
  try {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ENI_IPAM_CLUSTER_STATE: STATE_DIR,
      ENI_IPAM_CLUSTER_CACHE: cache,
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    };
    delete env['NODE_EXTRA_CA_CERTS'];
    const r = spawnSync(process.execPath, [MAIN, 'up'], { env, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 1, r.stderr);
    const failed = r.stderr.split('\n').filter((l) => l.includes('up failed'));
    assert.equal(failed.length, 1, r.stderr);
    assert.match(failed[0]!, /go is not on PATH/);
    // The supervisor's namespaces would carry its pid (kit/cluster/cluster.ts): none is left.
    const sup = /supervisor pid (\d+)/.exec(r.stderr)?.[1];
    assert.ok(sup, r.stderr);
    assert.deepEqual(
      clusterNetns().filter((n) => n.includes(`-${sup}`)),
      [],
      'no namespace left',
    );
    assert.ok(!existsSync(STATE) || JSON.parse(readFileSync(STATE, 'utf8')).phase === 'failed');
    const down = spawnSync(process.execPath, [MAIN, 'down'], { env, encoding: 'utf8', timeout: 120_000 });
    assert.equal(down.status, 0, down.stderr);
    assert.ok(!existsSync(STATE), 'down removes the state');
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test('status and down with nothing running', { skip }, () => {
  const env = { ...process.env, ENI_IPAM_CLUSTER_STATE: STATE_DIR };
  const st = spawnSync(process.execPath, [MAIN, 'status'], { encoding: 'utf8', env });
  assert.equal(st.status, 0);
  assert.match(st.stdout, /not running/);
  const bad = spawnSync(process.execPath, [MAIN, 'upp'], { encoding: 'utf8', env });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown command 'upp' \(accepted: up, down, status\)/);
});
