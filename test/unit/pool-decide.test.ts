/**
 * Table-driven tests of the pure pool decisions (docs/design.md#pool-math).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  planGrow,
  planShrink,
  poolCounts,
  SurplusTracker,
  type PoolEniView,
  type PoolTargets,
} from '../../ipamd/pool/index.js';

const NOW = 10_000_000;
const OLD = NOW - 3_600_000;

/** ENI with device number `dev`, capacity 9 unless given, created an hour ago. */
function eni(dev: number, o: Partial<PoolEniView> = {}): PoolEniView {
  return {
    eniId: `eni-${dev}`,
    deviceNumber: dev,
    isPrimary: dev === 0,
    createdAtMs: OLD,
    capacity: 9,
    total: 0,
    assigned: 0,
    cooling: 0,
    ...o,
  };
}
const full = (dev: number) => eni(dev, { total: 9, assigned: 9 });
const T = (o: Partial<PoolTargets> = {}): PoolTargets => ({ warmEniTarget: 1, maxEni: 3, ...o });

test('poolCounts: every formula', async (t) => {
  const cases: Array<{
    name: string;
    enis: PoolEniView[];
    t: PoolTargets;
    want: Partial<ReturnType<typeof poolCounts>>;
  }> = [
    {
      name: 'warm-ip: short = WARM − available',
      enis: [eni(0, { total: 3, assigned: 1 })],
      t: T({ warmIpTarget: 5 }),
      want: { total: 3, assigned: 1, cooling: 0, available: 2, short: 3, over: 0, mode: 'warm-ip' },
    },
    {
      name: 'warm-ip: short = MIN − total when larger',
      enis: [eni(0, { total: 6 })],
      t: T({ warmIpTarget: 2, minimumIpTarget: 10 }),
      want: { available: 6, short: 4, over: 0 },
    },
    {
      name: 'warm-ip: over = available − WARM',
      enis: [eni(0, { total: 9 })],
      t: T({ warmIpTarget: 2 }),
      want: { available: 9, short: 0, over: 7 },
    },
    {
      name: 'warm-ip: over bounded by total − MIN; unset WARM counts as 0',
      enis: [eni(0, { total: 9, assigned: 2 })],
      t: T({ minimumIpTarget: 4 }),
      want: { available: 7, short: 0, over: 5, mode: 'warm-ip' },
    },
    {
      name: 'warm-ip: both targets 0 means no warm IPs',
      enis: [eni(0, { total: 4, assigned: 1 })],
      t: T({ warmIpTarget: 0, minimumIpTarget: 0 }),
      want: { available: 3, short: 0, over: 3, mode: 'warm-ip' },
    },
    {
      name: 'cooling IPs are not available',
      enis: [eni(0, { total: 5, assigned: 2, cooling: 3 })],
      t: T({ warmIpTarget: 3 }),
      want: { available: 0, cooling: 3, short: 3, over: 0 },
    },
    {
      name: 'cooling IPs count toward MINIMUM_IP_TARGET (they are on the ENI)',
      enis: [eni(0, { total: 5, cooling: 5 })],
      t: T({ minimumIpTarget: 5 }),
      want: { available: 0, short: 0, over: 0 },
    },
    {
      name: 'warm-eni: keep warmEniTarget × capacity available',
      enis: [eni(0, { total: 9, assigned: 4 })],
      t: T(),
      want: { available: 5, short: 4, over: 0, mode: 'warm-eni' },
    },
    {
      name: 'warm-eni: WARM_ENI_TARGET=2',
      enis: [full(0), eni(1, { total: 9 })],
      t: T({ warmEniTarget: 2 }),
      want: { available: 9, short: 9, over: 0 },
    },
    {
      name: 'warm-eni: over counts only whole removable ENIs',
      enis: [full(0), eni(1, { total: 9 }), eni(2, { total: 9 })],
      t: T(),
      want: { available: 18, short: 0, over: 9 },
    },
    {
      name: 'warm-eni: an ENI with an assigned IP is not removable',
      enis: [full(0), eni(1, { total: 9 }), eni(2, { total: 9, assigned: 1 })],
      t: T(),
      want: { available: 17, short: 0, over: 0 },
    },
    {
      name: 'warm-eni: an empty surplus ENI counts as 1',
      enis: [eni(0, { total: 9 }), eni(1)],
      t: T(),
      want: { available: 9, short: 0, over: 1 },
    },
    {
      name: 'warm-eni: the primary ENI is never removable',
      enis: [eni(0, { total: 9 })],
      t: T({ warmEniTarget: 0 }),
      want: { available: 9, short: 0, over: 0 },
    },
    { name: 'no ENI at all', enis: [], t: T({ warmIpTarget: 2 }), want: { total: 0, available: 0, short: 2, over: 0 } },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const got = poolCounts(c.enis, c.t);
      for (const [k, v] of Object.entries(c.want)) assert.equal(got[k as keyof typeof got], v, `${k}`);
    });
  }
});

