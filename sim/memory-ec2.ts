/**
 * {@link MemoryEc2}: the simulator's EC2 state model (`CloudModel`: the same subnets,
 * instances, ENIs, limits and error codes the HTTP simulator serves) behind ipamd's
 * {@link Ec2Port}, called in-process: no HTTP, no SDK, no timers of its own. For the
 * executors' unit tests and for benches; ipamd itself never imports it.
 *
 * What it adds to the model:
 * - the port's shapes: answers as {@link Ec2Eni}, failures as {@link Ec2Error} with the
 *   code, HTTP status and failure kind ipamd's classification gives (`retry.ts`);
 * - scripted faults ({@link MemoryEc2.failNext}) for the three unknown outcomes EC2 can
 *   leave a caller with — acted then answered 5xx, answered 5xx without acting, acted
 *   then never answered (the attempt timeout runs out: virtual time is advanced by the
 *   timeout, no wall-clock wait) — and for plain refusals (a 4xx or throttling code);
 * - one hook per call ({@link MemoryEc2.during}) that runs after the model acted and
 *   before the answer, to make something happen "while the call is in flight";
 * - a call log ({@link MemoryEc2.calls}).
 *
 * Like `Ec2Api` with `maxAttempts: 1`, it makes one attempt per call: a fault is what the
 * caller sees (an Ec2Error with `attempts` 1, or the count given to {@link failNext} to
 * stand for a call whose retries ran out).
 */
import { Ec2Error, type CreateEniRequest, type Ec2Eni, type Ec2Port, type Ec2Subnet } from '../ipamd/cloud/ec2-port.js';
import type { ImdsEni } from '../ipamd/cloud/imds.js';
import { classifyEc2Failure } from '../ipamd/cloud/retry.js';
import { CloudModel } from './cloud-model.js';
import { Ec2ApiError, httpStatusForCode } from './ec2-errors.js';
import { FaultInjector } from './faults.js';
import { FILTER_NAMES, applyFilters, eniFilterValues, subnetFilterValues } from './filters.js';
import { IdGenerator } from './ids.js';
import { assignAddresses, unassignAddresses } from './ip-assignment.js';
import { assignIpv6 } from './ipv6-assignment.js';
import type { SubnetInput } from './subnet-create.js';
import { vpcCidrBlocks, type Eni, type Instance, type SimState, type Subnet } from './types.js';

/** The three outcomes EC2 can leave unknown to the caller, plus a plain refusal by code. */
export type MemoryFault =
  /** EC2 acted, then answered InternalError (500). */
  | 'applied-5xx'
  /** EC2 answered InternalError (500) without acting. */
  | 'not-applied-5xx'
  /** EC2 acted and never answered: the attempt timed out (TimeoutError, no HTTP status). */
  | 'applied-no-answer'
  /** EC2 refused with this code (e.g. `InsufficientFreeAddressesInSubnet`, `RequestLimitExceeded`) without acting. */
  | { code: string; message?: string };

/** One call as {@link MemoryEc2} saw it. */
export interface MemoryCall {
  /** EC2 action name, e.g. `UnassignPrivateIpAddresses`. */
  action: string;
  /** The port method's arguments. */
  args: unknown[];
  /** Error code when the call failed. */
  error?: string;
  /** Virtual time (ms) when the call was made. */
  at: number;
}

/** Options of {@link MemoryEc2}. */
export interface MemoryEc2Options {
  /** Makes ids and MACs deterministic (default 1). */
  seed?: number;
  /** Default `us-west-2`. */
  region?: string;
  /** Default `10.0.0.0/16`. */
  vpcCidr?: string;
  /** Secondary VPC CIDR blocks (e.g. `['100.64.0.0/16']`), rules as `SimCloud`'s. Default none. */
  secondaryVpcCidrs?: string[];
  /** IPv6 /56 blocks of the VPC, rules as `SimCloud`'s. Default none. */
  vpcIpv6Cidrs?: string[];
  /** Virtual clock (ms); a call without an answer advances it by `timeoutMs`. Default: a private clock starting at 0. */
  clock?: { now(): number; advance(ms: number): void };
  /** The attempt timeout a call without an answer spends (ms, default 10 000 as ENI_IPAM_EC2_TIMEOUT). */
  timeoutMs?: number;
}

