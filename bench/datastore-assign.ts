/**
 * bench: the datastore's cost per ADD+DEL (Datastore.assign + release, in memory, no I/O)
 * on a c5.4xlarge's worth of addresses: 8 ENIs of 29 secondary IPs (232), or of 29 /28
 * prefixes (3,712 addresses), 250 held, after `--churn` pairs so that released addresses
 * carry their release times (the ADD takes the least recently released): 150 held of the
 * IPs, 250 of the prefix addresses. With IP_COOLDOWN_PERIOD 0 and 30 s (most of the free
 * prefix addresses cooling; with IPs, every assign finds one of the few not cooling). Medians of `--rounds` rounds,
 * µs per pair; `--datastore <other dist>/ipamd/datastore/datastore.js` adds the same rows
 * for another build, interleaved, with the ratio. Prints figures, no pass/fail.
 *
 *   node dist/bench/datastore-assign.js [--pairs 5000] [--rounds 7] [--datastore <path>]
 */
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Datastore } from '../ipamd/datastore/datastore.js';
import { benchEni, machineLine, row } from './bench-util.js';
import { quantile } from './stats.js';

type DatastoreClass = typeof Datastore;

/** µs per assign+release pair on a fresh datastore of `unit` addresses after `churn` pairs. */
function run(
  D: DatastoreClass,
  unit: 'ip' | 'prefix',
  held: number,
  cooldownMs: number,
  pairs: number,
  churn: number,
): number {
  const ds = new D(cooldownMs, unit);
  for (let e = 0; e < 8; e++) {
    const eni = benchEni(e, 29);
    ds.upsertEni(eni);
    if (unit === 'prefix')
      ds.addPrefixes(
        eni.eniId,
        Array.from({ length: 29 }, (_, p) => `10.${e}.${p}.0/28`),
      );
    else
      ds.addIps(
        eni.eniId,
        Array.from({ length: 29 }, (_, i) => `10.${e}.0.${i + 2}`),
      );
  }
  let now = 1_000_000;
  const key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });
  for (let i = 0; i < held; i++) ds.assign(key(`held${i}`), undefined, now);
  const pair = (id: string) => {
    ds.assign(key(id), undefined, now);
    ds.unassign(key(id), now);
    now += 7; // 7 ms apart: a 30 s cooldown keeps ~4,300 pairs' addresses cooling
  };
  for (let i = 0; i < churn; i++) pair(`churn${i}`);
  const t0 = performance.now();
  for (let i = 0; i < pairs; i++) pair(`pair${i}`);
  return ((performance.now() - t0) / pairs) * 1000;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pairs: { type: 'string', default: '5000' },
      rounds: { type: 'string', default: '7' },
      churn: { type: 'string', default: '2000' },
      datastore: { type: 'string' },
    },
  });
  const pairs = Number(values.pairs);
  const rounds = Number(values.rounds);
  const churn = Number(values.churn);
  const builds: Array<[string, DatastoreClass]> = [['this build', Datastore]];
  if (values.datastore) {
    const other = (await import(pathToFileURL(path.resolve(values.datastore)).href)) as { Datastore: DatastoreClass };
    builds.push([values.datastore, other.Datastore]);
  }
  const cases = [
    ['232 secondary IPs, 150 held', 'ip', 150, 0],
    ['232 secondary IPs, 150 held, 30 s cooldown', 'ip', 150, 30_000],
    ['3,712 prefix addresses, 250 held', 'prefix', 250, 0],
    ['3,712 prefix addresses, 250 held, 30 s cooldown', 'prefix', 250, 30_000],
  ] as const;
  console.log(
    `Datastore assign + release per ADD+DEL pair, 8 ENIs, medians of ${rounds} rounds of ${pairs} pairs (µs), ${machineLine(os.cpus().length)}`,
  );
  console.log(row(['addresses', ...builds.map(([n]) => n), ...(builds.length > 1 ? ['ratio'] : [])]));
  console.log(row(Array(builds.length + (builds.length > 1 ? 2 : 1)).fill('---')));
  for (const [name, unit, held, cooldown] of cases) {
    const us: number[][] = builds.map(() => []);
    for (let r = 0; r < rounds; r++)
      for (const [b, [, D]] of builds.entries()) us[b]!.push(run(D, unit, held, cooldown, pairs, churn));
    const med = us.map((xs) => quantile(xs, 0.5));
    console.log(
      row([
        name,
        ...med.map((m) => m.toFixed(1)),
        ...(builds.length > 1 ? [`${(med[0]! / med[1]!).toFixed(2)}×`] : []),
      ]),
    );
  }
}

main().catch((e: Error) => {
  console.error(e.stack);
  process.exit(1);
});
