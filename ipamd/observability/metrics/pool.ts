/**
 * Pool metrics, sampled from the datastore at scrape time (prom-client `collect()`), so
 * they can never drift from the state they describe: the amazon-vpc-cni-k8s gauges
 * (`awscni_total_ip_addresses`, `awscni_assigned_ip_addresses`, `awscni_eni_allocated`,
 * `awscni_eni_max`, `awscni_ip_max`, `awscni_total_ipv4_prefixes`,
 * `awscni_assigned_ip_per_eni{eni}`, `awscni_assigned_ip_per_cidr{cidr}`) and ours
 * (`eni_ipam_*`: IPs per state, per-ENI addresses per state, waiting ADDs, quarantine).
 */
import { monoNow } from '../../clock.js';
import { Gauge, type Registry } from 'prom-client';
import type { DatastoreCounts } from '../../datastore/types.js';
import type { MetricsSources } from './sources.js';

/** Registers the pool gauges on `registry`; `src()` is read at each scrape (undefined: every gauge 0 / no series). */
export function registerPoolMetrics(registry: Registry, src: () => MetricsSources | undefined): void {
  const registers = [registry];
  const now = () => (src()?.now ?? monoNow)();
  const counts = (): DatastoreCounts | undefined => src()?.ds.counts(now());
  const sampled = (name: string, help: string, pick: (c: DatastoreCounts) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const c = counts();
        this.set(c ? pick(c) : 0);
      },
    });
  const ctx: PoolGaugeContext = { registers, src, now, counts, sampled };
  upstreamPoolGauges(ctx);
  ownPoolGauges(ctx);
}

/** What the pool gauges share: the registry, the sources, the clock, counts and a counts-sampled gauge. */
interface PoolGaugeContext {
  registers: Registry[];
  src: () => MetricsSources | undefined;
  now: () => number;
  counts: () => DatastoreCounts | undefined;
  sampled: (name: string, help: string, pick: (c: DatastoreCounts) => number) => Gauge;
}

/** amazon-vpc-cni-k8s's pool gauges, same names and help. */
function upstreamPoolGauges({ registers, src, now, sampled }: PoolGaugeContext): void {
  sampled('awscni_total_ip_addresses', 'The total number of IP addresses', (c) => c.total);
  // IPv6 mode: a pod's address is its /128 (upstream's datastore counts those there too).
  new Gauge({
    name: 'awscni_assigned_ip_addresses',
    help: 'The number of IP addresses assigned to pods',
    registers,
    collect() {
      const v6 = src()?.ipv6?.();
      this.set(v6?.mode === 'ipv6' ? v6.assigned : (src()?.ds.counts(now()).assigned ?? 0));
    },
  });
  sampled('awscni_eni_allocated', 'The number of ENIs allocated', (c) => c.enis);
  new Gauge({
    name: 'awscni_eni_max',
    help: 'The maximum number of ENIs that can be attached to the instance, accounting for MAX_ENI',
    registers,
    collect() {
      this.set(src()?.limits?.().maxEni ?? 0);
    },
  });
  new Gauge({
    name: 'awscni_ip_max',
    help: 'The maximum number of IP addresses that can be allocated to the instance',
    registers,
    collect() {
      this.set(src()?.limits?.().ipMax ?? 0);
    },
  });
  new Gauge({
    name: 'awscni_total_ipv4_prefixes',
    help: "The total number of IPv4 /28 prefixes on the node's ENIs (0 without prefix delegation)",
    registers,
    collect() {
      const ds = src()?.ds;
      this.set(
        ds?.listEnis && ds.eniPrefixes ? ds.listEnis().reduce((n, e) => n + ds.eniPrefixes!(e.eniId).length, 0) : 0,
      );
    },
  });
  new Gauge({
    name: 'awscni_assigned_ip_per_eni',
    help: 'The number of IP addresses assigned to pods, per ENI',
    labelNames: ['eni'],
    registers,
    collect() {
      this.reset();
      for (const v of src()?.ds.poolViews?.(now()) ?? []) this.set({ eni: v.eniId }, v.assigned);
    },
  });
  new Gauge({
    name: 'awscni_assigned_ip_per_cidr',
    help: 'The number of IP addresses assigned to pods per CIDR: each secondary IP as a /32, each delegated /28 prefix',
    labelNames: ['cidr'],
    registers,
    collect() {
      this.reset();
      const ds = src()?.ds;
      if (!ds?.listEnis || !ds.eniIps || !ds.eniPrefixes || !ds.prefixOf || !ds.allocations) return;
      const assigned = new Set(ds.allocations().map((a) => a.ipv4));
      for (const eni of ds.listEnis()) {
        const perPrefix = new Map(ds.eniPrefixes(eni.eniId).map((p) => [p, 0]));
        for (const ip of ds.eniIps(eni.eniId)) {
          const p = ds.prefixOf(ip);
          if (p !== undefined) perPrefix.set(p, (perPrefix.get(p) ?? 0) + (assigned.has(ip) ? 1 : 0));
          else this.set({ cidr: `${ip}/32` }, assigned.has(ip) ? 1 : 0);
        }
        for (const [cidr, n] of perPrefix) this.set({ cidr }, n);
      }
    },
  });
}

