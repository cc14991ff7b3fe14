/**
 * Start-up discovery: who this instance is (IMDSv2), its network limits
 * (DescribeInstanceTypes, at most once per start and cached across starts: see
 * `cloud/instance-limits.ts`) and its attached ENIs — read from IMDS, then confirmed with
 * one DescribeNetworkInterfaces filtered by `attachment.instance-id`, because IMDS is
 * eventually consistent and EC2 is the truth (docs/design.md#4-restore-after-restart rule 4).
 *
 * One retry layer per source, bounded, each retry logged: IMDS reads are retried here
 * (the IMDS client does not retry); EC2 calls are retried only inside {@link Ec2Api}
 * (token bucket, jittered back-off shared by the action class), with a start-up attempt
 * budget larger than the steady-state one, so a fleet restarting under throttling rides
 * out the storm without a second layer multiplying the attempts.
 */
import pRetry from 'p-retry';
import {
  Ec2Api,
  type Ec2ApiOptions,
  type Ec2CallObserver,
  type Ec2CallOptions,
  type Ec2Eni,
  type InstanceTypeLimits,
} from '../cloud/ec2.js';
import { ImdsClient, type ImdsEni, type ImdsInstance } from '../cloud/imds.js';
import { loadInstanceTypeLimits } from '../cloud/instance-limits.js';
import type { EniInventory } from '../datastore/roles.js';
import type { Logger } from '../log.js';
import { isOurEni, TAG_CREATED_AT } from '../controller/eni-lifecycle/eni-ownership.js';
import { readInventoryCache } from '../cloud/inventory-cache.js';
import type { NodeInventory } from '../cloud/node-inventory.js';
import { isIpv4Cidr, missingSubnetCidrs, subnetCidrsFromImds, vpcCidrsFromImds } from './subnet-cidrs.js';

/** Default attempts of each start-up EC2 read (bounded: ~1.5 min of jittered back-off at most). */
export const DEFAULT_DISCOVERY_EC2_ATTEMPTS = 10;

export type { NodeInventory } from '../cloud/node-inventory.js';

/** Options of {@link discoverNode}. */
export interface DiscoverOptions {
  imdsEndpoint: string;
  ec2Endpoint?: string;
  log: Logger;
  observeEc2?: Ec2CallObserver;
  /** More {@link Ec2Api} options: budget (rate, burst), attempts, timeout, metric hooks. */
  ec2Options?: Omit<Ec2ApiOptions, 'region' | 'endpoint'>;
  /** Retries of each IMDS read before giving up (default 8, backoff 0.5 s → 8 s). */
  retries?: number;
  /** Attempts of each start-up EC2 read, the first included (default {@link DEFAULT_DISCOVERY_EC2_ATTEMPTS}). */
  ec2Attempts?: number;
  /** File caching the instance type's limits across starts (omit: one DescribeInstanceTypes every start). */
  limitsCacheFile?: string;
  /**
   * This boot's ENI inventory cache (inventory-cache.ts): when it is valid for this boot,
   * instance and IMDS's ENI list, the start-up DescribeNetworkInterfaces is skipped and
   * the inventory comes from it (`source: 'cache'`). Omit: always describe.
   */
  inventoryCache?: {
    file: string;
    bootId: string;
    /**
     * A further check of a cache that passed its own (IMDS, boot, instance): a reason to
     * refuse it (the start then describes), or undefined to use it. Must not throw.
     */
    check?: (c: { managed: readonly Ec2Eni[]; limits: InstanceTypeLimits }) => Promise<string | undefined>;
  };
}

/** One IMDS read with discovery's retries; `what` names the read in each retry's log line. */
type ImdsRead = <T>(what: string, fn: () => Promise<T>) => Promise<T>;

/** Discovery's IMDS retry wrapper: `o.retries` retries (default 8), jittered back-off 0.5 s → 8 s, each failure logged. */
function imdsReader(o: DiscoverOptions): ImdsRead {
  return <T>(what: string, fn: () => Promise<T>) =>
    pRetry(fn, {
      retries: o.retries ?? 8,
      minTimeout: 500,
      maxTimeout: 8000,
      randomize: true,
      onFailedAttempt: (e) =>
        o.log.warn(
          { what, attempt: e.attemptNumber, retriesLeft: e.retriesLeft, err: e.message },
          'discovery: IMDS read failed; retrying',
        ),
    });
}