interface Scripted {
  fault: MemoryFault;
  count: number;
  attempts: number;
}

/** The simulated EC2 as an in-process {@link Ec2Port}. */
export class MemoryEc2 implements Ec2Port {
  /** The model's state (inspect; change through the model or the port). */
  readonly state: SimState;
  /** The simulator's EC2 state machine (attach/detach delays: `model.faults.setAttachmentDelays`). */
  readonly model: CloudModel;
  /** Every call, in order. */
  readonly calls: MemoryCall[] = [];
  private readonly faults = new Map<string, Scripted[]>();
  private readonly hooks = new Map<string, Array<() => void | Promise<void>>>();
  private readonly clock: { now(): number; advance(ms: number): void };
  private readonly timeoutMs: number;

  constructor(o: MemoryEc2Options = {}) {
    const ids = new IdGenerator(o.seed ?? 1);
    const region = o.region ?? 'us-west-2';
    this.state = {
      region,
      availabilityZone: `${region}a`,
      vpcId: ids.id('vpc'),
      vpcCidr: o.vpcCidr ?? '10.0.0.0/16',
      accountId: '123456789012',
      subnets: new Map(),
      instances: new Map(),
      enis: new Map(),
    };
    let t = 0;
    this.clock = o.clock ?? {
      now: () => t,
      advance: (ms) => {
        t += ms;
      },
    };
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.model = new CloudModel(this.state, ids, new FaultInjector(), () => undefined);
    for (const c of o.secondaryVpcCidrs ?? []) this.model.addVpcCidr(c);
    for (const c of o.vpcIpv6Cidrs ?? []) this.model.addVpcIpv6Cidr(c);
  }

  /**
   * Adds a subnet (see `CloudModel.addSubnet`), optionally in another zone, tagged, and
   * dual-stack (`ipv6Cidr`: a /64 of the VPC's IPv6 blocks, or `true` for the lowest free one).
   * @throws Error for a bad or overlapping CIDR, a zone outside the region, or an IPv6 block refused.
   */
  addSubnet(cidr: string, o: Omit<SubnetInput, 'cidr'> = {}): Subnet {
    return this.model.addSubnet({ cidr, ...o });
  }

  /** Launches an instance with its primary ENI (see `CloudModel.launchInstance`). @throws Error for an unknown type or subnet. */
  launchInstance(instanceType: string, subnetId: string): Instance {
    return this.model.launchInstance({ instanceType, subnetId });
  }

  /**
   * The next `count` calls of `action` (an EC2 action name) fail as `fault`. `attempts`
   * (default 1) is what the error reports: more than 1 stands for a call that was retried
   * (its outcome is then unknown even on a 4xx; see `failedForSure`).
   */
  failNext(action: string, fault: MemoryFault, opts: { count?: number; attempts?: number } = {}): void {
    const list = this.faults.get(action) ?? [];
    list.push({ fault, count: opts.count ?? 1, attempts: opts.attempts ?? 1 });
    this.faults.set(action, list);
  }

  /** Runs `fn` once, during the next call of `action`: after the model acted (if it did), before the answer. */
  during(action: string, fn: () => void | Promise<void>): void {
    const list = this.hooks.get(action) ?? [];
    list.push(fn);
    this.hooks.set(action, list);
  }

  /** Number of calls of `action` (all calls without one). */
  count(action?: string): number {
    return action ? this.calls.filter((c) => c.action === action).length : this.calls.length;
  }

  /** The ENIs the instance's IMDS would list (attached ones, any status but detached), as `ImdsClient.enis()` gives them. */
  imdsEnis(instanceId: string): ImdsEni[] {
    return [...this.state.enis.values()]
      .filter((e) => e.attachment?.instanceId === instanceId)
      .map((e) => ({
        mac: e.macAddress,
        eniId: e.networkInterfaceId,
        deviceNumber: e.attachment!.deviceIndex,
        subnetId: e.subnetId,
        vpcId: e.vpcId,
        subnetCidr: this.state.subnets.get(e.subnetId)?.cidr ?? '',
        vpcCidrs: vpcCidrBlocks(this.state),
        securityGroupIds: [...e.securityGroupIds],
        localIpv4s: [e.primaryIp, ...e.secondaryIps],
        ipv4Prefixes: [...e.ipv4Prefixes],
      }));
  }

