/**
 * {@link SimCloud}: the simulated cloud. An EC2 Query API server and an IMDSv2 server on
 * loopback (ephemeral ports by default) over one in-memory state, with fault knobs and
 * a log of every EC2 call. The unmodified `@aws-sdk/client-ec2` and IMDS clients work
 * against it via `AWS_EC2_ENDPOINT` / `AWS_EC2_METADATA_SERVICE_ENDPOINT` (docs/design.md#5-the-simulated-cloud).
 */
import { CloudModel } from './cloud-model.js';
import { Ec2Server } from './ec2-server.js';
import { FaultInjector } from './faults.js';
import { validateIamPolicy } from './iam.js';
import { IdGenerator } from './ids.js';
import { ImdsServer } from './imds-server.js';
import { ImdsViews } from './imds-view.js';
import { terminateInstance } from './terminate.js';
import type { SubnetInput } from './subnet-create.js';
import type { ApiCallRecord, Instance, SimState, Subnet } from './types.js';

/** Options of {@link SimCloud}. */
export interface SimCloudOptions {
  /** Default `us-west-2`. */
  region?: string;
  /** Default `<region>a`. */
  availabilityZone?: string;
  /** The VPC's primary IPv4 CIDR block. Default `10.0.0.0/16`. */
  vpcCidr?: string;
  /**
   * Secondary IPv4 CIDR blocks of the VPC, e.g. `['100.64.0.0/16']` for custom networking
   * (rules in `vpc.ts`; more can be added with {@link SimCloud.addVpcCidr}). Default none.
   */
  secondaryVpcCidrs?: string[];
  /**
   * IPv6 /56 blocks of the VPC (e.g. `['2600:1f14:abc:de00::/56']`; rules in `vpc-ipv6.ts`;
   * more with {@link SimCloud.addVpcIpv6Cidr}). Default none: an IPv4-only VPC.
   */
  vpcIpv6Cidrs?: string[];
  /** Listen address of both servers, default `127.0.0.1`. */
  host?: string;
  /** Default 0 (ephemeral). */
  ec2Port?: number;
  /** Default 0 (ephemeral). */
  imdsPort?: number;
  /** Makes resource ids and MACs deterministic. */
  seed?: number;
  /** An IAM policy document EC2 calls are authorized against ({@link SimCloud.setIamPolicy}). Default none: all allowed. */
  iamPolicy?: unknown;
}

/** The simulated cloud. Call {@link start} before using the endpoints, {@link stop} at the end. */
export class SimCloud {
  /** Read access to subnets, instances and ENIs (tests may inspect, should not mutate). */
  readonly state: SimState;
  /** Fault knobs (also settable over HTTP: `POST <ec2Endpoint>/_sim/faults`). */
  readonly faults: FaultInjector;
  /** Every EC2 call, in arrival order (see {@link ApiCallRecord}). */
  readonly calls: ApiCallRecord[] = [];
  private readonly model: CloudModel;
  private readonly views: ImdsViews;
  private readonly ec2: Ec2Server;
  private readonly imds: ImdsServer;
  private readonly host: string;
  private readonly ports: { ec2: number; imds: number };
  private endpoints?: { ec2: string; imds: string };
  private defaultInstance?: string;
  /** IMDS servers of one instance each, by instance id ({@link imdsEndpointOwn}). */
  private readonly ownImds = new Map<string, { server: ImdsServer; url: string }>();

