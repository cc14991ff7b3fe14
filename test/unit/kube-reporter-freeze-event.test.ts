/**
 * The Node Event follows the cause of a freeze, not only its start (issue 37, found on the
 * real cluster by test/cluster/operator-cases-cluster.test.ts): an ipamd starting against
 * the wrong runtime is frozen first by `startup` (the first evidence pass not finished),
 * then by `cri` (the runtime suspect). The condition's reason stays `ReleasesFrozen`
 * throughout; the Event written at the start said only "startup" and was never rewritten,
 * so `kubectl get events` never named the runtime. Now a change of the frozen sources is a
 * new occurrence of the Event (its message follows the newest), and a reason that does not
 * change the sources (a count in it) is not. KubeReporter with in-memory writes (the API
 * side is kube-node-reporting's, on the real API server).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { KubeReporter } from '../../ipamd/observability/kube-reporter.js';
import type { EventWrite } from '../../ipamd/observability/event-book.js';
import type { NodeIpFacts } from '../../ipamd/observability/node-ip-state.js';
import { waitFor } from '../../kit/wait.js';

const CRI = 'cri: suspect: runtime at unix:///run/containerd/empty/containerd.sock (containerd 2.2.1)';

function reporter(facts: () => NodeIpFacts) {
  const events: EventWrite[] = [];
  const conditions: Array<{ reason: string; message: string }> = [];
  const r = new KubeReporter({
    nodeName: 'node-a',
    log: pino({ level: 'silent' }),
    taintWhenExhausted: false,
    facts,
    intervalMs: 5,
    book: { minWriteIntervalMs: 0, burst: 100, refillMs: 1 },
    writes: {
      writeEvent: async (w) => {
        events.push(w);
        return `ev-${events.length}`;
      },
      readNode: async () => ({ metadata: { name: 'node-a', resourceVersion: '1' }, status: { conditions: [] } }),
      patchCondition: async (c) => {
        conditions.push({ reason: c.reason, message: c.message });
      },
      patchTaints: async () => undefined,
    },
  });
  return { r, events, conditions };
}

const facts = (freezeReasons: string[]): NodeIpFacts => ({
  canServe: true,
  serveMessage: '12 IPs available',
  available: 12,
  frozen: freezeReasons.length > 0,
  freezeReasons,
  heldByFreeze: 0,
});

test('a freeze whose cause changes (startup, then the runtime) rewrites the Node Event naming the new cause', async (t) => {
  let now = facts(['startup: the first evidence pass has not finished yet']);
  const { r, events, conditions } = reporter(() => now);
  t.after(() => r.stop());
  r.start();
  await waitFor(
    'the startup freeze Event',
    () => events.some((e) => e.occurrence.message.includes('startup:')),
    5000,
    5,
  );
  now = facts([`${CRI} answered with 0 sandboxes and knows 0 of the 12 pods`]);
  await waitFor('the condition naming the runtime', () => conditions.at(-1)?.message.includes('cri: suspect'), 5000, 5);
  const last = await waitFor(
    'a Node Event naming the runtime',
    () => events.find((e) => e.occurrence.message.includes('cri: suspect')),
    5000,
    5,
  );
  assert.equal(last.occurrence.reason, 'ReleasesFrozen');
  assert.equal(last.occurrence.involved.kind, 'Node');
  assert.equal(last.count, 2, 'the same Event series, its second occurrence');
  assert.equal(conditions.at(-1)!.reason, 'ReleasesFrozen', 'the reason never changed');
});

test('the same sources with a changed reason (a count) are no new Event occurrence', async (t) => {
  let now = facts([`${CRI} answered with 0 sandboxes and knows 0 of the 12 pods`]);
  const { r, events, conditions } = reporter(() => now);
  t.after(() => r.stop());
  r.start();
  await waitFor('the freeze Event', () => events.length === 1, 5000, 5);
  now = facts([`${CRI} answered with 0 sandboxes and knows 0 of the 13 pods`]);
  await waitFor('the condition rewritten', () => conditions.at(-1)?.message.includes('of the 13 pods'), 5000, 5);
  now = facts([]);
  await waitFor('unfrozen', () => conditions.at(-1)?.reason === 'IPsAvailable', 5000, 5);
  await waitFor('the unfreeze Event', () => events.some((e) => e.occurrence.reason === 'IPsAvailable'), 5000, 5);
  const frozen = events.filter((e) => e.occurrence.reason === 'ReleasesFrozen');
  assert.deepEqual(
    frozen.map((e) => e.count),
    [1],
    'one occurrence for the one cause',
  );
});
