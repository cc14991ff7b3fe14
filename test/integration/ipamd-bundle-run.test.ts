/**
 * The ipamd binary as shipped (dist/ipamd/main.js, which the image's entrypoint runs) loads
 * ipamd from its one-file bundle with the build's code cache (ipamd/bundle-loader.ts), and
 * the bundled modules find what they found as ES modules: the spawn helper beside the CNI
 * shim (a wrong path would fall back to forking from ipamd, silently), the .proto files
 * of its gRPC service. Real ipamd child process on the simulated cloud.
 */
import assert from 'node:assert/strict';
import { readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BUNDLED_SPAWN_HELPER } from '../../ipamd/cni-exec/spawn-helper.js';
import { childrenOf } from '../../kit/host-scan.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { startedSimNode } from '../../kit/sim-node.js';

/** The executables of `pid`'s child processes (from /proc). */
function childExes(pid: number): string[] {
  return childrenOf(pid).flatMap((c) => {
    try {
      return [readlinkSync(`/proc/${c}/exe`)];
    } catch {
      return []; // exited meanwhile
    }
  });
}

test('ipamd runs from its bundle and code cache, spawns through the bundled helper, and serves gRPC', async (t) => {
  const { node } = await startedSimNode(t, 43, { mode: 'child', cri: false, env: { WARM_IP_TARGET: '2' } });
  const lines = readFileSync(path.join(node.dir, 'ipamd.log'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; modules?: string; codeCache?: string });
  const loaded = lines.find((l) => l.msg === 'ipamd modules loaded');
  assert.equal(loaded?.modules, 'bundle', JSON.stringify(loaded));
  assert.equal(loaded?.codeCache, 'accepted', JSON.stringify(loaded));

  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const ip = (await c.add('pod-a')).ipv4_addr;
  assert.match(ip, /^10\.0\.0\.\d+$/);
  // A kernel read (evidence for releases) runs `ip` through the helper: ipamd's child is the helper binary.
  const pid = node.pid!;
  await waitFor(
    'ipamd has started eni-ipam-spawn',
    () => (childExes(pid).includes(BUNDLED_SPAWN_HELPER) ? true : undefined),
    30_000,
  );
  assert.equal((await c.del('pod-a')).ipv4_addr, ip);
});