/** Per-action options of discovery's EC2 reads: `o.ec2Attempts` attempts, each retry logged (delay in ms). */
function discoveryCallOptions(o: DiscoverOptions): (action: string) => Ec2CallOptions {
  const maxAttempts = o.ec2Attempts ?? DEFAULT_DISCOVERY_EC2_ATTEMPTS;
  return (action: string): Ec2CallOptions => ({
    maxAttempts,
    onRetry: (code, attempt, delayMs) =>
      o.log.warn(
        { action, code, attempt, maxAttempts, delayMs: Math.round(delayMs) },
        'discovery: EC2 read failed; retrying',
      ),
  });
}

/** What discovery has read before the ENIs themselves: IMDS's view, the EC2 client and the type's limits. */
interface DiscoveryContext {
  o: DiscoverOptions;
  imds: ImdsClient;
  imdsRead: ImdsRead;
  instance: ImdsInstance;
  imdsEnis: ImdsEni[];
  primary: ImdsEni;
  ec2: Ec2Api;
  limits: InstanceTypeLimits;
}

/**
 * The inventory from this boot's ENI inventory cache (`source: 'cache'`), or undefined when
 * there is no cache option, the cache is not valid for this boot/instance/IMDS list, or
 * `inventoryCache.check` refuses it (each refusal logged): the caller then describes.
 */
async function inventoryFromCache(d: DiscoveryContext): Promise<NodeInventory | undefined> {
  const { o, instance, imdsEnis, limits, imds, imdsRead, primary, ec2 } = d;
  if (!o.inventoryCache) return undefined;
  const c = await readInventoryCache(o.inventoryCache.file, {
    bootId: o.inventoryCache.bootId,
    instanceId: instance.instanceId,
    imdsEnis,
  });
  const refused = c.ok ? await o.inventoryCache.check?.({ managed: c.managed, limits }) : undefined;
  if (c.ok && refused === undefined) {
    o.log.info(
      { savedAt: c.savedAt, managed: c.managed.map((e) => e.eniId) },
      "discovered instance from this boot's ENI inventory cache; EC2 confirms it in the background",
    );
    return {
      instance,
      limits,
      primary,
      vpcCidrs: vpcCidrsFromImds(imdsEnis, primary),
      subnetCidrs: await resolveSubnetCidrs(imds, imdsEnis, c.managed, imdsRead),
      managed: c.managed,
      unmanaged: c.unmanaged,
      ec2,
      imds,
      imdsEnis,
      source: 'cache',
    };
  }
  o.log.info({ reason: c.ok ? refused : c.reason }, 'ENI inventory cache not used; describing the ENIs');
  return undefined;
}

/**
 * Sorts `attached` (in place) by device index and splits it: the primary ENI (device 0) and
 * ours are managed, the rest left alone. Logs each ENI IMDS lists that EC2 does not show
 * attached, and each unmanaged ENI.
 */
function splitAttached(
  log: Logger,
  instanceId: string,
  attached: Ec2Eni[],
  imdsEnis: readonly ImdsEni[],
): { managed: Ec2Eni[]; unmanaged: Ec2Eni[] } {
  const managed: Ec2Eni[] = [];
  const unmanaged: Ec2Eni[] = [];
  for (const eni of attached.sort((a, b) => (a.attachment?.deviceIndex ?? 0) - (b.attachment?.deviceIndex ?? 0))) {
    if (eni.attachment?.deviceIndex === 0 || isOurEni(eni, instanceId)) managed.push(eni);
    else unmanaged.push(eni);
  }
  const ec2Ids = new Set(attached.map((e) => e.eniId));
  for (const e of imdsEnis) {
    if (!ec2Ids.has(e.eniId))
      log.warn({ eniId: e.eniId, mac: e.mac }, 'IMDS lists an ENI that EC2 does not show attached; ignored');
  }
  for (const e of unmanaged)
    log.info(
      { eniId: e.eniId, deviceIndex: e.attachment?.deviceIndex },
      'attached ENI not managed by eni-ipam (untagged or no_manage); left alone',
    );
  return { managed, unmanaged };
}

