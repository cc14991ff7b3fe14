/** `eni-ipam pods` and `eni-ipam enis`: pod ↔ IP ↔ ENI ↔ device number ↔ route table. */
import type { CommandModule } from 'yargs';
import { fetchAllocations, fetchStatus } from '../ipamd-api.js';
import { globalOptions } from '../options.js';
import { print, printJson, table } from '../output.js';
import { eniRows, podRows } from '../views.js';

/** `pods`: one row per allocation, joined with its ENI's device number and route table. */
export const podsCommand: CommandModule = {
  command: 'pods',
  describe: 'every allocation: pod, IP, ENI, device number, route table, sandbox',
  handler: async (argv) => {
    const o = globalOptions(argv);
    const [st, allocs] = await Promise.all([fetchStatus(o), fetchAllocations(o)]);
    const rows = podRows(st, allocs);
    if (o.output === 'json') return printJson(rows);
    print(
      table(
        ['NAMESPACE', 'POD', 'IP', 'ENI', 'DEVICE', 'ROUTE TABLE', 'SANDBOX', 'IFNAME'],
        rows.map((r) => [
          r.namespace,
          r.pod,
          r.ip,
          r.eniId,
          r.deviceNumber,
          r.routeTable,
          r.containerID.slice(0, 13),
          r.ifName,
        ]),
      ),
    );
  },
};

/** `enis`: one row per ENI ipamd serves from, with its pods. */
export const enisCommand: CommandModule = {
  command: 'enis',
  describe: 'every ENI: device number, route table, capacity and use, and its pods',
  handler: async (argv) => {
    const o = globalOptions(argv);
    const [st, allocs] = await Promise.all([fetchStatus(o), fetchAllocations(o)]);
    const rows = eniRows(st, allocs);
    if (o.output === 'json') return printJson(rows);
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
  },
};
