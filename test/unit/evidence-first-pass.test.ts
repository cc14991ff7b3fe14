/**
 * A first evidence pass that throws (a bug in the merge, or a source answering a shape
 * nothing expected) is no evidence: releases stay frozen ("startup") until a pass
 * succeeds, never open because the pass ended (docs/design.md#4-restore-after-restart
 * rule 3). The real startEvidence with ipamd's config; the CRI endpoint is a socket that
 * does not exist (unreadable: a successful pass freezes "cri" by itself); the kernel
 * reader answers a malformed shape once, then an empty node.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../ipamd/config.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';
import { startEvidence } from '../../ipamd/restore/evidence.js';
import { waitFor } from '../../kit/wait.js';

test('a first evidence pass that throws keeps releases frozen until a pass succeeds', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-evidence-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const config = loadConfig({
    CRI_RUNTIME_ENDPOINT: `unix://${dir}/no-such-runtime.sock`,
    ENI_IPAM_GC_INTERVAL: '1h',
  });
  const gate = new ReleaseGate();
  let reads = 0;
  const kernel = {
    readKernel: async (): Promise<KernelEvidence> =>
      ++reads === 1
        ? ({ podVeths: 0, rulesOnly: [] } as unknown as KernelEvidence) // no `pods`: the pass throws
        : { pods: new Map(), podVeths: 0, rulesOnly: [] },
  };
  const evidence = await startEvidence({
    config,
    ds: new Datastore(0, 'ip'),
    gate,
    log: pino({ level: 'silent' }),
    persist: async () => undefined,
    kernel,
  });
  t.after(() => evidence.stop());
  const startup = () => gate.describe().find((r) => r.startsWith('startup:'));
  // The first pass has ended once "startup" is either lifted or says the pass failed.
  await waitFor('the first pass ended', () => reads >= 1 && (!startup() || startup()!.includes('failed')), 15_000);
  assert.equal(evidence.stats.passes, 0, 'the first pass did not succeed');
  assert.match(startup() ?? 'lifted', /first evidence pass failed/, 'releases stay frozen by "startup"');
  assert.equal(gate.frozen, true);

  await evidence.reconciler.runPass();
  assert.equal(evidence.stats.passes, 1);
  assert.equal(startup(), undefined, 'a pass that succeeded lifts "startup"');
  assert.ok(
    gate.describe().some((r) => r.startsWith('cri:')),
    `the unreadable runtime holds releases by itself: ${JSON.stringify(gate.describe())}`,
  );
});
