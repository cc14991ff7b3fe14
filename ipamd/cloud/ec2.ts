/**
 * The one EC2 client wrapper of ipamd, and the implementation of the {@link Ec2Port} (the
 * narrow part the controller uses) that ipamd runs with: every EC2 call goes through {@link Ec2Api}, which
 * normalises the SDK shapes, maps errors to {@link Ec2Error} with the EC2 error code
 * (AWS EC2 API Reference, "Error codes"), and spends the node's EC2 budget carefully:
 *
 * - every attempt takes a token from a node-local bucket ({@link Ec2Budget}:
 *   `ENI_IPAM_EC2_RATE` calls/s, `ENI_IPAM_EC2_BURST`) and waits out any back-off hold;
 * - throttling (`RequestLimitExceeded`...) and server errors (5xx) put a jittered,
 *   exponentially growing hold on the action class and are retried (server errors and
 *   timeouts only for actions that are safe to repeat: see `retry.ts`);
 * - each attempt has its own timeout (`ENI_IPAM_EC2_TIMEOUT`, an AbortSignal);
 * - each attempt is reported to `observe` with its action, outcome and latency.
 *
 * Retries are ours, not the SDK's: the SDK client runs with `maxAttempts: 1`. Two retry
 * layers would multiply (SDK attempts × ours) into a retry storm, SDK retries would
 * bypass the node-local bucket and the per-attempt metrics, and the SDK's backoff is
 * per call, while ours is shared by every call of the class.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { EC2Client, Filter, NetworkInterface, _InstanceType } from '@aws-sdk/client-ec2';

/** The SDK module, loaded on the first EC2 call (importing it costs ~90 MiB and ~1 s of start-up). */
type Sdk = typeof import('@aws-sdk/client-ec2');
let sdkModule: Promise<Sdk> | undefined;
const loadSdk = (): Promise<Sdk> => (sdkModule ??= import('@aws-sdk/client-ec2'));
import { Ec2Budget } from './ec2-budget.js';
import type { BackoffPolicy, Ec2FailureKind } from './retry.js';
import { Ec2Error, type Ec2Eni, type Ec2Port } from './ec2-port.js';

export { Ec2Error, type CreateEniRequest, type Ec2Eni, type Ec2Port } from './ec2-port.js';

/** Network limits of an instance type (DescribeInstanceTypes `NetworkInfo`). */
export interface InstanceTypeLimits {
  instanceType: string;
  maxEnis: number;
  ipv4PerEni: number;
  /** `nitro`, `xen`, or `unknown` (bare metal types report none). */
  hypervisor: string;
  /** A bare metal type (no hypervisor; built on the Nitro System). */
  bareMetal: boolean;
}

/** Details of one EC2 attempt given to {@link Ec2CallObserver}. */
export interface Ec2CallInfo {
  /** 1-based attempt number within the call. */
  attempt: number;
  /** HTTP status of the answer (undefined when none came: timeout, connection error). */
  httpStatus?: number;
  /** Failure kind (undefined on success). */
  kind?: Ec2FailureKind;
}

/**
 * Counter hook: called once per EC2 *attempt* (retries included) with the action, the
 * outcome ("ok" or the error code) and the latency in ms (the wire time, without the
 * wait for a token).
 */
export type Ec2CallObserver = (action: string, outcome: string, ms: number, info?: Ec2CallInfo) => void;

/** Called before an attempt is retried: the failure code, the attempt that failed and the back-off in ms. */
export type Ec2RetryObserver = (action: string, code: string, attempt: number, delayMs: number) => void;

/** Called when an attempt had to wait (ms) for a token or a back-off hold before it was sent. */
export type Ec2WaitObserver = (action: string, waitMs: number) => void;

/** Default node-local EC2 call rate (calls/s). */
export const DEFAULT_EC2_RATE = 5;
/** Default node-local EC2 burst (calls). */
export const DEFAULT_EC2_BURST = 20;
/** Default attempts per call, the first included. */
export const DEFAULT_EC2_MAX_ATTEMPTS = 5;
/** Default timeout of one attempt (ms). */
export const DEFAULT_EC2_TIMEOUT_MS = 10_000;

