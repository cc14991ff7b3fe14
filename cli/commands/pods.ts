/**
 * `eni-ipam pods` and `eni-ipam enis`: pod ↔ IP ↔ ENI ↔ device number ↔ route table.
 * From ipamd's introspection; when ipamd is unreachable, from the checkpoint, the kernel
 * and EC2 (../offline.ts), saying so, with exit code 3.
 */
import type { CommandModule } from 'yargs';
import { addressRowsFromEc2, addressRowsFromIntrospection, type AddressRow } from '../address-rows.js';
import { fetchAllocations, fetchStatus, getJson } from '../ipamd-api.js';
import {
  answeredWithoutIpamd,
  ipamdReason,
  offlineAllocations,
  offlineDevices,
  offlineEniRows,
  readOffline,
  sourcesLine,
  unlessUnreachable,
} from '../offline.js';
import { globalOptions, type GlobalOptions } from '../options.js';
import { emit, print, table } from '../output.js';
import { eniRows, filterPods, parsePodFilter, podRows, statusDevices, type PodRow } from '../views.js';

/** The pods table; `wired` (ipamd down) adds the kernel's view of each address. */
function podsTable(rows: PodRow[], wired?: (ip: string) => string): string {
  return table(
    ['NAMESPACE', 'POD', 'IP', 'ENI', 'DEVICE', 'ROUTE TABLE', 'SANDBOX', 'IFNAME', ...(wired ? ['WIRED'] : [])],
    rows.map((r) => [
      r.namespace,
      r.pod,
      r.ip,
      r.eniId,
      r.deviceNumber,
      r.routeTable,
      r.containerID.slice(0, 13),
      r.ifName,
      ...(wired ? [wired(r.ip)] : []),
    ]),
  );
}

/** `pods [filter]`: one row per allocation, joined with its ENI's device number and route table. */
export const podsCommand: CommandModule = {
  command: 'pods [filter]',
  describe:
    'every allocation: pod, IP, ENI, device number, route table, sandbox (NAMESPACE/NAME, NAMESPACE/ or NAME filters)',
  builder: (y) =>
    y.positional('filter', {
      type: 'string',
      describe: "NAMESPACE/NAME, NAMESPACE/ or NAME; '*' is a wildcard (e.g. shop/web-*)",
    }),
  handler: async (argv) => {
    const o = globalOptions(argv);
    const f = argv.filter !== undefined ? parsePodFilter(String(argv.filter)) : undefined;
    const live = await unlessUnreachable(async () => {
      const [st, allocs] = await Promise.all([fetchStatus(o), fetchAllocations(o)]);
      return podRows(statusDevices(st), allocs);
    });
    if (!(live instanceof Error)) {
      const rows = filterPods(live, f);
      if (o.output === 'json' || o.output === 'yaml') return emit(o.output, rows);
      return print(podsTable(rows));
    }
    const n = await readOffline(o, ipamdReason(live));
    const rows = filterPods(podRows(offlineDevices(n), offlineAllocations(n)), f);
    if (o.output === 'json' || o.output === 'yaml') emit(o.output, rows);
    else {
      const k = n.kernel.ok ? n.kernel.data : undefined;
      print(`ipamd unreachable (${n.ipamdError}): allocations from the checkpoint\n${sourcesLine(n)}\n`);
      print(podsTable(rows, (ip) => (k ? (k.pods.has(ip) ? 'yes' : 'no') : '?')));
    }
    throw answeredWithoutIpamd(n);
  },
};

/** The `-o wide` table: one row per address. */
function addressTable(rows: AddressRow[]): string {
  return table(
    ['ENI', 'DEVICE', 'ROUTE TABLE', 'ADDRESS', 'STATE', 'POD'],
    rows.map((r) => [r.eniId, r.deviceNumber, r.routeTable, r.address, r.state, r.pod || '-']),
  );
}

/** `enis`: one row per ENI with its counts and pods; `-o wide`: one row per address. */
export const enisCommand: CommandModule = {
  command: 'enis',
  describe: 'every ENI: device number, route table, capacity and use, and its pods (-o wide: one row per address)',
  handler: async (argv) => {
    const o = globalOptions(argv);
    const live = await unlessUnreachable(() => liveEnis(o));
    if (!(live instanceof Error)) return;
    const n = await readOffline(o, ipamdReason(live));
    const wide = n.ec2.ok ? addressRowsFromEc2(n.ec2.data, offlineAllocations(n)) : [];
    const rows = offlineEniRows(n);
    if (o.output === 'json' || o.output === 'yaml') emit(o.output, rows);
    else {
      print(`ipamd unreachable (${n.ipamdError}): ENIs from EC2, allocations from the checkpoint\n${sourcesLine(n)}\n`);
      if (o.output === 'wide') print(addressTable(wide));
      else
        print(
          table(
            ['ENI', 'DEVICE', 'ROUTE TABLE', 'SECONDARY IPS', 'PREFIXES', 'ASSIGNED', 'WIRED'],
            rows.map((r) => [r.eniId, r.deviceNumber, r.routeTable, r.secondaryIps, r.prefixes, r.assigned, r.wired]),
          ),
        );
    }
    throw answeredWithoutIpamd(n);
  },
};

/** Prints the ENIs as ipamd serves them. @throws CliError (unreachable) when it does not answer. */
async function liveEnis(o: GlobalOptions): Promise<void> {
  if (o.output === 'wide') {
    const rows = addressRowsFromIntrospection(await getJson(o, '/v1/enis'));
    return print(addressTable(rows));
  }
  const [st, allocs] = await Promise.all([fetchStatus(o), fetchAllocations(o)]);
  const rows = eniRows(st, allocs);
  if (o.output === 'json' || o.output === 'yaml') return emit(o.output, rows);
  print(
    table(
      ['ENI', 'DEVICE', 'ROUTE TABLE', 'CAPACITY', 'TOTAL', 'ASSIGNED', 'COOLING', 'AVAILABLE', 'PODS'],
      rows.map((r) => [
        r.eniId,
        r.deviceNumber,
        r.routeTable,
        r.capacity,
        r.total,
        r.assigned,
        r.cooling,
        r.available,
        r.pods.join(', ') || '-',
      ]),
    ),
  );
}