  describeEnis(eniIds: string[]): Promise<Ec2Eni[]> {
    if (eniIds.length === 0) return Promise.resolve([]);
    return this.call('DescribeNetworkInterfaces', [eniIds], () => eniIds.map((id) => toEc2Eni(this.model.eni(id))));
  }

  describeEnisByFilters(filters: Record<string, string[]>): Promise<Ec2Eni[]> {
    return this.call('DescribeNetworkInterfaces', [filters], () => {
      const list = Object.entries(filters).map(([name, values]) => ({ name, values }));
      return applyFilters([...this.state.enis.values()], list, eniFilterValues, FILTER_NAMES.eni).map(toEc2Eni);
    });
  }

  describeSubnet(subnetId: string): Promise<{ cidr: string; availableIps: number; vpcId: string }> {
    return this.call('DescribeSubnets', [subnetId], () => {
      const s = this.state.subnets.get(subnetId);
      if (!s) throw new Ec2ApiError('InvalidSubnetID.NotFound', `The subnet ID '${subnetId}' does not exist`);
      return { cidr: s.cidr, availableIps: s.addresses.freeCount(), vpcId: s.vpcId };
    });
  }

  describeSubnets(filters: Record<string, string[]>): Promise<Ec2Subnet[]> {
    return this.call('DescribeSubnets', [filters], () => {
      const list = Object.entries(filters).map(([name, values]) => ({ name, values }));
      return applyFilters([...this.state.subnets.values()], list, subnetFilterValues, FILTER_NAMES.subnet).map((s) => ({
        subnetId: s.subnetId,
        cidr: s.cidr,
        availableIps: s.addresses.freeCount(),
        vpcId: s.vpcId,
        availabilityZone: s.availabilityZone,
        tags: { ...s.tags },
        ...(s.ipv6 ? { ipv6Cidrs: [s.ipv6.cidr] } : {}),
      }));
    });
  }

  createEni(p: CreateEniRequest): Promise<Ec2Eni> {
    return this.call('CreateNetworkInterface', [p], () =>
      toEc2Eni(
        this.model.createEni({
          subnetId: p.subnetId,
          description: p.description,
          tags: p.tags,
          secondaryCount: p.secondaryCount,
          prefixCount: p.prefixCount ?? 0,
          securityGroupIds: p.securityGroupIds ?? [],
        }),
      ),
    );
  }

  attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string> {
    return this.call('AttachNetworkInterface', [eniId, instanceId, deviceIndex], () =>
      this.model.attachEni(eniId, instanceId, deviceIndex),
    );
  }

  setDeleteOnTermination(eniId: string, attachmentId: string): Promise<void> {
    return this.call('ModifyNetworkInterfaceAttribute', [eniId, attachmentId], () => {
      const eni = this.model.eni(eniId);
      if (eni.attachment?.attachmentId !== attachmentId)
        throw new Ec2ApiError('InvalidAttachmentID.NotFound', `The attachment ID '${attachmentId}' does not exist`);
      eni.attachment.deleteOnTermination = true;
    });
  }

  assignIps(eniId: string, count: number): Promise<string[]> {
    return this.call(
      'AssignPrivateIpAddresses',
      [eniId, count],
      () => assignAddresses(this.model, eniId, { secondaryCount: count, ips: [], prefixes: [] }).ips,
    );
  }

  unassignIps(eniId: string, ips: string[]): Promise<void> {
    if (ips.length === 0) return Promise.resolve();
    return this.call('UnassignPrivateIpAddresses', [eniId, ips], () => unassignAddresses(this.model, eniId, ips, []));
  }

  assignPrefixes(eniId: string, count: number): Promise<string[]> {
    return this.call(
      'AssignPrivateIpAddresses',
      [eniId, count],
      () => assignAddresses(this.model, eniId, { prefixCount: count, ips: [], prefixes: [] }).prefixes,
    );
  }

  unassignPrefixes(eniId: string, prefixes: string[]): Promise<void> {
    if (prefixes.length === 0) return Promise.resolve();
    return this.call('UnassignPrivateIpAddresses', [eniId, prefixes], () =>
      unassignAddresses(this.model, eniId, [], prefixes),
    );
  }

