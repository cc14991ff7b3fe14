/**
 * IMDSv2 client (instance metadata service). Source: AWS EC2 User Guide, "Use the
 * Instance Metadata Service to access instance metadata" (IMDSv2 session tokens):
 * `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds`, then every GET
 * carries `X-aws-ec2-metadata-token`. Paths used are those of docs/design.md#6-imds-paths-used.
 *
 * IMDS is a hint, EC2 is the truth (docs/design.md#4-restore-after-restart): callers confirm what it says.
 */
import { AnswerParseError, checkAll, checkOne, type ParseErrorObserver } from './answer-parse.js';
import { monoNow } from '../clock.js';
import http from 'node:http';
import { httpRequest, type HttpAnswer } from './imds-http.js';

/**
 * How long (ms) an idle IMDS connection is kept for the next request: a start's reads
 * come in bursts of a few ms, so this spans a burst and closes well before an HTTP
 * server's usual idle limit (Node's 5 s), leaving little room for the race
 * imds-http.ts resends on.
 */
export const IMDS_IDLE_MS = 1000;

/** Connections (at most) to IMDS at once: a start's burst of ~30 reads shares them. */
export const IMDS_MAX_CONNECTIONS = 8;

/** Error from IMDS with the HTTP status (0 for network errors/timeouts). */
export class ImdsError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly path: string,
  ) {
    super(message);
    this.name = 'ImdsError';
  }
}

/** One ENI as IMDS describes it (under `network/interfaces/macs/<mac>/`). */
export interface ImdsEni {
  mac: string;
  eniId: string;
  deviceNumber: number;
  subnetId: string;
  vpcId: string;
  subnetCidr: string;
  vpcCidrs: string[];
  securityGroupIds: string[];
  /** Private IPv4s, the ENI's primary IP first. */
  localIpv4s: string[];
  /** Delegated /28 prefixes (empty unless prefix delegation is used). */
  ipv4Prefixes: string[];
}

/**
 * What the ENI reconcile and the wait for a new ENI read of an attached ENI: its id, its
 * subnet's CIDR and its addresses ({@link ImdsClient.eniAddresses}).
 */
export type ImdsEniAddresses = Pick<ImdsEni, 'mac' | 'eniId' | 'subnetCidr' | 'localIpv4s' | 'ipv4Prefixes'>;

/**
 * The IPv6 side of one ENI as IMDS lists it under `network/interfaces/macs/<mac>/` (AWS
 * EC2 User Guide, "Instance metadata categories"). Each path exists only when it has
 * something to list (IMDS answers 404 otherwise), so an IPv4-only ENI reads as all empty.
 */
export interface ImdsEniIpv6 {
  mac: string;
  /** `ipv6s`: the ENI's IPv6 addresses. */
  ipv6s: string[];
  /** `ipv6-prefix`: delegated IPv6 prefixes (/80). */
  ipv6Prefixes: string[];
  /** `subnet-ipv6-cidr-blocks`: the subnet's IPv6 blocks (/64). */
  subnetIpv6Cidrs: string[];
  /** `vpc-ipv6-cidr-blocks`: the VPC's IPv6 blocks (/56). */
  vpcIpv6Cidrs: string[];
}

/** The instance as IMDS describes it. */
export interface ImdsInstance {
  instanceId: string;
  instanceType: string;
  region: string;
  availabilityZone: string;
  localIpv4: string;
  /** MAC of the primary ENI. */
  primaryMac: string;
}

/** Options of {@link ImdsClient}. */
export interface ImdsClientOptions {
  /** Base URL, e.g. `http://169.254.169.254` (a path prefix is allowed). */
  endpoint: string;
  /** Per-request timeout in ms (default 2000). */
  timeoutMs?: number;
  /** Token TTL in seconds (default 21600, the AWS maximum). */
  tokenTtlSeconds?: number;
  /** Told of each answer refused because a field does not parse (ipamd: warn log + metric). */
  onParseError?: ParseErrorObserver;
}

