/**
 * `eni-ipam status`: pool, ENIs, waiting ADDs, evidence sources, release freeze and why.
 * When ipamd is unreachable: what the checkpoint, the kernel, IMDS and EC2 say instead
 * (../offline.ts), naming each source read, with exit code 3.
 */
import type { CommandModule } from 'yargs';
import { fetchStatus, socketHealth, type IpamdStatus } from '../ipamd-api.js';
import {
  answeredWithoutIpamd,
  ipamdReason,
  offlineAllocations,
  offlineEniRows,
  readOffline,
  sourcesLine,
  unlessUnreachable,
  type OfflineNode,
} from '../offline.js';
import { globalOptions } from '../options.js';
import { emit, paint, print, table } from '../output.js';
import { eniRows, targetsLine } from '../views.js';

/** The status document without ipamd (`--output json|yaml`). */
export function offlineStatusDoc(n: OfflineNode) {
  const allocs = offlineAllocations(n);
  const k = n.kernel.ok ? n.kernel.data : undefined;
  const src = (r: { ok: boolean; from: string; error?: string; skipped?: string }) =>
    r.ok
      ? { from: r.from, state: 'ok' }
      : { from: r.from, state: 'error' in r ? 'unreadable' : 'skipped', why: r.error ?? r.skipped };
  return {
    health: 'UNREACHABLE',
    ipamd: n.ipamdError,
    instance: n.instance.ok
      ? { instanceId: n.instance.data.instanceId, instanceType: n.instance.data.instanceType }
      : null,
    sources: { checkpoint: src(n.checkpoint), kernel: src(n.kernel), imds: src(n.instance), ec2: src(n.ec2) },
    allocations: n.checkpoint.ok ? allocs.length : null,
    cooling: n.checkpoint.ok ? n.checkpoint.data.cooldown.length : null,
    kernel: k
      ? {
          podRoutes: k.pods.size,
          ruleOnlyIps: k.rulesOnly.length,
          allocationsWired: allocs.filter((a) => k.pods.has(a.ipv4)).length,
        }
      : null,
    enis: offlineEniRows(n),
  };
}

/** Renders the status without ipamd as text lines (table mode). */
export function renderOfflineStatus(n: OfflineNode): string {
  const d = offlineStatusDoc(n);
  const lines = [
    `ipamd ${paint('red', 'UNREACHABLE')} (${n.ipamdError}): answering from the node's other sources`,
    `node ${d.instance ? `${d.instance.instanceId} (${d.instance.instanceType})` : 'unknown (IMDS not read)'}`,
    d.allocations !== null ? `checkpoint: ${d.allocations} allocations, ${d.cooling} cooling` : 'checkpoint: not read',
    d.kernel
      ? `kernel: ${d.kernel.podRoutes} pod routes, ${d.kernel.ruleOnlyIps} rule-only IPs${d.allocations !== null ? `; ${d.kernel.allocationsWired} of the checkpoint's ${d.allocations} allocations wired` : ''}`
      : 'kernel: not read',
    sourcesLine(n),
    '',
    table(
      ['ENI', 'DEVICE', 'ROUTE TABLE', 'SECONDARY IPS', 'PREFIXES', 'ASSIGNED', 'WIRED'],
      d.enis.map((r) => [r.eniId, r.deviceNumber, r.routeTable, r.secondaryIps, r.prefixes, r.assigned, r.wired]),
    ),
  ];
  return lines.join('\n');
}

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

/**
 * `status`: reads `/v1/status` and the gRPC health of the socket; exit 3 when either is
 * unreachable (with introspection down, after answering from the other sources).
 */
export const statusCommand: CommandModule = {
  command: 'status',
  describe: 'pool, ENIs, waiting ADDs, evidence sources, release freeze and why',
  handler: async (argv) => {
    const o = globalOptions(argv);
    const st = await unlessUnreachable(() => fetchStatus(o));
    if (st instanceof Error) {
      const n = await readOffline(o, ipamdReason(st));
      if (o.output === 'json' || o.output === 'yaml') emit(o.output, offlineStatusDoc(n));
      else print(renderOfflineStatus(n));
      throw answeredWithoutIpamd(n);
    }
    const health = await socketHealth(o);
    if (o.output === 'json' || o.output === 'yaml') emit(o.output, { health, ...st });
    else print(renderStatus(st, health));
  },
};
