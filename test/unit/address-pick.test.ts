/**
 * The address an ADD takes from an ENI (ipamd/datastore/address-scan.ts `pickAvailable`)
 * against the rule written out plainly (every free prefix found first, then the best of a
 * full scan), over random ENIs of secondary IPs and /28 prefixes in every address state:
 * the one-pass pick with its early stop must choose the very same address.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pickAvailable } from '../../ipamd/datastore/address-scan.js';
import { expandPrefix, freePrefixesOf, type StateFn } from '../../ipamd/datastore/prefixes.js';
import { ipStateOf, type EniRecord, type IpRecord } from '../../ipamd/datastore/records.js';

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** The rule as the datastore stated it before the one-pass pick. */
function reference(rec: EniRecord, state: StateFn): IpRecord | undefined {
  const free = rec.prefixes.size > 0 ? new Set(freePrefixesOf(rec, state)) : undefined;
  const rank = (r: IpRecord) => (r.prefix !== undefined && free?.has(r.prefix) ? 1 : 0);
  let best: IpRecord | undefined;
  for (const r of rec.ips.values()) {
    if (state(r) !== 'available') continue;
    if (!best || rank(r) < rank(best) || (rank(r) === rank(best) && (r.releasedAt ?? -1) < (best.releasedAt ?? -1)))
      best = r;
  }
  return best;
}

test('the one-pass pick takes the address the plain rule takes, over 3,000 random ENIs', () => {
  const next = rng(13);
  const now = 1_000_000;
  const cooldownMs = 30_000;
  const state: StateFn = (r) => ipStateOf(r, now, cooldownMs);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!;
  let picked = 0;
  for (let n = 0; n < 3000; n++) {
    const rec: EniRecord = { info: {} as EniRecord['info'], ips: new Map(), prefixes: new Map() };
    const add = (ip: string, prefix?: string) => {
      // Mostly available, so free prefixes occur; every other state too.
      const roll = next();
      const r: IpRecord = { ip, eniId: 'eni-1', releasing: false, ...(prefix ? { prefix } : {}) };
      if (roll < 0.1) r.holder = `key-${ip}`;
      else if (roll < 0.13) r.unverified = true;
      else if (roll < 0.16) r.releasing = pick(['reserved', 'sent'] as const);
      if (next() < 0.6)
        r.releasedAt = now - pick([1_000, 29_999, 30_000, 45_000, 90_000, 90_000 + Math.floor(next() * 9)]);
      rec.ips.set(ip, r);
    };
    const mode = pick(['ips', 'prefixes', 'both']);
    if (mode !== 'prefixes') for (let i = 0; i < 1 + Math.floor(next() * 12); i++) add(`10.1.0.${i + 1}`);
    if (mode !== 'ips')
      for (let p = 0; p < 1 + Math.floor(next() * 5); p++) {
        const prefix = `10.2.${p}.0/28`;
        const ips = expandPrefix(prefix);
        rec.prefixes.set(prefix, ips);
        // Now and then a prefix is all available (free) or short of an address.
        const allFree = next() < 0.3;
        for (const ip of ips) {
          if (allFree) {
            rec.ips.set(ip, {
              ip,
              eniId: 'eni-1',
              prefix,
              releasing: false,
              ...(next() < 0.5 ? { releasedAt: now - 60_000 - Math.floor(next() * 5) } : {}),
            });
          } else add(ip, prefix);
        }
        if (next() < 0.1) rec.ips.delete(ips[3]!);
      }
    const want = reference(rec, state);
    assert.equal(pickAvailable(rec, state)?.ip, want?.ip, `ENI #${n}`);
    if (want) picked++;
  }
  assert.ok(picked > 2000, `${picked} of the ENIs had an address to pick`);
});
