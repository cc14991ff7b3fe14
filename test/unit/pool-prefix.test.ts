/**
 * Table-driven tests of the prefix-delegation pool math (ENABLE_PREFIX_DELEGATION):
 * WARM_PREFIX_TARGET counts free /28 prefixes; WARM_IP_TARGET/MINIMUM_IP_TARGET count
 * IPs and round up to prefixes (and override WARM_PREFIX_TARGET); WARM_ENI_TARGET counts
 * whole ENIs of prefixes; cooling addresses keep a prefix from being free.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planGrow, planShrink, poolCounts, type PoolEniView, type PoolTargets } from '../../ipamd/pool/index.js';

const NOW = 10_000_000;
const OLD = NOW - 3_600_000;
/** m5.large: 10 IPv4 per ENI → 9 slots → 9 prefixes, 144 addresses. */
const SLOTS = 9;

/**
 * An ENI view in prefix unit: `prefixes` /28s (16 addresses each), `free` of them wholly
 * free, `assigned`/`cooling` addresses, `secondary` plain secondary IPs (default 0).
 */
function pe(
  dev: number,
  o: {
    prefixes?: number;
    free?: number;
    assigned?: number;
    cooling?: number;
    secondary?: number;
    createdAtMs?: number;
  } = {},
): PoolEniView {
  const prefixes = o.prefixes ?? 0;
  const secondary = o.secondary ?? 0;
  return {
    eniId: `eni-${dev}`,
    deviceNumber: dev,
    isPrimary: dev === 0,
    createdAtMs: o.createdAtMs ?? OLD,
    capacity: SLOTS * 16,
    total: prefixes * 16 + secondary,
    assigned: o.assigned ?? 0,
    cooling: o.cooling ?? 0,
    freeSlots: o.free ?? prefixes,
    prefixes,
    roomSlots: SLOTS - prefixes - secondary,
  };
}
const T = (o: Partial<PoolTargets> = {}): PoolTargets => ({ warmEniTarget: 1, maxEni: 3, unit: 'prefix', ...o });