/**
 * An IMDS answer whose field does not parse (an HTML error page from a proxy, a truncated
 * line): refused whole, so the caller keeps its last good view. `status` is 200.
 */
export class ImdsParseError extends ImdsError {
  constructor(readonly parse: AnswerParseError) {
    super(parse.message, 200, parse.where);
    this.name = 'ImdsParseError';
  }
}

/**
 * Small IMDSv2 client over node:http (./imds-http.ts), its connections kept alive for
 * {@link IMDS_IDLE_MS}. The token is shared and renewed.
 */
export class ImdsClient {
  private readonly base: string;
  private readonly timeoutMs: number;
  private readonly ttlS: number;
  private token?: { value: string; expiresAt: number };
  private tokenFetch?: Promise<string>;
  /** Keep-alive connections for an http: endpoint (IMDS is one); idle ones do not keep the process alive. */
  private readonly agent?: http.Agent;
  private readonly onParseError?: ParseErrorObserver;

  constructor(opts: ImdsClientOptions) {
    if (opts.onParseError) this.onParseError = opts.onParseError;
    this.base = opts.endpoint.replace(/\/+$/, '');
    if (this.base.startsWith('http:'))
      this.agent = new http.Agent({ keepAlive: true, maxSockets: IMDS_MAX_CONNECTIONS, timeout: IMDS_IDLE_MS });
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.ttlS = opts.tokenTtlSeconds ?? 21600;
  }

  /**
   * GETs `/latest/<path>` and returns the body text.
   * @throws ImdsError (status 404 for a missing path, 0 for network errors/timeouts).
   */
  async get(path: string): Promise<string> {
    const token = await this.getToken();
    const res = await this.fetch(`/latest/${path}`, { headers: { 'X-aws-ec2-metadata-token': token } });
    if (res.status === 401) {
      this.token = undefined; // expired or revoked: one fresh try
      const again = await this.fetch(`/latest/${path}`, {
        headers: { 'X-aws-ec2-metadata-token': await this.getToken() },
      });
      return this.bodyOrThrow(again, path);
    }
    return this.bodyOrThrow(res, path);
  }

  /** Like {@link get} but returns undefined on 404. */
  async getOptional(path: string): Promise<string | undefined> {
    try {
      return await this.get(path);
    } catch (e) {
      if (e instanceof ImdsError && e.status === 404) return undefined;
      throw e;
    }
  }

  /** Closes the idle connections kept for the next request (requests after it open new ones). */
  close(): void {
    this.agent?.destroy();
  }

  /** Reads the instance identity. @throws ImdsError */
  async instance(): Promise<ImdsInstance> {
    const [instanceId, instanceType, localIpv4, mac, az, doc] = await Promise.all([
      this.get('meta-data/instance-id'),
      this.get('meta-data/instance-type'),
      this.get('meta-data/local-ipv4'),
      this.get('meta-data/mac'),
      this.get('meta-data/placement/availability-zone'),
      this.get('dynamic/instance-identity/document'),
    ]);
    let region: string;
    try {
      region = String((JSON.parse(doc) as { region?: unknown }).region ?? '');
    } catch {
      throw new ImdsError('instance identity document is not JSON', 200, 'dynamic/instance-identity/document');
    }
    if (!region) region = az.replace(/[a-z]$/, '');
    return {
      instanceId: instanceId.trim(),
      instanceType: instanceType.trim(),
      region,
      availabilityZone: az.trim(),
      localIpv4: localIpv4.trim(),
      primaryMac: mac.trim().toLowerCase(),
    };
  }

  /** Lists the ENIs attached to the instance, by device number. @throws ImdsError */
  async enis(): Promise<ImdsEni[]> {
    const out = await Promise.all((await this.macs()).map((mac) => this.eni(mac)));
    return out.sort((a, b) => a.deviceNumber - b.deviceNumber);
  }

