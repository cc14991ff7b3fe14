/**
 * IMDSv2 over HTTP (AWS EC2 User Guide, "Use IMDSv2"): `PUT /latest/api/token` with
 * `X-aws-ec2-metadata-token-ttl-seconds` (1–21600) returns a session token; every GET
 * must carry it in `X-aws-ec2-metadata-token` (else 401). Paths served are in
 * {@link metadataText}; unknown paths are 404. `/<instance-id>/latest/...` serves that
 * instance; `/latest/...` serves the default instance.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { ImdsInstanceView } from './imds-view.js';

/** What the IMDS server needs from the simulated cloud. */
export interface ImdsBackend {
  /** The instance served at `/latest/...` (undefined until one is launched). */
  defaultInstanceId(): string | undefined;
  /** The (possibly lagged) view of an instance. */
  view(instanceId: string): ImdsInstanceView | undefined;
  /** A garbage body to answer for `path` instead of the metadata (fault knob: sim/garbage.ts). */
  garbage?(path: string): string | undefined;
}

function hex(n: number): string {
  return randomBytes(n).toString('hex');
}

/** IAM role name the simulated instances carry. */
export const ROLE_NAME = 'eni-ipam-sim-node-role';
const MAX_TTL_S = 21600;

/**
 * Text of one metadata path below `/latest/` for an instance (undefined = 404).
 * Directory listings end entries that are directories with `/`, one per line.
 */
export function metadataText(v: ImdsInstanceView, path: string): string | undefined {
  const p = path.replace(/^\/+/, '');
  if (p === 'dynamic/instance-identity/document') return identityDocument(v);
  if (p === 'dynamic/' || p === 'dynamic') return 'instance-identity/';
  if (p === 'dynamic/instance-identity/' || p === 'dynamic/instance-identity') return 'document';
  if (p === 'meta-data' || p === 'meta-data/') {
    return [
      ...(v.ipv6 ? ['ipv6'] : []),
      'ami-id',
      'hostname',
      'iam/',
      'instance-id',
      'instance-type',
      'local-hostname',
      'local-ipv4',
      'mac',
      'network/',
      'placement/',
    ].join('\n');
  }
  if (!p.startsWith('meta-data/')) return undefined;
  const m = p.slice('meta-data/'.length);
  const hostname = `ip-${v.privateIp.replace(/\./g, '-')}.${v.region}.compute.internal`;
  const simple: Record<string, string> = {
    'ami-id': v.imageId,
    'instance-id': v.instanceId,
    'instance-type': v.instanceType,
    'local-ipv4': v.privateIp,
    mac: v.primaryMac,
    hostname,
    'local-hostname': hostname,
    'placement/': 'availability-zone\nregion',
    'placement/availability-zone': v.availabilityZone,
    'placement/region': v.region,
    'network/': 'interfaces/',
    'network/interfaces/': 'macs/',
    'network/interfaces/macs/': v.enis.map((e) => `${e.mac}/`).join('\n'),
    'iam/': 'info\nsecurity-credentials/',
    'iam/security-credentials/': ROLE_NAME,
    'iam/info': JSON.stringify(
      {
        Code: 'Success',
        LastUpdated: new Date().toISOString(),
        InstanceProfileArn: `arn:aws:iam::${v.accountId}:instance-profile/${ROLE_NAME}`,
        InstanceProfileId: 'AIPASIMULATED0000000',
      },
      null,
      2,
    ),
  };
  if (v.ipv6) simple.ipv6 = v.ipv6;
  if (m in simple) return simple[m];
  if (`${m}/` in simple) return simple[`${m}/`];
  if (m === `iam/security-credentials/${ROLE_NAME}`) {
    return JSON.stringify(
      {
        Code: 'Success',
        LastUpdated: new Date().toISOString(),
        Type: 'AWS-HMAC',
        AccessKeyId: `ASIASIM${hex(6).toUpperCase()}`,
        SecretAccessKey: hex(20),
        Token: `sim-session-${hex(24)}`,
        Expiration: new Date(Date.now() + 6 * 3600_000).toISOString(),
      },
      null,
      2,
    );
  }
  return macText(v, m);
}