  assignIpv6Prefixes(eniId: string, count: number): Promise<string[]> {
    return this.call(
      'AssignIpv6Addresses',
      [eniId, count],
      () => assignIpv6(this.model, eniId, { prefixCount: count, addresses: [], prefixes: [] }).prefixes,
    );
  }

  detachEni(attachmentId: string): Promise<void> {
    return this.call('DetachNetworkInterface', [attachmentId], () => this.model.detachEni(attachmentId));
  }

  async deleteEni(eniId: string): Promise<void> {
    try {
      await this.call('DeleteNetworkInterface', [eniId], () => this.model.deleteEni(eniId));
    } catch (e) {
      if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') return;
      throw e;
    }
  }

  /** Clears the model's attach/detach timers. */
  stop(): void {
    this.model.stop();
  }

  /**
   * One call: the scripted fault (if any) decides whether the model acts and what the
   * caller gets; the `during` hook runs between the act and the answer. Yields to the
   * event loop's microtasks before acting and before answering, as a real call would.
   * @throws Ec2Error only.
   */
  private async call<T>(action: string, args: unknown[], act: () => T): Promise<T> {
    const rec: MemoryCall = { action, args, at: this.clock.now() };
    this.calls.push(rec);
    await Promise.resolve();
    const fault = this.takeFault(action);
    let out: T | undefined;
    try {
      if (!fault || fault.fault === 'applied-5xx' || fault.fault === 'applied-no-answer') out = act();
    } catch (e) {
      if (!(e instanceof Ec2ApiError)) throw e;
      rec.error = e.code;
      throw toEc2Error(action, e.code, e.message, e.status, 1);
    } finally {
      const hook = this.hooks.get(action)?.shift();
      if (hook) await hook();
    }
    await Promise.resolve();
    if (!fault) return out as T;
    const f = fault.fault;
    if (f === 'applied-no-answer') {
      this.clock.advance(this.timeoutMs);
      rec.error = 'TimeoutError';
      throw toEc2Error(action, 'TimeoutError', `no answer within ${this.timeoutMs} ms`, undefined, fault.attempts);
    }
    const code = typeof f === 'string' ? 'InternalError' : f.code;
    rec.error = code;
    throw toEc2Error(
      action,
      code,
      typeof f === 'string' ? 'We encountered an internal error. Please try again.' : (f.message ?? code),
      httpStatusForCode(code),
      fault.attempts,
    );
  }

  private takeFault(action: string): Scripted | undefined {
    const list = this.faults.get(action);
    const f = list?.[0];
    if (!f) return undefined;
    if (--f.count <= 0) list!.shift();
    return f;
  }
}

function toEc2Error(
  action: string,
  code: string,
  message: string,
  status: number | undefined,
  attempts: number,
): Ec2Error {
  const e = new Ec2Error(action, code, message, status);
  e.kind = classifyEc2Failure(code, status);
  e.attempts = attempts;
  return e;
}

/** The model's ENI in the port's shape (copies: the caller cannot change the model). */
export function toEc2Eni(e: Eni): Ec2Eni {
  const a = e.attachment;
  return {
    eniId: e.networkInterfaceId,
    mac: e.macAddress,
    status: e.status,
    subnetId: e.subnetId,
    vpcId: e.vpcId,
    description: e.description,
    primaryIp: e.primaryIp,
    secondaryIps: [...e.secondaryIps],
    ipv4Prefixes: [...e.ipv4Prefixes],
    ...(e.ipv6Addresses.length ? { ipv6Addresses: [...e.ipv6Addresses] } : {}),
    ...(e.ipv6Prefixes.length ? { ipv6Prefixes: [...e.ipv6Prefixes] } : {}),
    ...(a
      ? {
          attachment: {
            attachmentId: a.attachmentId,
            instanceId: a.instanceId,
            deviceIndex: a.deviceIndex,
            status: a.status,
            deleteOnTermination: a.deleteOnTermination,
          },
        }
      : {}),
    tags: { ...e.tags },
    securityGroupIds: [...e.securityGroupIds],
  };
}