  /**
   * Lists the ENIs attached to the instance with only their id, subnet CIDR, private IPv4s
   * and /28 prefixes, in IMDS's order: 1 + 4 requests per ENI, where {@link enis} makes
   * 1 + 9 (the periodic ENI reconcile reads this; IMDS is rate-limited per instance).
   * @throws ImdsError
   */
  async eniAddresses(): Promise<ImdsEniAddresses[]> {
    return Promise.all((await this.macs()).map((mac) => this.addressesOf(mac)));
  }

  /** The id, subnet CIDR, private IPv4s and prefixes of the ENI `mac`: 4 requests. @throws ImdsError */
  private async addressesOf(mac: string): Promise<ImdsEniAddresses> {
    const p = `meta-data/network/interfaces/macs/${mac}/`;
    const [eniId, subnetCidr, ipv4s, prefixes] = await Promise.all([
      this.get(p + 'interface-id'),
      this.get(p + 'subnet-ipv4-cidr-block'),
      this.getOptional(p + 'local-ipv4s'),
      this.getOptional(p + 'ipv4-prefix'),
    ]);
    return this.parsed(() => ({
      mac: mac.toLowerCase(),
      eniId: checkOne('imds', p + 'interface-id', 'interface-id', 'eniId', eniId.trim()),
      subnetCidr: checkOne('imds', p + 'subnet-ipv4-cidr-block', 'subnet-ipv4-cidr-block', 'cidr', subnetCidr.trim()),
      localIpv4s: checkAll('imds', p + 'local-ipv4s', 'local-ipv4s', 'ipv4', lines(ipv4s ?? '')),
      ipv4Prefixes: checkAll('imds', p + 'ipv4-prefix', 'ipv4-prefix', 'cidr', lines(prefixes ?? '')),
    }));
  }

  /**
   * Runs the checks of one answer: an AnswerParseError is reported to `onParseError` and
   * thrown as an {@link ImdsParseError}. @throws ImdsParseError
   */
  private parsed<T>(build: () => T): T {
    try {
      return build();
    } catch (e) {
      if (!(e instanceof AnswerParseError)) throw e;
      this.onParseError?.(e);
      throw new ImdsParseError(e);
    }
  }

  /** The MACs of the attached ENIs (`network/interfaces/macs/`). @throws ImdsError */
  private async macs(): Promise<string[]> {
    const p = 'meta-data/network/interfaces/macs/';
    const macs = lines(await this.get(p)).map((m) => m.replace(/\/$/, ''));
    return this.parsed(() => checkAll('imds', p, 'macs', 'mac', macs));
  }

  /**
   * The VPC's IPv4 CIDR blocks IMDS lists for the ENI `mac`
   * (`network/interfaces/macs/<mac>/vpc-ipv4-cidr-blocks`, one per line; empty when absent):
   * one request, where {@link eni} makes nine. @throws ImdsError
   */
  async vpcCidrs(mac: string): Promise<string[]> {
    return lines((await this.getOptional(`meta-data/network/interfaces/macs/${mac}/vpc-ipv4-cidr-blocks`)) ?? '');
  }

  /**
   * The instance's IPv6 address (`meta-data/ipv6`: the primary ENI's), or undefined when
   * IMDS has none (404). @throws ImdsError (ImdsParseError when it is not an IPv6 address)
   */
  async localIpv6(): Promise<string | undefined> {
    const p = 'meta-data/ipv6';
    const v = (await this.getOptional(p))?.trim();
    if (!v) return undefined;
    return this.parsed(() => checkOne('imds', p, 'ipv6', 'ipv6', v));
  }