/**
 * Discovers the instance and its ENIs. On failure the EC2 client is closed.
 * @throws Error if IMDS cannot be read after its retries, or an EC2 read fails after its
 *         attempts (Ec2Error): ipamd cannot run blind.
 */
export async function discoverNode(o: DiscoverOptions): Promise<NodeInventory> {
  const imds = new ImdsClient({
    endpoint: o.imdsEndpoint,
    ...(o.ec2Options?.onParseError ? { onParseError: o.ec2Options.onParseError } : {}),
  });
  const imdsRead = imdsReader(o);
  // Together: neither read needs the other (one token for both, see ImdsClient).
  const [instance, imdsEnis] = await Promise.all([
    imdsRead('instance', () => imds.instance()),
    imdsRead('ENIs', () => imds.enis()),
  ]);
  const primary = imdsEnis.find((e) => e.mac === instance.primaryMac) ?? imdsEnis.find((e) => e.deviceNumber === 0);
  if (!primary) throw new Error(`IMDS lists no primary ENI (mac ${instance.primaryMac})`);
  const ec2 = new Ec2Api({
    ...o.ec2Options,
    region: instance.region,
    ...(o.ec2Endpoint ? { endpoint: o.ec2Endpoint } : {}),
    ...(o.observeEc2 ? { observe: o.observeEc2 } : {}),
  });
  const callOptions = discoveryCallOptions(o);
  let limits: InstanceTypeLimits;
  let attached: Ec2Eni[];
  try {
    // One after the other: under fleet-wide throttling, two reads at once per node only double the refused attempts.
    const l = await loadInstanceTypeLimits({
      ec2,
      instanceType: instance.instanceType,
      log: o.log,
      callOptions: callOptions('DescribeInstanceTypes'),
      ...(o.limitsCacheFile ? { cacheFile: o.limitsCacheFile } : {}),
    });
    limits = l.limits;
    o.log.info({ instanceType: instance.instanceType, source: l.source }, 'instance type limits loaded');
    const cached = await inventoryFromCache({ o, imds, imdsRead, instance, imdsEnis, primary, ec2, limits });
    if (cached) return cached;
    attached = await ec2.describeEnisByFilters(
      { 'attachment.instance-id': [instance.instanceId] },
      callOptions('DescribeNetworkInterfaces'),
    );
  } catch (e) {
    ec2.close();
    throw e;
  }

  const { managed, unmanaged } = splitAttached(o.log, instance.instanceId, attached, imdsEnis);
  o.log.info(
    {
      instanceId: instance.instanceId,
      instanceType: instance.instanceType,
      maxEnis: limits.maxEnis,
      ipv4PerEni: limits.ipv4PerEni,
      managed: managed.map((e) => e.eniId),
    },
    'discovered instance',
  );
  let subnetCidrs: Map<string, string>;
  try {
    subnetCidrs = await resolveSubnetCidrs(imds, imdsEnis, managed, imdsRead);
  } catch (e) {
    ec2.close();
    throw e;
  }
  return {
    instance,
    limits,
    primary,
    vpcCidrs: vpcCidrsFromImds(imdsEnis, primary),
    subnetCidrs,
    managed,
    unmanaged,
    ec2,
    imds,
    imdsEnis,
    source: 'ec2',
  };
}

/**
 * Why ENABLE_PREFIX_DELEGATION=true cannot work on this instance type, as one line, or
 * undefined when it can. Prefix delegation needs a Nitro instance type (AWS EC2 User
 * Guide, "Assign prefixes to network interfaces"; amazon-vpc-cni-k8s v1.9.0): the
 * DescribeInstanceTypes `Hypervisor` must be `nitro`, or the type bare metal (Nitro System).
 */
export function prefixDelegationRefusal(limits: InstanceTypeLimits): string | undefined {
  if (limits.hypervisor === 'nitro' || limits.bareMetal) return undefined;
  return (
    `ENABLE_PREFIX_DELEGATION=true is refused: instance type ${limits.instanceType} runs on the ${limits.hypervisor} hypervisor, ` +
    'and /28 prefix delegation needs a Nitro instance type; set ENABLE_PREFIX_DELEGATION=false or use a Nitro type'
  );
}

