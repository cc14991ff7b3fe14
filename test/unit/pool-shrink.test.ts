/**
 * Table-driven tests of the pure pool decisions (docs/design.md#pool-math): shrink plans,
 * their invariants and the surplus tracker. Counts and growing: pool-decide.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planShrink, poolCounts, SurplusTracker, type PoolEniView, type PoolTargets } from '../../ipamd/pool/index.js';
import { eni, full, NOW, OLD, T } from '../helpers/pool-views.js';

test('planShrink', async (t) => {
  const young = NOW - 30_000;
  const cases: Array<{
    name: string;
    enis: PoolEniView[];
    t: PoolTargets;
    minAge?: number;
    want: ReturnType<typeof planShrink>;
  }> = [
    {
      name: 'nothing over: nothing to do',
      enis: [eni(0, { total: 5, assigned: 2 })],
      t: T({ warmIpTarget: 3 }),
      want: { unassign: [], deleteEnis: [] },
    },
    {
      name: 'unassigns available IPs, highest device number first',
      enis: [eni(0, { total: 9, assigned: 2 }), eni(1, { total: 9, assigned: 3 })],
      t: T({ warmIpTarget: 3 }),
      want: {
        unassign: [
          { eniId: 'eni-1', count: 6 },
          { eniId: 'eni-0', count: 4 },
        ],
        deleteEnis: [],
      },
    },
    {
      name: 'an ENI with no pod whose IPs fit in the surplus is deleted whole',
      enis: [eni(0, { total: 9, assigned: 2 }), eni(1, { total: 5 })],
      t: T({ warmIpTarget: 3 }),
      want: { unassign: [{ eniId: 'eni-0', count: 4 }], deleteEnis: ['eni-1'] },
    },
    {
      name: 'an ENI with no IP left is deleted',
      enis: [eni(0, { total: 9, assigned: 9 }), eni(1), eni(2, { total: 3 })],
      t: T({ warmIpTarget: 0 }),
      want: { unassign: [], deleteEnis: ['eni-2', 'eni-1'] },
    },
    {
      name: 'an ENI younger than 60 s is kept (its spare IPs may go)',
      enis: [eni(0, { total: 9, assigned: 2 }), eni(1, { total: 5, createdAtMs: young })],
      t: T({ warmIpTarget: 3 }),
      want: {
        unassign: [
          { eniId: 'eni-1', count: 5 },
          { eniId: 'eni-0', count: 4 },
        ],
        deleteEnis: [],
      },
    },
    {
      name: 'minEniAgeMs is a parameter',
      enis: [eni(0, { total: 9, assigned: 2 }), eni(1, { total: 5, createdAtMs: young })],
      t: T({ warmIpTarget: 3 }),
      minAge: 10_000,
      want: { unassign: [{ eniId: 'eni-0', count: 4 }], deleteEnis: ['eni-1'] },
    },
    {
      name: 'an ENI holding a cooling IP is kept; cooling IPs are never unassigned',
      enis: [eni(0, { total: 9, assigned: 2 }), eni(1, { total: 5, cooling: 1 })],
      t: T({ warmIpTarget: 3 }),
      want: {
        unassign: [
          { eniId: 'eni-1', count: 4 },
          { eniId: 'eni-0', count: 4 },
        ],
        deleteEnis: [],
      },
    },
    {
      name: 'an ENI holding an assigned IP is kept',
      enis: [eni(0, { total: 9 }), eni(1, { total: 2, assigned: 1 })],
      t: T({ warmIpTarget: 0 }),
      want: {
        unassign: [
          { eniId: 'eni-1', count: 1 },
          { eniId: 'eni-0', count: 9 },
        ],
        deleteEnis: [],
      },
    },
    {
      name: 'the primary ENI is never deleted',
      enis: [eni(0, { total: 9 })],
      t: T({ warmIpTarget: 0, minimumIpTarget: 0 }),
      want: { unassign: [{ eniId: 'eni-0', count: 9 }], deleteEnis: [] },
    },
    {
      name: 'MINIMUM_IP_TARGET keeps an ENI whose IPs are needed',
      enis: [eni(0, { total: 9 }), eni(1, { total: 5 })],
      t: T({ warmIpTarget: 0, minimumIpTarget: 10 }),
      want: { unassign: [{ eniId: 'eni-1', count: 4 }], deleteEnis: [] },
    },
    {
      name: 'warm-eni: deletes whole surplus ENIs only, never single IPs',
      enis: [full(0), eni(1, { total: 9 }), eni(2, { total: 9 }), eni(3, { total: 4, assigned: 1 })],
      t: T({ maxEni: 4 }),
      want: { unassign: [], deleteEnis: ['eni-2'] },
    },
    {
      name: 'warm-eni: a young ENI still counts as available, an older one may go',
      enis: [full(0), eni(1, { total: 9 }), eni(2, { total: 9, createdAtMs: young })],
      t: T(),
      want: { unassign: [], deleteEnis: ['eni-1'] },
    },
    {
      name: 'warm-eni: cooling protects an ENI (without it eni-2 would go)',
      enis: [full(0), eni(1, { total: 9 }), eni(2, { total: 9, cooling: 1 })],
      t: T(),
      want: { unassign: [], deleteEnis: [] },
    },
    {
      name: 'warm-eni: the target keeps the last warm ENI',
      enis: [full(0), eni(1, { total: 9 })],
      t: T(),
      want: { unassign: [], deleteEnis: [] },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.deepEqual(planShrink(c.enis, c.t, NOW, c.minAge), c.want));
  }
});

test('shrink plans never break the targets', () => {
  for (let seed = 1; seed <= 500; seed++) {
    let x = seed;
    const rnd = (n: number) => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x % n;
    };
    const enis: PoolEniView[] = [];
    for (let d = 0, n = 1 + rnd(4); d < n; d++) {
      const total = rnd(10),
        assigned = rnd(total + 1),
        cooling = rnd(total - assigned + 1);
      enis.push(eni(d, { total, assigned, cooling, createdAtMs: rnd(2) ? OLD : NOW - 1000 }));
    }
    const t: PoolTargets = rnd(2)
      ? T({ warmIpTarget: rnd(8), ...(rnd(2) ? { minimumIpTarget: rnd(20) } : {}) })
      : T({ warmEniTarget: rnd(3), maxEni: 4 });
    const before = poolCounts(enis, t);
    const plan = planShrink(enis, t, NOW);
    const after = enis
      .filter((v) => !plan.deleteEnis.includes(v.eniId))
      .map((v) => {
        const u = plan.unassign.find((p) => p.eniId === v.eniId)?.count ?? 0;
        assert.ok(u <= v.total - v.assigned - v.cooling, `seed ${seed}: unassigns only available IPs`);
        return { ...v, total: v.total - u };
      });
    for (const id of plan.deleteEnis) {
      const v = enis.find((e) => e.eniId === id)!;
      assert.ok(
        !v.isPrimary && v.assigned === 0 && v.cooling === 0 && NOW - v.createdAtMs >= 60_000,
        `seed ${seed}: ${id} deletable`,
      );
    }
    const c = poolCounts(after, t);
    if (before.short === 0) assert.equal(c.short, 0, `seed ${seed}: targets still hold`);
    assert.equal(before.total - c.total <= before.over, true, `seed ${seed}: releases at most "over"`);
  }
});

test('SurplusTracker', async (t) => {
  await t.test('counts only after the surplus stayed > 0 for the delay', () => {
    const s = new SurplusTracker();
    s.observe(5, 0);
    assert.equal(s.releasable(59_999, 60_000), 0);
    s.observe(5, 59_999);
    assert.equal(s.releasable(60_000, 60_000), 5);
  });
  await t.test('returns the minimum seen over the window', () => {
    const s = new SurplusTracker();
    s.observe(5, 0);
    s.observe(3, 10_000);
    s.observe(8, 20_000);
    assert.equal(s.releasable(60_000, 60_000), 3);
    assert.equal(s.releasable(70_000, 60_000), 3, 'the 3 held from 10 s to 20 s');
    assert.equal(s.releasable(80_000, 60_000), 8, 'the 3 has left the window');
  });
  await t.test('observe(0) resets the window', () => {
    const s = new SurplusTracker();
    s.observe(5, 0);
    s.observe(0, 30_000);
    s.observe(5, 40_000);
    assert.equal(s.releasable(60_000, 60_000), 0);
    assert.equal(s.releasable(99_999, 60_000), 0);
    assert.equal(s.releasable(100_000, 60_000), 5);
  });
  await t.test('never observed, or delay 0', () => {
    const s = new SurplusTracker();
    assert.equal(s.releasable(1_000, 0), 0);
    s.observe(4, 1_000);
    assert.equal(s.releasable(1_000, 0), 4);
  });
});
