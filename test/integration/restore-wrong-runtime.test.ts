/**
 * docs/design.md#13-evidence-before-trust, the seed outage as an operator hits it, through real containerd: 12 live pods
 * on 2 ENIs, then ipamd restarted with CRI_RUNTIME_ENDPOINT pointing at a second, healthy
 * containerd kubelet does not use, and no Kubernetes source (MY_NODE_NAME unset). GC,
 * grace, cooldown, shrink and ENI age are seconds (outage-bench.ts OUTAGE_ENV).
 *
 * a. the wrong runtime is empty, the checkpoint intact;
 * b. the same with the checkpoint deleted;
 * c. the wrong runtime runs 3 unrelated sandboxes;
 * d. ipamd killed with SIGKILL during a burst of ADDs, restarted against the wrong runtime.
 *
 * Each asserts that no Unassign/Detach/Delete took a live pod's IP or ENI, that new pods
 * started after the restart got no live pod's IP, that releases are frozen with a reason
 * naming the wrong runtime's endpoint ("runtime at unix://…"); then the configuration is fixed and the
 * nothing-lost check runs. One node and its second runtime serve all four scenarios.
 * Needs root and `scripts/ensure-deps.sh --containerd`; run under
 * `flock /tmp/eni-ipam-containerd.lock`.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { checkSafety, figureLine, OutageBench } from '../helpers/outage-bench.js';
import { killDuringBurst, rerunPods } from '../helpers/outage-burst.js';

let bench: OutageBench;
before(async () => {
  bench = await OutageBench.create();
});
after(async () => {
  await bench?.close();
});

/** The wrong runtime, no Kubernetes source. */
const wrongRuntime = (): NodeJS.ProcessEnv => ({ CRI_RUNTIME_ENDPOINT: bench.wrong.endpoint, MY_NODE_NAME: undefined });

test('a. wrong but reachable runtime (empty), checkpoint intact → nothing released, no live IP reused, frozen naming the runtime', async (t) => {
  await bench.prepare();
  await bench.restart(wrongRuntime());
  const f = await bench.observe('a');
  t.diagnostic(`FIGURES ${figureLine(f)}`);
  checkSafety(f, [`runtime at ${bench.wrong.endpoint}`]);
  await bench.recover();
});

test('b. wrong but reachable runtime (empty), checkpoint deleted → nothing released or "verified free", no live IP reused, frozen naming the runtime', async (t) => {
  await bench.prepare();
  await bench.restart(wrongRuntime(), { deleteCheckpoint: true });
  const f = await bench.observe('b');
  t.diagnostic(`FIGURES ${figureLine(f)}`);
  checkSafety(f, [`runtime at ${bench.wrong.endpoint}`]);
  await bench.recover();
});

test('c. wrong runtime running 3 foreign sandboxes, checkpoint intact → nothing released, no live IP reused, frozen naming the runtime', async (t) => {
  await bench.prepare();
  const foreign = await bench.wrong.runForeign('foreign', 3);
  assert.equal(
    foreign.filter((s) => s.ip.startsWith('172.30.0.')).length,
    3,
    `foreign sandboxes on the foreign network: ${JSON.stringify(foreign)}`,
  );
  await bench.restart(wrongRuntime());
  const f = await bench.observe('c');
  t.diagnostic(`FIGURES ${figureLine(f)}`);
  checkSafety(f, [`runtime at ${bench.wrong.endpoint}`]);
  await bench.recover();
});

test('d. kill -9 during a burst of 6 ADDs, restarted against the wrong runtime → nothing released, no live IP reused, frozen naming the runtime', async (t) => {
  await bench.prepare();
  const burst = await killDuringBurst(bench, { prefix: 'd-burst', count: 6, maxKillAfter: 3 });
  t.diagnostic(
    `killed after ipamd assigned ${burst.assignedAtKill} of the 6 burst ADDs; ${burst.failed.length} RunPodSandbox failed`,
  );
  await bench.restart(wrongRuntime());
  // kubelet retries the pods whose sandbox could not be created (through the right runtime).
  const retryFailed = await rerunPods(bench, burst.failed);
  const f = await bench.observe('d');
  f.failedNewPods.push(...retryFailed);
  t.diagnostic(`FIGURES ${figureLine(f)}`);
  checkSafety(f, [`runtime at ${bench.wrong.endpoint}`]);
  await bench.recover();
});