/** eni-ipam's own pool gauges (`eni_ipam_*`). */
function ownPoolGauges({ registers, src, now, counts, sampled }: PoolGaugeContext): void {
  ipv6Gauges(registers, src);
  new Gauge({
    name: 'eni_ipam_ip_addresses',
    help: 'Secondary IPs on the node by state (available, assigned, cooling, releasing, unverified)',
    labelNames: ['state'],
    registers,
    collect() {
      const c = counts();
      for (const state of ['available', 'assigned', 'cooling', 'releasing', 'unverified'] as const)
        this.set({ state }, c ? c[state] : 0);
    },
  });
  sampled(
    'eni_ipam_cooling_ip_addresses',
    'Released IPs still in IP_COOLDOWN_PERIOD: neither available nor assigned',
    (c) => c.cooling,
  );
  new Gauge({
    name: 'eni_ipam_eni_ip_addresses',
    help: 'Addresses on each ENI by state: assigned (used by pods), available (free to hand out now), cooling, other (releasing or unverified); capacity is what the ENI may hold',
    labelNames: ['eni', 'state'],
    registers,
    collect() {
      this.reset();
      const ds = src()?.ds;
      const t = now();
      for (const v of ds?.poolViews?.(t) ?? []) {
        const other =
          ds?.eniIps && ds.ipState
            ? ds.eniIps(v.eniId).filter((ip) => /^(releasing|unverified)$/.test(ds.ipState!(ip, t) ?? '')).length
            : 0;
        this.set({ eni: v.eniId, state: 'assigned' }, v.assigned);
        this.set({ eni: v.eniId, state: 'cooling' }, v.cooling);
        this.set({ eni: v.eniId, state: 'other' }, other);
        this.set({ eni: v.eniId, state: 'available' }, Math.max(v.total - v.assigned - v.cooling - other, 0));
        this.set({ eni: v.eniId, state: 'capacity' }, v.capacity);
      }
    },
  });
  new Gauge({
    name: 'eni_ipam_quarantined_ips',
    help: 'IPs quarantined after a duplicate was found at wiring time: never handed out until the other route is gone',
    registers,
    collect() {
      this.set(src()?.quarantined?.() ?? 0);
    },
  });
  new Gauge({
    name: 'eni_ipam_waiting_adds',
    help: 'ADDs waiting for the pool to refill',
    registers,
    collect() {
      this.set(src()?.pool?.waiting ?? 0);
    },
  });
}

/** `ipv6`/`dual` mode: the /80 prefixes and the IPv6 addresses by state (no series in `ipv4` mode). */
function ipv6Gauges(registers: Registry[], src: () => MetricsSources | undefined): void {
  new Gauge({
    name: 'eni_ipam_ipv6_prefixes',
    help: "IPv6 /80 prefixes pods are served from (the primary ENI's; 0 in ipv4 mode)",
    registers,
    collect() {
      this.set(src()?.ipv6?.().prefixes ?? 0);
    },
  });
  new Gauge({
    name: 'eni_ipam_ipv6_addresses',
    help: 'IPv6 /128s held by pods (assigned) and IPv6 or egress addresses kept out of use (quarantined)',
    labelNames: ['state'],
    registers,
    collect() {
      this.reset();
      const v6 = src()?.ipv6?.();
      if (!v6) return;
      this.set({ state: 'assigned' }, v6.assigned);
      this.set({ state: 'quarantined' }, v6.quarantined);
    },
  });
}
