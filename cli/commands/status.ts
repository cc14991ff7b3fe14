/** `eni-ipam status`: pool, ENIs, waiting ADDs, evidence sources, release freeze and why. */
import type { CommandModule } from 'yargs';
import { fetchStatus, socketHealth, type IpamdStatus } from '../ipamd-api.js';
import { globalOptions } from '../options.js';
import { paint, print, printJson, table } from '../output.js';
import { eniRows, targetsLine } from '../views.js';

/** Renders the status as text lines (table mode). */
export function renderStatus(st: IpamdStatus, health: string): string {
  const p = st.pool;
  const src = st.evidence?.sources;
  const srcText = src
    ? Object.entries(src)
        .map(([k, v]) => `${k} ${v === 'ok' ? paint('green', v) : paint('red', v)}`)
        .join(', ')
    : 'no evidence pass yet';
  const lines = [
    `node ${st.instanceId} (${st.instanceType}), ipamd ${health === 'SERVING' ? paint('green', health) : paint('red', health)}`,
    `pool (${p.mode}): total ${p.total}, assigned ${p.assigned}, available ${p.available}, cooling ${p.cooling}, short ${p.short}, over ${p.over}${p.freePrefixes !== undefined ? `, free prefixes ${p.freePrefixes}` : ''}`,
    `targets: ${targetsLine(st)}`,
    `waiting ADDs: ${st.waitingAdds}${st.lastPoolError ? `; last pool error: ${paint('yellow', st.lastPoolError)}` : ''}`,
    `releases: ${st.releasesFrozen ? `${paint('red', 'FROZEN')}: ${st.freezeReasons.join('; ')}` : paint('green', 'allowed')}`,
    `evidence: ${srcText}${st.evidence?.criEndpoint ? ` (CRI ${st.evidence.criEndpoint}` + `, passes ${st.evidence.passes ?? 0})` : ''}`,
  ];
  const ec = st.eniConfig;
  if (ec && ec.state !== 'off')
    lines.push(
      ec.state === 'ok'
        ? `ENIConfig: ${paint('green', ec.name ?? '')} (${ec.selectedBy}): subnets ${(ec.subnetIds ?? []).join(', ')}; security groups ${(ec.securityGroupIds ?? []).join(', ') || "the primary ENI's"}`
        : `ENIConfig: ${paint('red', ec.state.toUpperCase())}${ec.name !== undefined ? ` "${ec.name}"` : ''} (${ec.selectedBy}): ${ec.reason}; no ENI is created`,
    );
  if (st.quarantinedIps?.length) lines.push(`quarantined IPs: ${st.quarantinedIps.map((q) => q.ip).join(', ')}`);
  const rows = eniRows(st, []).map((e) => [
    e.eniId,
    e.deviceNumber,
    e.routeTable,
    e.primary ? 'yes' : '',
    e.capacity,
    e.total,
    e.assigned,
    e.cooling,
    e.available,
  ]);
  lines.push(
    '',
    table(['ENI', 'DEVICE', 'ROUTE TABLE', 'PRIMARY', 'CAPACITY', 'TOTAL', 'ASSIGNED', 'COOLING', 'AVAILABLE'], rows),
  );
  return lines.join('\n');
}

/** `status`: reads `/v1/status` and the gRPC health of the socket; exit 3 when either is unreachable. */
export const statusCommand: CommandModule = {
  command: 'status',
  describe: 'pool, ENIs, waiting ADDs, evidence sources, release freeze and why',
  handler: async (argv) => {
    const o = globalOptions(argv);
    const st = await fetchStatus(o);
    const health = await socketHealth(o);
    if (o.output === 'json') printJson({ health, ...st });
    else print(renderStatus(st, health));
  },
};
