/**
 * Table-driven tests of the pure pool decisions (docs/design.md#pool-math): the counts
 * and growing. Shrinking and the surplus tracker: pool-shrink.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planGrow, poolCounts, type PoolEniView, type PoolTargets } from '../../ipamd/pool/index.js';
import { eni, full, T } from '../helpers/pool-views.js';

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
      // An ENI being created (here full: 9 asked of 9) already brings what one waiting ADD needs:
      // no second ENI for it (the bug: need = short + waiting created one ENI per waiter).
      name: 'waiting ADDs are served from addresses on their way before any new ENI',
      enis: [eni(0, { total: 9, assigned: 9 }), eni(1, { total: 9, roomSlots: 0 })],
      t: T({ warmIpTarget: 1, minimumIpTarget: 9, maxEni: 4 }),
      extra: 1,
      want: { assign: [], createEnis: [], unmet: 0 },
    },
    {
      name: 'waiting ADDs beyond what is available still grow: WARM + waiting − available',
      enis: [eni(0, { total: 9, assigned: 8 }), eni(1, { total: 2, assigned: 0, roomSlots: 7 })],
      t: T({ warmIpTarget: 2, maxEni: 4 }),
      extra: 4,
      want: { assign: [{ eniId: 'eni-1', count: 3 }], createEnis: [], unmet: 0 },
    },
    {
      name: 'warm-eni: waiting ADDs on top of a whole warm ENI',
      enis: [eni(0, { total: 9, assigned: 9 }), eni(1, { total: 9, assigned: 0, roomSlots: 0 })],
      t: T({ warmEniTarget: 1, maxEni: 4 }),
      extra: 2,
      want: { assign: [], createEnis: [9], unmet: 0 },
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