  /**
   * The IPv6 addresses, /80 prefixes, subnet and VPC IPv6 blocks of the ENI `mac`: four
   * requests, each path optional (see {@link ImdsEniIpv6}).
   * @throws ImdsError (ImdsParseError when a line is not an IPv6 address or CIDR)
   */
  async eniIpv6(mac: string): Promise<ImdsEniIpv6> {
    const p = `meta-data/network/interfaces/macs/${mac}/`;
    const [ipv6s, prefixes, subnet, vpc] = await Promise.all([
      this.getOptional(p + 'ipv6s'),
      this.getOptional(p + 'ipv6-prefix'),
      this.getOptional(p + 'subnet-ipv6-cidr-blocks'),
      this.getOptional(p + 'vpc-ipv6-cidr-blocks'),
    ]);
    return this.parsed(() => ({
      mac: mac.toLowerCase(),
      ipv6s: checkAll('imds', p + 'ipv6s', 'ipv6s', 'ipv6', lines(ipv6s ?? '')),
      ipv6Prefixes: checkAll('imds', p + 'ipv6-prefix', 'ipv6-prefix', 'cidr6', lines(prefixes ?? '')),
      subnetIpv6Cidrs: checkAll(
        'imds',
        p + 'subnet-ipv6-cidr-blocks',
        'subnet-ipv6-cidr-blocks',
        'cidr6',
        lines(subnet ?? ''),
      ),
      vpcIpv6Cidrs: checkAll('imds', p + 'vpc-ipv6-cidr-blocks', 'vpc-ipv6-cidr-blocks', 'cidr6', lines(vpc ?? '')),
    }));
  }

  /** Reads one ENI by MAC: its addresses ({@link addressesOf}) and five more paths, all at once. @throws ImdsError */
  async eni(mac: string): Promise<ImdsEni> {
    const p = `meta-data/network/interfaces/macs/${mac}/`;
    const [addresses, dev, subnetId, vpcId, vpcCidrs, sgs] = await Promise.all([
      this.addressesOf(mac),
      this.get(p + 'device-number'),
      this.get(p + 'subnet-id'),
      this.get(p + 'vpc-id'),
      this.getOptional(p + 'vpc-ipv4-cidr-blocks'),
      this.getOptional(p + 'security-group-ids'),
    ]);
    const deviceNumber = this.parsed(() =>
      Number(checkOne('imds', p + 'device-number', 'device-number', 'uint', dev.trim())),
    );
    return {
      ...addresses,
      deviceNumber,
      subnetId: subnetId.trim(),
      vpcId: vpcId.trim(),
      vpcCidrs: lines(vpcCidrs ?? ''),
      securityGroupIds: lines(sgs ?? ''),
    };
  }

  /**
   * The session token: the cached one, else one `PUT /latest/api/token` shared by every
   * request that needs it meanwhile (the start's first reads go out together: without
   * this each of them fetched its own token). @throws ImdsError
   */
  private getToken(): Promise<string> {
    if (this.token && this.token.expiresAt > monoNow() + 60_000) return Promise.resolve(this.token.value);
    this.tokenFetch ??= this.fetchToken().finally(() => (this.tokenFetch = undefined));
    return this.tokenFetch;
  }

  private async fetchToken(): Promise<string> {
    const res = await this.fetch('/latest/api/token', {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': String(this.ttlS) },
    });
    const value = await this.bodyOrThrow(res, 'api/token');
    this.token = { value: value.trim(), expiresAt: monoNow() + this.ttlS * 1000 };
    return this.token.value;
  }

  private async fetch(path: string, init: { method?: string; headers: Record<string, string> }): Promise<HttpAnswer> {
    try {
      return await httpRequest(this.base + path, {
        ...init,
        timeoutMs: this.timeoutMs,
        ...(this.agent ? { agent: this.agent } : {}),
      });
    } catch (e) {
      throw new ImdsError(`IMDS ${this.base}${path} unreachable: ${(e as Error).message}`, 0, path);
    }
  }

  private bodyOrThrow(res: HttpAnswer, path: string): string {
    if (res.status < 200 || res.status > 299) throw new ImdsError(`IMDS ${path}: HTTP ${res.status}`, res.status, path);
    return res.body;
  }
}

function lines(s: string): string[] {
  return s
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
}
