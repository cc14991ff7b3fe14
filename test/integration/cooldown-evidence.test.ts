/**
 * The cooldown that ends on evidence (issue 41, docs/design.md#cooldown-that-ends-on-evidence)
 * against the run's real kube-apiserver, as ipamd's ServiceAccount with the chart's
 * ClusterRole (a missing list/watch on endpointslices answers 403 and fails here): the
 * real wiring (startup/cooldown-evidence-wiring.ts) and watch feed a real datastore. An
 * address no EndpointSlice ever listed is reused right after its DEL; one a slice lists
 * is held, and reused only an allowance after the slice stops listing it; while the API
 * server cannot be reached, nothing is reused before IP_COOLDOWN_PERIOD. The pure decision
 * and every "unknown" case are unit tests (test/unit/cooldown-evidence.test.ts); the data
 * plane (a client hammering a Service) belongs to the real cluster.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { monoNow } from '../../ipamd/clock.js';
import { startCooldownEvidence } from '../../ipamd/startup/cooldown-evidence-wiring.js';
import { uniqueName } from '../../kit/cluster/apiserver-objects.js';
import { waitFor } from '../../kit/wait.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';
import { allocKey, eniInfo } from '../helpers/datastore-eni.js';

const COOLDOWN_MS = 120_000;
const ALLOWANCE_MS = 1_000;
const NEVER = '10.0.0.51';
const LISTED = '10.0.0.52';

/** Nothing may happen within `ms`: a deliberate wait, not a wait for an event. */
const quietFor = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('real API server: never listed → reused after DEL; listed → held, then an allowance after unlisting; watch down → held', async (t) => {
  const env = await realKubeEnv(t, { prefix: 'cooldown' });
  const { relay, kubeconfig } = await env.viaRelay();
  const prevKubeconfig = process.env.KUBECONFIG;
  process.env.KUBECONFIG = kubeconfig;
  t.after(() => {
    if (prevKubeconfig === undefined) delete process.env.KUBECONFIG;
    else process.env.KUBECONFIG = prevKubeconfig;
  });
  const ns = uniqueName('cooldown');
  await env.kube.ensureNamespace(ns);
  const slices = `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
  const slice = (addresses: string[]) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'svc-a', labels: { 'kubernetes.io/service-name': 'svc' } },
    addressType: 'IPv4',
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  });
  const created = await env.kube.api.call('POST', slices, slice([LISTED]));
  assert.equal(created.status, 201, JSON.stringify(created.body).slice(0, 300));
  t.after(async () => {
    await env.kube.api.call('DELETE', `${slices}/svc-a`).catch(() => undefined);
    await env.kube.api.call('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
  });

  const ds = new Datastore(COOLDOWN_MS);
  ds.upsertEni(eniInfo('eni-0', 0));
  ds.addIps('eni-0', [NEVER, LISTED]);
  for (const [c, ip] of [
    ['a', NEVER],
    ['b', LISTED],
  ] as const) {
    const r = ds.assign(allocKey(c), undefined, monoNow());
    assert.equal(r.kind === 'assigned' && r.allocation.ipv4, ip);
  }
  const config = {
    cooldownEvidence: true,
    proxySyncAllowanceMs: ALLOWANCE_MS,
    ipFamily: 'ipv4',
    ipCooldownMs: COOLDOWN_MS,
  } as const;
  const handle = startCooldownEvidence(config, ds, pino({ level: 'silent' }), monoNow, Promise.resolve());
  t.after(() => handle.stop());
  await waitFor('the EndpointSlice watch synced', () => handle.state()?.synced, 30_000);
  const take = (c: string) => {
    const r = ds.assign(allocKey(c), undefined, monoNow());
    return r.kind === 'assigned' ? r.allocation.ipv4 : undefined;
  };

  // Never listed: reusable as soon as the DEL is done (the watch synced more than an allowance ago).
  await quietFor(ALLOWANCE_MS + 200); // the sync itself must be an allowance old
  ds.unassign(allocKey('a'), monoNow());
  ds.unassign(allocKey('b'), monoNow());
  assert.equal(take('c'), NEVER, 'never-listed address reused right after its DEL');

  // Listed: held past the allowance, as long as a slice lists it.
  await quietFor(3 * ALLOWANCE_MS); // nothing may free it while the slice lists it
  assert.equal(take('d'), undefined, 'a listed address stays in cooldown');
  const cur = await env.kube.api.call('GET', `${slices}/svc-a`);
  const rv = String((cur.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion);
  const put = await env.kube.api.call('PUT', `${slices}/svc-a`, {
    ...slice([]),
    metadata: { ...slice([]).metadata, resourceVersion: rv },
  });
  assert.equal(put.status, 200, JSON.stringify(put.body).slice(0, 300));
  const unlistedAt = monoNow();
  const got = await waitFor('the unlisted address reused', () => take('d'), 20_000, 20);
  const after = monoNow() - unlistedAt;
  assert.equal(got, LISTED);
  assert.ok(after >= ALLOWANCE_MS, `reused ${after} ms after the slice change: never before the allowance`);
  assert.ok(after < COOLDOWN_MS / 4, `reused ${after} ms after the slice change: by evidence, not the timer`);
  assert.deepEqual(ds.cooldownReuses(), { timer: 0, evidence: 2 });

  // The watch down (the API server stops answering): a never-listed address is held.
  relay.hold();
  await waitFor('the watch unsynced', () => handle.state()?.synced === false, 20_000);
  ds.unassign(allocKey('c'), monoNow());
  await quietFor(3 * ALLOWANCE_MS); // nothing may free it while the watch is down
  assert.equal(take('e'), undefined, 'no early reuse while the API server cannot be read');
  relay.resume();
  await waitFor('the EndpointSlice watch synced again', () => handle.state()?.synced, 60_000);
  const syncedAt = monoNow();
  assert.equal(await waitFor('reuse once synced again', () => take('e'), 20_000, 20), NEVER);
  assert.ok(monoNow() - syncedAt >= ALLOWANCE_MS - 100, 'an allowance after the new sync, not before');
});