/** Options of {@link Ec2Api}. */
export interface Ec2ApiOptions {
  region: string;
  /** AWS_EC2_ENDPOINT; unset = the SDK's regional endpoint. */
  endpoint?: string;
  /** Attempts per call, the first included (default {@link DEFAULT_EC2_MAX_ATTEMPTS}); the SDK itself makes one. */
  maxAttempts?: number;
  /** Timeout of one attempt in ms (default {@link DEFAULT_EC2_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Node-local call rate in calls/s (default {@link DEFAULT_EC2_RATE}). */
  ratePerSecond?: number;
  /** Node-local burst in calls (default {@link DEFAULT_EC2_BURST}). */
  burst?: number;
  /** Back-off steps (default 0.5 s doubling to 20 s). */
  backoff?: BackoffPolicy;
  observe?: Ec2CallObserver;
  onRetry?: Ec2RetryObserver;
  onWait?: Ec2WaitObserver;
}

/**
 * Per-call overrides of {@link Ec2Api}'s retry policy (start-up discovery gives its few
 * reads a larger, still bounded, attempt budget so a fleet-wide throttling storm does
 * not fail the start, without a second retry layer on top).
 */
export interface Ec2CallOptions {
  /** Attempts for this call, the first included (default: the client's `maxAttempts`). */
  maxAttempts?: number;
  /** Called before each retry of this call (after the client-wide `onRetry`). */
  onRetry?: (code: string, attempt: number, delayMs: number) => void;
}

/** Normalised EC2 operations used by ipamd. All methods throw {@link Ec2Error}. */
export class Ec2Api {
  /** The SDK client, made on the first call (see {@link loadSdk}). */
  private client?: EC2Client;
  /** The node's EC2 budget (token bucket + back-off holds). */
  readonly budget: Ec2Budget;
  private readonly timeoutMs: number;
  private readonly maxAttempts: number;
  private readonly o: Ec2ApiOptions;
  private readonly closing = new AbortController();