/**
 * The subnet CIDR of every managed ENI: from the ENIs IMDS listed, and for an ENI in a
 * subnet none of them is in (IMDS lags a fresh attachment) its own IMDS entry, read with
 * the IMDS retries. @throws Error naming the ENI, its MAC and subnet when IMDS never says.
 */
async function resolveSubnetCidrs(
  imds: ImdsClient,
  imdsEnis: readonly ImdsEni[],
  managed: readonly Ec2Eni[],
  imdsRead: ImdsRead,
): Promise<Map<string, string>> {
  const cidrs = subnetCidrsFromImds(imdsEnis);
  for (const eni of missingSubnetCidrs(managed, cidrs)) {
    const what = `ENI ${eni.eniId} (MAC ${eni.mac}, ${eni.subnetId})`;
    const entry = await imdsRead(`subnet CIDR of ${what}`, async () => {
      const e = await imds.eni(eni.mac);
      if (e.subnetId !== eni.subnetId) throw new Error(`IMDS puts ${eni.mac} in ${e.subnetId || 'no subnet'}`);
      return e;
    }).catch((err: Error) => {
      throw new Error(
        `discovery: IMDS gives no subnet CIDR for ${what}, so its route table cannot be set up: ${err.message}`,
      );
    });
    for (const [id, c] of subnetCidrsFromImds([entry])) cidrs.set(id, c);
    if (!cidrs.has(eni.subnetId)) throw new Error(`discovery: IMDS gives no valid subnet CIDR for ${what}`);
  }
  return cidrs;
}

/**
 * The VPC's IPv4 CIDR blocks as IMDS lists them now for the ENI `mac` (`vpc-ipv4-cidr-blocks`:
 * primary and secondary blocks), invalid entries dropped; empty when IMDS lists none.
 * One read, no retry (the caller re-reads on its period). @throws ImdsError
 */
export async function readVpcCidrs(imds: ImdsClient, mac: string): Promise<string[]> {
  return (await imds.vpcCidrs(mac)).filter(isIpv4Cidr);
}

/**
 * The subnet CIDR of a managed ENI: its subnet's from {@link NodeInventory.subnetCidrs}.
 * @throws Error naming the ENI and subnet when discovery did not resolve it (cannot happen
 *         for an inventory {@link discoverNode} returned).
 */
export function subnetCidrOf(inv: Pick<NodeInventory, 'subnetCidrs'>, eni: Ec2Eni): string {
  const cidr = inv.subnetCidrs.get(eni.subnetId);
  if (!cidr) throw new Error(`no subnet CIDR known for ENI ${eni.eniId} in ${eni.subnetId}`);
  return cidr;
}

/**
 * Puts the managed ENIs with their secondary IPs and /28 prefixes (as EC2 reports them,
 * EC2 being the truth, not IMDS) into the datastore. ENI capacity is in EC2 slots
 * (Ipv4AddressesPerInterface − 1; one slot per secondary IP or per prefix).
 */
export function loadInventory(ds: EniInventory, inv: NodeInventory, now: number): void {
  for (const eni of inv.managed) {
    const dev = eni.attachment?.deviceIndex ?? 0;
    const created = Date.parse(eni.tags[TAG_CREATED_AT] ?? '');
    ds.upsertEni({
      eniId: eni.eniId,
      mac: eni.mac,
      deviceNumber: dev,
      subnetId: eni.subnetId,
      // Its own subnet's CIDR (a foreign subnet has its own router and prefix length).
      subnetCidr: subnetCidrOf(inv, eni),
      primaryIp: eni.primaryIp,
      isPrimary: dev === 0,
      createdAtMs: Number.isFinite(created) ? Math.min(created, now) : now,
      capacity: inv.limits.ipv4PerEni - 1,
    });
    ds.addIps(eni.eniId, eni.secondaryIps);
    ds.addPrefixes(eni.eniId, eni.ipv4Prefixes);
  }
}