  constructor(opts: SimCloudOptions = {}) {
    const ids = new IdGenerator(opts.seed);
    const region = opts.region ?? 'us-west-2';
    this.state = {
      region,
      availabilityZone: opts.availabilityZone ?? `${region}a`,
      vpcId: ids.id('vpc'),
      vpcCidr: opts.vpcCidr ?? '10.0.0.0/16',
      accountId: '123456789012',
      subnets: new Map(),
      instances: new Map(),
      enis: new Map(),
    };
    this.faults = new FaultInjector();
    this.views = new ImdsViews(this.state);
    this.model = new CloudModel(this.state, ids, this.faults, (kind, instanceId) =>
      this.views.beforeChange(instanceId, this.faults.imdsLagFor(kind)),
    );
    for (const c of opts.secondaryVpcCidrs ?? []) this.model.addVpcCidr(c);
    for (const c of opts.vpcIpv6Cidrs ?? []) this.model.addVpcIpv6Cidr(c);
    this.ec2 = new Ec2Server(this.model, this.faults, this.calls);
    if (opts.iamPolicy !== undefined) this.setIamPolicy(opts.iamPolicy);
    this.imds = new ImdsServer({
      defaultInstanceId: () => this.defaultInstance,
      view: (id) => this.views.view(id),
      garbage: (path) => this.faults.garbage.imdsFor(path),
    });
    this.host = opts.host ?? '127.0.0.1';
    this.ports = { ec2: opts.ec2Port ?? 0, imds: opts.imdsPort ?? 0 };
  }

  /** Starts both HTTP servers. @throws Error when a port cannot be bound. */
  async start(): Promise<void> {
    if (this.endpoints) return;
    const ec2Port = await this.ec2.listen(this.ports.ec2, this.host);
    let imdsPort: number;
    try {
      imdsPort = await this.imds.listen(this.ports.imds, this.host);
    } catch (e) {
      await this.ec2.close();
      throw e;
    }
    const h = this.host.includes(':') ? `[${this.host}]` : this.host;
    this.endpoints = { ec2: `http://${h}:${ec2Port}`, imds: `http://${h}:${imdsPort}` };
  }

  /** IMDS catches up at once: every change still hidden by an IMDS lag becomes visible now. */
  catchUpImds(): void {
    this.views.clear();
  }

  /** Closes both servers (in-flight calls are dropped) and clears transition timers. */
  async stop(): Promise<void> {
    this.model.stop();
    this.views.clear();
    await Promise.all([
      this.ec2.close(),
      this.imds.close(),
      ...[...this.ownImds.values()].map((o) => o.server.close()),
    ]);
    this.ownImds.clear();
  }

  /** EC2 endpoint URL, e.g. `http://127.0.0.1:41234`. @throws Error before {@link start}. */
  get ec2Endpoint(): string {
    return this.started().ec2;
  }

  /** IMDS base URL serving the default (first launched) instance. @throws Error before {@link start}. */
  get imdsEndpoint(): string {
    return this.started().imds;
  }

  /** IMDS base URL for one instance: `<imdsEndpoint>/<instanceId>` (then `/latest/...`). */
  imdsEndpointFor(instanceId: string): string {
    return `${this.started().imds}/${instanceId}`;
  }

  /**
   * An IMDS server of its own for `instanceId` (started on first use, on an ephemeral port of
   * the same host, closed by {@link stop}): it serves that instance at `/latest/...`, as the
   * link-local IMDS address does inside each EC2 instance, so nodes that run one shared
   * configuration (a DaemonSet's `AWS_EC2_METADATA_SERVICE_ENDPOINT`) each reach their own
   * instance through a relay. @throws Error before {@link start} or when no port can be bound.
   */
  async imdsEndpointOwn(instanceId: string): Promise<string> {
    const have = this.ownImds.get(instanceId);
    if (have) return have.url;
    this.started();
    const server = new ImdsServer({
      defaultInstanceId: () => instanceId,
      view: (id) => this.views.view(id),
      garbage: (path) => this.faults.garbage.imdsFor(path),
    });
    const port = await server.listen(0, this.host);
    const h = this.host.includes(':') ? `[${this.host}]` : this.host;
    const url = `http://${h}:${port}`;
    this.ownImds.set(instanceId, { server, url });
    return url;
  }

  /**
   * Adds a subnet (/16–/28 inside one of the VPC's CIDR blocks, no overlap), in
   * `availabilityZone` (default: the region's first zone, `<region>a`) with `tags` (e.g.
   * `{ 'kubernetes.io/role/cni': '1' }`). Its free-address count starts at size − 5 (AWS
   * reserves the first four and the last address). With `ipv6Cidr` (a /64 of the VPC's
   * IPv6 blocks, or `true` for the lowest free one) it is dual-stack; with
   * `assignIpv6AddressOnCreation` each ENI created there gets one IPv6 address.
   * @throws Error for a bad or overlapping CIDR, a zone not of the region, or an IPv6 block refused.
   */
  addSubnet(p: SubnetInput): Subnet {
    return this.model.addSubnet(p);
  }