test('poolCounts in prefix unit', async (t) => {
  const cases: Array<{
    name: string;
    enis: PoolEniView[];
    t: PoolTargets;
    want: Partial<ReturnType<typeof poolCounts>>;
  }> = [
    {
      name: 'WARM_PREFIX_TARGET=1 met by one free prefix',
      enis: [pe(0, { prefixes: 1 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { mode: 'warm-prefix', freePrefixes: 1, available: 16, short: 0, over: 0 },
    },
    {
      name: 'one address in use: the prefix is no longer free, a whole prefix is short',
      enis: [pe(0, { prefixes: 1, free: 0, assigned: 1 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { freePrefixes: 0, available: 15, short: 16, over: 0 },
    },
    {
      name: 'two free prefixes over a target of 1: one prefix over',
      enis: [pe(0, { prefixes: 3, free: 2, assigned: 4 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { freePrefixes: 2, short: 0, over: 16 },
    },
    {
      name: 'WARM_PREFIX_TARGET=2 with no prefix',
      enis: [pe(0)],
      t: T({ warmPrefixTarget: 2 }),
      want: { total: 0, short: 32, over: 0 },
    },
    {
      name: 'a prefix holding only a cooling address is not free',
      enis: [pe(0, { prefixes: 2, free: 1, cooling: 1 })],
      t: T({ warmPrefixTarget: 2 }),
      want: { available: 31, cooling: 1, freePrefixes: 1, short: 16, over: 0 },
    },
    {
      name: 'WARM_PREFIX_TARGET=0: nothing kept, every free prefix is over',
      enis: [pe(0, { prefixes: 2, free: 1, assigned: 3 })],
      t: T({ warmPrefixTarget: 0 }),
      want: { short: 0, over: 16 },
    },
    {
      name: 'WARM_IP_TARGET counts IPs: 5 short on an empty node',
      enis: [pe(0)],
      t: T({ warmIpTarget: 5 }),
      want: { mode: 'warm-ip', short: 5, over: 0 },
    },
    {
      name: 'WARM_IP_TARGET: 4 available of 5 wanted',
      enis: [pe(0, { prefixes: 1, free: 0, assigned: 12 })],
      t: T({ warmIpTarget: 5 }),
      want: { available: 4, short: 1, over: 0 },
    },
    {
      name: 'WARM_IP_TARGET: surplus rounded down to whole free prefixes',
      enis: [pe(0, { prefixes: 2 })],
      t: T({ warmIpTarget: 5 }),
      want: { available: 32, short: 0, over: 16 },
    },
    {
      name: 'WARM_IP_TARGET: a surplus inside used prefixes is not releasable',
      enis: [pe(0, { prefixes: 2, free: 0, assigned: 2 })],
      t: T({ warmIpTarget: 0 }),
      want: { available: 30, over: 0 },
    },
    {
      name: 'MINIMUM_IP_TARGET=20 with one prefix: 4 short',
      enis: [pe(0, { prefixes: 1 })],
      t: T({ minimumIpTarget: 20 }),
      want: { total: 16, short: 4, over: 0 },
    },
    {
      name: 'MINIMUM_IP_TARGET bounds the surplus',
      enis: [pe(0, { prefixes: 3 })],
      t: T({ warmIpTarget: 0, minimumIpTarget: 20 }),
      want: { short: 0, over: 16 },
    },
    {
      name: 'WARM_IP_TARGET overrides WARM_PREFIX_TARGET',
      enis: [pe(0, { prefixes: 1 })],
      t: T({ warmIpTarget: 1, warmPrefixTarget: 3 }),
      want: { mode: 'warm-ip', short: 0, over: 0 },
    },
    {
      name: 'no prefix target: WARM_ENI_TARGET counts a whole ENI of prefixes',
      enis: [pe(0, { prefixes: 9, free: 8, assigned: 1 })],
      t: T(),
      want: { mode: 'warm-eni', available: 143, short: 1, over: 0 },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const got = poolCounts(c.enis, c.t);
      for (const [k, v] of Object.entries(c.want)) assert.equal(got[k as keyof typeof got], v, `${k}`);
    });
  }
});

test('planGrow in prefix unit: counts are /28 prefixes', async (t) => {
  const cases: Array<{
    name: string;
    enis: PoolEniView[];
    t: PoolTargets;
    extra?: number;
    want: ReturnType<typeof planGrow>;
  }> = [
    {
      name: 'WARM_PREFIX_TARGET=1 on a fresh node: one prefix',
      enis: [pe(0)],
      t: T({ warmPrefixTarget: 1 }),
      want: { assign: [{ eniId: 'eni-0', count: 1 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'WARM_PREFIX_TARGET=3 with one free: two more',
      enis: [pe(0, { prefixes: 2, free: 1, assigned: 1 })],
      t: T({ warmPrefixTarget: 3 }),
      want: { assign: [{ eniId: 'eni-0', count: 2 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'WARM_IP_TARGET=5 rounds up to one prefix',
      enis: [pe(0)],
      t: T({ warmIpTarget: 5 }),
      want: { assign: [{ eniId: 'eni-0', count: 1 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'WARM_IP_TARGET=20 rounds up to two prefixes',
      enis: [pe(0)],
      t: T({ warmIpTarget: 20 }),
      want: { assign: [{ eniId: 'eni-0', count: 2 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'MINIMUM_IP_TARGET=20 with 16: one more prefix',
      enis: [pe(0, { prefixes: 1 })],
      t: T({ minimumIpTarget: 20 }),
      want: { assign: [{ eniId: 'eni-0', count: 1 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'waiting ADDs with WARM_PREFIX_TARGET=0: one prefix for up to 16',
      enis: [pe(0)],
      t: T({ warmPrefixTarget: 0 }),
      extra: 3,
      want: { assign: [{ eniId: 'eni-0', count: 1 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'waiting ADDs: 17 need two prefixes',
      enis: [pe(0)],
      t: T({ warmPrefixTarget: 0 }),
      extra: 17,
      want: { assign: [{ eniId: 'eni-0', count: 2 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'slots taken by secondary IPs count: no room left, a new ENI',
      enis: [pe(0, { prefixes: 7, free: 0, secondary: 2, assigned: 114 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { assign: [], createEnis: [1], unmet: 0 },
    },
    {
      name: 'full primary ENI: a new ENI with one prefix',
      enis: [pe(0, { prefixes: 9, free: 0, assigned: 144 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { assign: [], createEnis: [1], unmet: 0 },
    },
    {
      name: 'warm-eni: the new ENI gets all its 9 prefixes',
      enis: [pe(0, { prefixes: 9, free: 8, assigned: 1 })],
      t: T(),
      want: { assign: [], createEnis: [9], unmet: 0 },
    },
    {
      name: 'blocked at MAX_ENI: the reason names prefixes',
      enis: [0, 1, 2].map((d) => pe(d, { prefixes: 9, free: 0, assigned: 144 })),
      t: T({ warmPrefixTarget: 1 }),
      want: {
        assign: [],
        createEnis: [],
        unmet: 16,
        blockedReason: 'instance at MAX_ENI (3 ENIs) and every ENI holds its 9 /28 prefixes',
      },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.deepEqual(planGrow(c.enis, c.t, c.extra), c.want));
  }
});

test('planShrink in prefix unit: only whole free prefixes go', async (t) => {
  const cases: Array<{ name: string; enis: PoolEniView[]; t: PoolTargets; want: ReturnType<typeof planShrink> }> = [
    {
      name: 'WARM_PREFIX_TARGET=1 with two free: one prefix unassigned',
      enis: [pe(0, { prefixes: 3, free: 2, assigned: 5 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { unassign: [{ eniId: 'eni-0', count: 1 }], deleteEnis: [] },
    },
    {
      name: 'WARM_PREFIX_TARGET=0: every free prefix',
      enis: [pe(0, { prefixes: 3, free: 2, assigned: 5 })],
      t: T({ warmPrefixTarget: 0 }),
      want: { unassign: [{ eniId: 'eni-0', count: 2 }], deleteEnis: [] },
    },
    {
      name: 'a prefix with a cooling address stays',
      enis: [pe(0, { prefixes: 2, free: 1, cooling: 1 })],
      t: T({ warmPrefixTarget: 0 }),
      want: { unassign: [{ eniId: 'eni-0', count: 1 }], deleteEnis: [] },
    },
    {
      name: 'no free prefix: nothing, however many addresses are available',
      enis: [pe(0, { prefixes: 3, free: 0, assigned: 3 })],
      t: T({ warmIpTarget: 0, minimumIpTarget: 0 }),
      want: { unassign: [], deleteEnis: [] },
    },
    {
      name: 'WARM_IP_TARGET=5 with 48 available in 3 free prefixes: two go',
      enis: [pe(0, { prefixes: 3 })],
      t: T({ warmIpTarget: 5 }),
      want: { unassign: [{ eniId: 'eni-0', count: 2 }], deleteEnis: [] },
    },
    {
      name: 'a pod-free old ENI whose prefixes are all surplus is deleted whole',
      enis: [pe(0, { prefixes: 2, free: 1, assigned: 1 }), pe(1, { prefixes: 2 })],
      t: T({ warmPrefixTarget: 1 }),
      want: { unassign: [], deleteEnis: ['eni-1'] },
    },
    {
      name: 'warm-eni never unassigns prefixes',
      enis: [pe(0, { prefixes: 9, free: 8, assigned: 1 }), pe(1, { prefixes: 9 })],
      t: T(),
      want: { unassign: [], deleteEnis: [] },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.deepEqual(planShrink(c.enis, c.t, NOW), c.want));
  }
});

test('prefix shrink plans never take a used prefix and never break the targets', () => {
  for (let seed = 1; seed <= 500; seed++) {
    let x = seed;
    const rnd = (n: number) => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x % n;
    };
    const enis: PoolEniView[] = [];
    for (let d = 0, n = 1 + rnd(3); d < n; d++) {
      const prefixes = rnd(SLOTS + 1);
      const used = rnd(prefixes + 1);
      const assigned = used === 0 ? 0 : used + rnd(used * 15 + 1);
      enis.push(pe(d, { prefixes, free: prefixes - used, assigned, createdAtMs: rnd(2) ? OLD : NOW - 1000 }));
    }
    const mode = rnd(3);
    const t =
      mode === 0
        ? T({ warmPrefixTarget: rnd(4) })
        : mode === 1
          ? T({ warmIpTarget: rnd(40), ...(rnd(2) ? { minimumIpTarget: rnd(80) } : {}) })
          : T({ warmEniTarget: rnd(2) });
    const before = poolCounts(enis, t);
    if (before.mode !== 'warm-eni') assert.equal(before.over % 16, 0, `seed ${seed}: over is whole prefixes`);
    const plan = planShrink(enis, t, NOW);
    const after = enis
      .filter((v) => !plan.deleteEnis.includes(v.eniId))
      .map((v) => {
        const u = plan.unassign.find((p) => p.eniId === v.eniId)?.count ?? 0;
        assert.ok(u <= (v.freeSlots ?? 0), `seed ${seed}: only free prefixes are unassigned`);
        return {
          ...v,
          total: v.total - 16 * u,
          freeSlots: (v.freeSlots ?? 0) - u,
          prefixes: (v.prefixes ?? 0) - u,
          roomSlots: (v.roomSlots ?? 0) + u,
        };
      });
    for (const id of plan.deleteEnis) {
      const v = enis.find((e) => e.eniId === id)!;
      assert.ok(!v.isPrimary && v.assigned === 0 && v.cooling === 0, `seed ${seed}: ${id} deletable`);
    }
    const c = poolCounts(after, t);
    if (before.short === 0) assert.equal(c.short, 0, `seed ${seed}: targets still hold`);
    assert.ok(before.total - c.total <= before.over, `seed ${seed}: releases at most "over"`);
  }
});