/** Text below `meta-data/network/interfaces/macs/<mac>/` (`m` without `meta-data/`; undefined = 404). */
function macText(v: ImdsInstanceView, m: string): string | undefined {
  const em = /^network\/interfaces\/macs\/([0-9a-f:]{17})\/(.*)$/.exec(m);
  if (!em) return undefined;
  const eni = v.enis.find((e) => e.mac === em[1]);
  if (!eni) return undefined;
  const fields: Record<string, string> = {
    'device-number': String(eni.deviceNumber),
    'interface-id': eni.eniId,
    'local-ipv4s': eni.localIpv4s.join('\n'),
    mac: eni.mac,
    'owner-id': v.accountId,
    'security-group-ids': eni.securityGroupIds.join('\n'),
    'subnet-id': eni.subnetId,
    'subnet-ipv4-cidr-block': eni.subnetCidr,
    'vpc-id': eni.vpcId,
    'vpc-ipv4-cidr-block': eni.vpcCidrs[0] ?? '',
    'vpc-ipv4-cidr-blocks': eni.vpcCidrs.join('\n'),
  };
  if (eni.ipv4Prefixes.length) fields['ipv4-prefix'] = eni.ipv4Prefixes.join('\n');
  // IPv6 paths exist only when there is something to list (AWS EC2 User Guide,
  // "Instance metadata categories": network/interfaces/macs/mac/ipv6s, ipv6-prefix,
  // subnet-ipv6-cidr-blocks, vpc-ipv6-cidr-blocks).
  if (eni.ipv6s.length) fields.ipv6s = eni.ipv6s.join('\n');
  if (eni.ipv6Prefixes.length) fields['ipv6-prefix'] = eni.ipv6Prefixes.join('\n');
  if (eni.subnetIpv6Cidrs.length) fields['subnet-ipv6-cidr-blocks'] = eni.subnetIpv6Cidrs.join('\n');
  if (eni.vpcIpv6Cidrs.length) fields['vpc-ipv6-cidr-blocks'] = eni.vpcIpv6Cidrs.join('\n');
  if (em[2] === '') return Object.keys(fields).sort().join('\n');
  return fields[em[2]!];
}

/** The instance identity document (`dynamic/instance-identity/document`), pretty JSON as IMDS serves it. */
function identityDocument(v: ImdsInstanceView): string {
  return JSON.stringify(
    {
      accountId: v.accountId,
      architecture: 'x86_64',
      availabilityZone: v.availabilityZone,
      imageId: v.imageId,
      instanceId: v.instanceId,
      instanceType: v.instanceType,
      pendingTime: new Date(v.launchTime).toISOString(),
      privateIp: v.privateIp,
      region: v.region,
      version: '2017-09-30',
    },
    null,
    2,
  );
}

/** The IMDSv2 HTTP server. */
export class ImdsServer {
  private readonly server: http.Server;
  private readonly tokens = new Map<string, number>(); // token -> expiry ms epoch

  constructor(private readonly backend: ImdsBackend) {
    this.server = http.createServer((req, res) => this.handle(req, res));
  }

  /** Listens; resolves with the bound port. */
  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  /** Closes the server and its connections. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://imds');
    let path = url.pathname;
    let instanceId = this.backend.defaultInstanceId();
    const pm = /^\/(i-[0-9a-f]+)(\/.*)$/.exec(path);
    if (pm) {
      instanceId = pm[1];
      path = pm[2]!;
    }
    const send = (status: number, body: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body), ...headers });
      res.end(body);
    };
    req.resume();
    if (path === '/latest/api/token') {
      if (req.method !== 'PUT') return send(405, 'Method Not Allowed');
      const ttl = Number(req.headers['x-aws-ec2-metadata-token-ttl-seconds']);
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_TTL_S) return send(400, 'Bad Request');
      const token = hex(24);
      this.tokens.set(token, Date.now() + ttl * 1000);
      return send(200, token, { 'X-aws-ec2-metadata-token-ttl-seconds': String(ttl) });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'Method Not Allowed');
    const token = req.headers['x-aws-ec2-metadata-token'];
    const exp = typeof token === 'string' ? this.tokens.get(token) : undefined;
    if (exp === undefined || exp < Date.now()) return send(401, 'Unauthorized');
    if (!path.startsWith('/latest/')) return send(404, 'Not Found');
    const view = instanceId ? this.backend.view(instanceId) : undefined;
    if (!view) return send(404, 'Not Found');
    const junk = this.backend.garbage?.(path);
    if (junk !== undefined) return send(200, junk);
    const text = metadataText(view, path.slice('/latest/'.length));
    if (text === undefined) return send(404, 'Not Found');
    return send(200, text);
  }
}