  /** @throws RangeError for a rate ≤ 0, a burst < 1, maxAttempts < 1 or timeoutMs ≤ 0. */
  constructor(opts: Ec2ApiOptions) {
    this.o = opts;
    this.maxAttempts = opts.maxAttempts ?? DEFAULT_EC2_MAX_ATTEMPTS;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_EC2_TIMEOUT_MS;
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1)
      throw new RangeError(`maxAttempts must be a whole number >= 1, got ${this.maxAttempts}`);
    if (!(this.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${this.timeoutMs}`);
    this.budget = new Ec2Budget({
      ratePerSecond: opts.ratePerSecond ?? DEFAULT_EC2_RATE,
      burst: opts.burst ?? DEFAULT_EC2_BURST,
      ...(opts.backoff ? { backoff: opts.backoff } : {}),
    });
  }

  /** Runs `fn` with the SDK client and module, loading them on first use. */
  private async sdk<T>(fn: (c: EC2Client, m: Sdk) => Promise<T>): Promise<T> {
    const m = await loadSdk();
    this.client ??= new m.EC2Client({
      region: this.o.region,
      ...(this.o.endpoint ? { endpoint: this.o.endpoint } : {}),
      maxAttempts: 1,
    });
    return fn(this.client, m);
  }

  /**
   * Aborts calls waiting for a token or a back-off hold and calls in flight (they fail
   * with code `Aborted`); later calls fail at once. For shutdown.
   */
  close(): void {
    this.closing.abort();
  }

  /** Network limits of one instance type (DescribeInstanceTypes `NetworkInfo`, `Hypervisor`, `BareMetal`). */
  async instanceTypeLimits(instanceType: string, opts?: Ec2CallOptions): Promise<InstanceTypeLimits> {
    const out = await this.call(
      'DescribeInstanceTypes',
      (o) =>
        this.sdk((c, m) =>
          c.send(new m.DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] }), o),
        ),
      opts,
    );
    const t = out.InstanceTypes?.[0];
    const ni = t?.NetworkInfo;
    if (!t || !ni?.MaximumNetworkInterfaces || !ni.Ipv4AddressesPerInterface) {
      throw new Ec2Error('DescribeInstanceTypes', 'IncompleteResponse', `no network limits for ${instanceType}`);
    }
    return {
      instanceType,
      maxEnis: ni.MaximumNetworkInterfaces,
      ipv4PerEni: ni.Ipv4AddressesPerInterface,
      hypervisor: t.Hypervisor ?? 'unknown',
      bareMetal: t.BareMetal ?? false,
    };
  }

  /** Describes ENIs by id (any unknown id fails the whole call with NotFound, as EC2 does). */
  async describeEnis(eniIds: string[]): Promise<Ec2Eni[]> {
    if (eniIds.length === 0) return [];
    return this.describeEnisWhere({ NetworkInterfaceIds: eniIds });
  }

  /** Describes ENIs matching filters, following NextToken pages (`opts` apply to each page). */
  async describeEnisByFilters(filters: Record<string, string[]>, opts?: Ec2CallOptions): Promise<Ec2Eni[]> {
    const Filters: Filter[] = Object.entries(filters).map(([Name, Values]) => ({ Name, Values }));
    return this.describeEnisWhere({ Filters }, opts);
  }

  /** The IPv4 CIDR and free-address count of a subnet. */
  async describeSubnet(subnetId: string): Promise<{ cidr: string; availableIps: number; vpcId: string }> {
    const out = await this.call('DescribeSubnets', (o) =>
      this.sdk((c, m) => c.send(new m.DescribeSubnetsCommand({ SubnetIds: [subnetId] }), o)),
    );
    const s = out.Subnets?.[0];
    if (!s?.CidrBlock) throw new Ec2Error('DescribeSubnets', 'IncompleteResponse', `subnet ${subnetId} not described`);
    return { cidr: s.CidrBlock, availableIps: s.AvailableIpAddressCount ?? 0, vpcId: s.VpcId ?? '' };
  }

  /**
   * Creates an ENI with tags and `secondaryCount` secondary IPs, or (prefix delegation)
   * `prefixCount` /28 IPv4 prefixes (`Ipv4PrefixCount`; EC2 refuses both in one request);
   * returns it (status `available`).
   */
  async createEni(p: {
    subnetId: string;
    description: string;
    tags: Record<string, string>;
    secondaryCount: number;
    prefixCount?: number;
    securityGroupIds?: string[];
  }): Promise<Ec2Eni> {
    const out = await this.call('CreateNetworkInterface', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.CreateNetworkInterfaceCommand({
            SubnetId: p.subnetId,
            Description: p.description,
            ...(p.secondaryCount > 0 ? { SecondaryPrivateIpAddressCount: p.secondaryCount } : {}),
            ...((p.prefixCount ?? 0) > 0 ? { Ipv4PrefixCount: p.prefixCount } : {}),
            ...(p.securityGroupIds?.length ? { Groups: p.securityGroupIds } : {}),
            TagSpecifications: [
              {
                ResourceType: 'network-interface',
                Tags: Object.entries(p.tags).map(([Key, Value]) => ({ Key, Value })),
              },
            ],
          }),
          o,
        ),
      ),
    );
    if (!out.NetworkInterface?.NetworkInterfaceId)
      throw new Ec2Error('CreateNetworkInterface', 'IncompleteResponse', 'no NetworkInterfaceId');
    return normaliseEni(out.NetworkInterface);
  }

  /** Attaches an ENI at a device index; returns the attachment id. */
  async attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string> {
    const out = await this.call('AttachNetworkInterface', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.AttachNetworkInterfaceCommand({
            NetworkInterfaceId: eniId,
            InstanceId: instanceId,
            DeviceIndex: deviceIndex,
          }),
          o,
        ),
      ),
    );
    if (!out.AttachmentId) throw new Ec2Error('AttachNetworkInterface', 'IncompleteResponse', 'no AttachmentId');
    return out.AttachmentId;
  }

  /** Sets DeleteOnTermination on an attachment, so terminating the instance frees the ENI. */
  async setDeleteOnTermination(eniId: string, attachmentId: string): Promise<void> {
    await this.call('ModifyNetworkInterfaceAttribute', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.ModifyNetworkInterfaceAttributeCommand({
            NetworkInterfaceId: eniId,
            Attachment: { AttachmentId: attachmentId, DeleteOnTermination: true },
          }),
          o,
        ),
      ),
    );
  }

  /** Assigns `count` secondary IPs to an ENI in one call; returns them. */
  async assignIps(eniId: string, count: number): Promise<string[]> {
    const out = await this.call('AssignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: count }),
          o,
        ),
      ),
    );
    return (out.AssignedPrivateIpAddresses ?? []).map((a) => a.PrivateIpAddress ?? '').filter(Boolean);
  }

  /** Unassigns secondary IPs from an ENI in one call. */
  async unassignIps(eniId: string, ips: string[]): Promise<void> {
    if (ips.length === 0) return;
    await this.call('UnassignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, PrivateIpAddresses: ips }), o),
      ),
    );
  }

  /**
   * Prefix delegation: assigns `count` /28 IPv4 prefixes to an ENI in one
   * AssignPrivateIpAddresses call with `Ipv4PrefixCount` (AWS EC2 User Guide, "Assign
   * prefixes to network interfaces"; Nitro instance types only).
   * @returns the assigned prefixes (`a.b.c.d/28`). @throws Ec2Error
   */
  async assignPrefixes(eniId: string, count: number): Promise<string[]> {
    const out = await this.call('AssignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: count }), o),
      ),
    );
    return (out.AssignedIpv4Prefixes ?? []).map((a) => a.Ipv4Prefix ?? '').filter(Boolean);
  }

  /** Prefix delegation: unassigns /28 IPv4 prefixes from an ENI in one UnassignPrivateIpAddresses call (`Ipv4Prefix.N`). @throws Ec2Error */
  async unassignPrefixes(eniId: string, prefixes: string[]): Promise<void> {
    if (prefixes.length === 0) return;
    await this.call('UnassignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4Prefixes: prefixes }), o),
      ),
    );
  }

  /** Detaches an ENI (never forced: a forced detach can strand the OS's view, per the EC2 docs). */
  async detachEni(attachmentId: string): Promise<void> {
    await this.call('DetachNetworkInterface', (o) =>
      this.sdk((c, m) => c.send(new m.DetachNetworkInterfaceCommand({ AttachmentId: attachmentId, Force: false }), o)),
    );
  }

  /** Deletes an ENI; `InvalidNetworkInterfaceID.NotFound` counts as success (already gone). */
  async deleteEni(eniId: string): Promise<void> {
    try {
      await this.call('DeleteNetworkInterface', (o) =>
        this.sdk((c, m) => c.send(new m.DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }), o)),
      );
    } catch (e) {
      if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') return;
      throw e;
    }
  }

  /** Adds or overwrites tags on a resource. */
  async createTags(resourceId: string, tags: Record<string, string>): Promise<void> {
    await this.call('CreateTags', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.CreateTagsCommand({
            Resources: [resourceId],
            Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
          }),
          o,
        ),
      ),
    );
  }

  private async describeEnisWhere(
    input: { NetworkInterfaceIds?: string[]; Filters?: Filter[] },
    opts?: Ec2CallOptions,
  ): Promise<Ec2Eni[]> {
    const out: Ec2Eni[] = [];
    let NextToken: string | undefined;
    do {
      const page = await this.call(
        'DescribeNetworkInterfaces',
        (o) =>
          this.sdk((c, m) =>
            c.send(
              new m.DescribeNetworkInterfacesCommand({
                ...input,
                ...(NextToken ? { NextToken } : {}),
                ...(input.NetworkInterfaceIds ? {} : { MaxResults: 1000 }),
              }),
              o,
            ),
          ),
        opts,
      );
      for (const ni of page.NetworkInterfaces ?? []) out.push(normaliseEni(ni));
      NextToken = page.NextToken;
    } while (NextToken);
    return out;
  }

  /**
   * One EC2 call with the budget, retries and per-attempt timeouts described in the
   * module docstring; `opts` override the attempt budget for this call.
   * @throws Ec2Error with the last attempt's code.
   */
  private async call<T>(
    action: string,
    send: (o: { abortSignal: AbortSignal }) => Promise<T>,
    opts?: Ec2CallOptions,
  ): Promise<T> {
    const maxAttempts = opts?.maxAttempts ?? this.maxAttempts;
    for (let attempt = 1; ; attempt++) {
      if (this.closing.signal.aborted) throw aborted(action, attempt);
      const waitMs = this.budget.reserve(action);
      if (waitMs > 0) {
        this.o.onWait?.(action, waitMs);
        try {
          await sleep(waitMs, undefined, { signal: this.closing.signal });
        } catch {
          throw aborted(action, attempt);
        }
      }
      const t0 = performance.now();
      try {
        const out = await send({
          abortSignal: AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.closing.signal]),
        });
        this.budget.onSuccess(action);
        this.o.observe?.(action, 'ok', performance.now() - t0, { attempt, httpStatus: 200 });
        return out;
      } catch (e) {
        const ms = performance.now() - t0;
        const err = e as {
          name?: string;
          Code?: string;
          code?: string;
          message?: string;
          $metadata?: { httpStatusCode?: number };
        };
        const code =
          err.Code ??
          (err.$metadata?.httpStatusCode === undefined && typeof err.code === 'string' ? err.code : undefined) ??
          err.name ??
          'UnknownError';
        const status = err.$metadata?.httpStatusCode;
        const v = this.budget.onFailure(action, code, status, attempt, maxAttempts);
        this.o.observe?.(action, code, ms, {
          attempt,
          kind: v.kind,
          ...(status !== undefined ? { httpStatus: status } : {}),
        });
        if (v.retry && !this.closing.signal.aborted) {
          this.o.onRetry?.(action, code, attempt, v.holdMs);
          opts?.onRetry?.(code, attempt, v.holdMs);
          continue;
        }
        const out = new Ec2Error(action, code, err.message ?? String(e), status);
        out.attempts = attempt;
        out.kind = v.kind;
        throw out;
      }
    }
  }
}

function aborted(action: string, attempt: number): Ec2Error {
  const e = new Ec2Error(action, 'Aborted', 'the EC2 client was closed');
  e.attempts = attempt;
  return e;
}

/** Converts the SDK's NetworkInterface to {@link Ec2Eni}. */
export function normaliseEni(ni: NetworkInterface): Ec2Eni {
  const primary = ni.PrivateIpAddress ?? ni.PrivateIpAddresses?.find((p) => p.Primary)?.PrivateIpAddress ?? '';
  const a = ni.Attachment;
  return {
    eniId: ni.NetworkInterfaceId ?? '',
    mac: (ni.MacAddress ?? '').toLowerCase(),
    status: ni.Status ?? '',
    subnetId: ni.SubnetId ?? '',
    vpcId: ni.VpcId ?? '',
    description: ni.Description ?? '',
    primaryIp: primary,
    secondaryIps: (ni.PrivateIpAddresses ?? [])
      .filter((p) => !p.Primary && p.PrivateIpAddress)
      .map((p) => p.PrivateIpAddress!),
    ipv4Prefixes: (ni.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? '').filter(Boolean),
    ...(a?.AttachmentId
      ? {
          attachment: {
            attachmentId: a.AttachmentId,
            instanceId: a.InstanceId ?? '',
            deviceIndex: a.DeviceIndex ?? -1,
            status: a.Status ?? '',
            deleteOnTermination: a.DeleteOnTermination ?? false,
          },
        }
      : {}),
    tags: Object.fromEntries((ni.TagSet ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])),
    securityGroupIds: (ni.Groups ?? []).map((g) => g.GroupId ?? '').filter(Boolean),
  };
}

/** Compile-time check that {@link Ec2Api} implements the {@link Ec2Port} (structurally). */
export const asEc2Port: (api: Ec2Api) => Ec2Port = (api) => api;