test('planGrow', async (t) => {
  const cases: Array<{
    name: string;
    enis: PoolEniView[];
    t: PoolTargets;
    extra?: number;
    want: ReturnType<typeof planGrow>;
  }> = [
    {
      name: 'nothing to do when targets hold',
      enis: [eni(0, { total: 5 })],
      t: T({ warmIpTarget: 5 }),
      want: { assign: [], createEnis: [], unmet: 0 },
    },
    {
      name: 'fills ENIs with room, lowest device number first, one batch each',
      enis: [eni(2, { total: 3, assigned: 3 }), full(0), eni(1, { total: 5, assigned: 5 })],
      t: T({ warmIpTarget: 10 }),
      want: {
        assign: [
          { eniId: 'eni-1', count: 4 },
          { eniId: 'eni-2', count: 6 },
        ],
        createEnis: [],
        unmet: 0,
      },
    },
    {
      name: 'then new ENIs while attached < maxEni',
      enis: [full(0)],
      t: T({ warmIpTarget: 20, maxEni: 4 }),
      want: { assign: [], createEnis: [9, 9, 2], unmet: 0 },
    },
    {
      name: 'MINIMUM_IP_TARGET grows total',
      enis: [eni(0, { total: 3 })],
      t: T({ minimumIpTarget: 10 }),
      want: { assign: [{ eniId: 'eni-0', count: 6 }], createEnis: [1], unmet: 0 },
    },
    {
      name: 'a pool whose free IPs are all cooling grows',
      enis: [eni(0, { total: 4, cooling: 4 })],
      t: T({ warmIpTarget: 2 }),
      want: { assign: [{ eniId: 'eni-0', count: 2 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'waiting ADDs add to the need',
      enis: [eni(0)],
      t: T({ warmIpTarget: 0, minimumIpTarget: 0 }),
      extra: 2,
      want: { assign: [{ eniId: 'eni-0', count: 2 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'blocked at MAX_ENI with every ENI full',
      enis: [full(0), full(1), full(2)],
      t: T({ warmIpTarget: 5 }),
      want: {
        assign: [],
        createEnis: [],
        unmet: 5,
        blockedReason: 'instance at MAX_ENI (3 ENIs) and every ENI holds its 9 secondary IPs',
      },
    },
    {
      name: 'partly placed: the rest is unmet',
      enis: [full(0)],
      t: T({ warmIpTarget: 12, maxEni: 2 }),
      want: {
        assign: [],
        createEnis: [9],
        unmet: 3,
        blockedReason: 'instance at MAX_ENI (2 ENIs) and every ENI holds its 9 secondary IPs',
      },
    },
    {
      name: 'more ENIs attached than MAX_ENI allows: no new ENI',
      enis: [full(0), full(1), eni(2, { total: 7, assigned: 7 })],
      t: T({ warmIpTarget: 4, maxEni: 2 }),
      want: {
        assign: [{ eniId: 'eni-2', count: 2 }],
        createEnis: [],
        unmet: 2,
        blockedReason: 'instance at MAX_ENI (2 ENIs) and every ENI holds its 9 secondary IPs',
      },
    },
    {
      name: 'no ENI known',
      enis: [],
      t: T({ warmIpTarget: 1 }),
      want: {
        assign: [],
        createEnis: [],
        unmet: 1,
        blockedReason: 'no ENI is known yet (instance discovery has not completed)',
      },
    },
    {
      name: 'instance type whose ENIs hold no secondary IP',
      enis: [eni(0, { capacity: 0 })],
      t: T({ warmIpTarget: 1 }),
      want: { assign: [], createEnis: [], unmet: 1, blockedReason: "this instance type's ENIs hold no secondary IPs" },
    },
    {
      name: 'warm-eni: fills the ENI it touches to capacity',
      enis: [eni(0, { total: 9, assigned: 1 }), eni(1, { total: 2, assigned: 2 })],
      t: T(),
      want: { assign: [{ eniId: 'eni-1', count: 7 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'warm-eni: whole new ENIs',
      enis: [full(0)],
      t: T({ warmEniTarget: 2 }),
      want: { assign: [], createEnis: [9, 9], unmet: 0 },
    },
    {
      name: 'warm-eni: WARM_ENI_TARGET=0 still serves waiting ADDs',
      enis: [full(0)],
      t: T({ warmEniTarget: 0 }),
      extra: 1,
      want: { assign: [], createEnis: [9], unmet: 0 },
    },
    {
      name: 'warm-eni: blocked at MAX_ENI',
      enis: [full(0), full(1), full(2)],
      t: T(),
      want: {
        assign: [],
        createEnis: [],
        unmet: 9,
        blockedReason: 'instance at MAX_ENI (3 ENIs) and every ENI holds its 9 secondary IPs',
      },
    },
    {
      name: 'prefix unit: counts in /28 slots',
      enis: [eni(0, { capacity: 144, total: 16, assigned: 16 })],
      t: T({ warmIpTarget: 20, unit: 'prefix' }),
      want: { assign: [{ eniId: 'eni-0', count: 2 }], createEnis: [], unmet: 0 },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.deepEqual(planGrow(c.enis, c.t, c.extra), c.want));
  }
});

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
