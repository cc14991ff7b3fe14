/**
 * Kubernetes' own `[sig-network]` `[Conformance]` specs (e2e.test v1.36.3, built from its Go
 * module by cluster/build.sh) against eni-ipam on a real 3-node cluster, through the
 * `npm run conformance` runner (kit/cluster/conformance.ts): every spec of the set must
 * pass (or skip itself with its reason printed), nothing may be left unrun, and after the
 * suite the nodes' ipamds must hold exactly the live pods' addresses (the nothing-lost
 * check). The results table is printed either way. What the set is and why it is what CI
 * runs: docs/conformance.md.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { runConformance } from '../../kit/cluster/conformance.js';
import { parseJunit } from '../../kit/cluster/junit-results.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const skip = process.getuid?.() !== 0 ? 'needs root (network and mount namespaces)' : false;
/**
 * The suite's own time limit (min). The test's is 25 min above it: the cluster's start, the
 * install and the check, and on a cold machine the wait for scripts/test.sh's background
 * e2e build and the images' first build.
 */
const SUITE_MIN = 35;

describe("Kubernetes' [sig-network] [Conformance] specs on a 3-node cluster", { skip }, () => {
  it(
    'every spec passes, none is lost, and ipamd holds exactly the live pods',
    { timeout: (SUITE_MIN + 25) * 60_000 },
    async (t) => {
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      const runDir = path.join(ROOT, 'build', 'conformance', `ci-ipv4-conformance-${stamp}`);
      const { mkdir } = await import('node:fs/promises');
      await mkdir(runDir, { recursive: true });
      const abort = new AbortController();
      t.signal.addEventListener('abort', () => abort.abort(), { once: true });
      const r = await runConformance(
        {
          family: 'ipv4',
          nodes: 3,
          set: 'conformance',
          procs: 4,
          timeoutMin: SUITE_MIN,
          out: path.join(runDir, 'results.md'),
          keepDir: false,
          say: (l) => t.diagnostic(l),
        },
        runDir,
        abort.signal,
      );
      process.stdout.write(`\n${r.markdown}\n`);
      const failed = r.summary.failed.map((s) => `${s.name}: ${s.failure?.split('\n')[0] ?? s.state}`);
      assert.deepEqual(failed, [], `specs failed (log: ${runDir}/e2e.log)`);
      assert.deepEqual(r.summary.notRun, [], 'specs selected but never run');
      assert.deepEqual(r.lost, [], 'the nothing-lost check after the suite');
      // Not a vacuous pass: the specs that send traffic between pods on different nodes ran and passed.
      const passed = new Set(
        parseJunit(readFileSync(path.join(runDir, 'junit_01.xml'), 'utf8'))
          .specs.filter((s) => s.state === 'passed')
          .map((s) => s.name),
      );
      for (const name of [
        '[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]',
        '[sig-network] Services should have session affinity work for NodePort service [LinuxOnly] [Conformance]',
        '[sig-network] DNS should provide DNS for services [Conformance]',
      ])
        assert.ok(passed.has(name), `${name} did not pass`);
      assert.equal(r.summary.counts.passed + r.summary.counts.skippedBySpec, r.summary.counts.selected);
      assert.equal(r.code, 0);
    },
  );
});