  /**
   * Associates an IPv6 /56 with the VPC (none given: the next block after the last, from
   * `2600:1f14:abc:de00::/56`, standing for an Amazon-provided one); DescribeVpcs and IMDS
   * `vpc-ipv6-cidr-blocks` list it. Returns it normalised.
   * @throws Error for a block that is not a /56, overlaps, or is a sixth.
   */
  addVpcIpv6Cidr(cidr?: string): string {
    return this.model.addVpcIpv6Cidr(cidr);
  }

  /**
   * Associates a secondary IPv4 CIDR block with the VPC (e.g. `100.64.0.0/16`); IMDS
   * `vpc-ipv4-cidr-blocks` and DescribeVpcs list it after the primary. Returns it normalised.
   * @throws Error for a bad or overlapping block, another RFC 1918 range than the primary, or more than 5 blocks.
   */
  addVpcCidr(cidr: string): string {
    return this.model.addVpcCidr(cidr);
  }

  /** {@link CloudModel.occupy}: takes a subnet's addresses for "other users" so `leaveFree` stay free. */
  occupy(subnetId: string, leaveFree = 0): string[] {
    return this.model.occupy(subnetId, leaveFree);
  }

  /** {@link CloudModel.releaseOccupied}: gives back addresses `occupy` took. */
  releaseOccupied(subnetId: string, ips: string[]): void {
    this.model.releaseOccupied(subnetId, ips);
  }

  /**
   * Adds or overwrites tags on subnets, ENIs, instances or the VPC, as EC2 CreateTags does.
   * @throws Ec2ApiError Invalid<Type>ID.NotFound / InvalidID for an unknown id.
   */
  createTags(resourceIds: string[], tags: Record<string, string>): void {
    this.model.createTags(resourceIds, tags);
  }

  /**
   * Launches an instance with its primary ENI (device 0, attached, one primary IP from
   * the subnet, DeleteOnTermination true, untagged). The first one is the default IMDS instance.
   * @throws Error for an unknown instance type or subnet; Ec2ApiError when the subnet is full.
   */
  launchInstance(p: { instanceType: string; subnetId: string }): Instance {
    const inst = this.model.launchInstance(p);
    this.defaultInstance ??= inst.instanceId;
    return inst;
  }

  /**
   * Authorizes every later EC2 call against an IAM identity policy (sim/iam.ts: a call it
   * does not allow is answered 403 `UnauthorizedOperation`, and logged with that code);
   * `undefined` allows every call again.
   * @throws Error naming what in the document is not a policy the sim evaluates
   */
  setIamPolicy(doc: unknown): void {
    this.ec2.iamPolicy = doc === undefined ? undefined : validateIamPolicy(doc);
  }

  /**
   * Terminates an instance as EC2 does ({@link terminateInstance}: attached ENIs deleted when
   * DeleteOnTermination, else left available). @returns the ENIs deleted and left available.
   * @throws Error for an unknown instance.
   */
  terminateInstance(instanceId: string): { deleted: string[]; available: string[] } {
    return terminateInstance(this.model, this.state, instanceId);
  }

  /** Number of recorded calls of one action, of any of several, or of all (no argument). */
  countCalls(action?: string | string[]): number {
    if (action === undefined) return this.calls.length;
    const want = new Set(Array.isArray(action) ? action : [action]);
    return this.calls.filter((c) => want.has(c.action)).length;
  }

  /** Empties the call log (the array is kept, so references stay valid). */
  resetCalls(): void {
    this.calls.length = 0;
  }

  private started(): { ec2: string; imds: string } {
    if (!this.endpoints) throw new Error('SimCloud is not started: await sim.start() first');
    return this.endpoints;
  }
}
