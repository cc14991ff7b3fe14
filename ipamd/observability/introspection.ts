/**
 * Introspection HTTP endpoint (INTROSPECTION_BIND_ADDRESS, default 127.0.0.1:61679 like
 * amazon-vpc-cni-k8s): read-only JSON for operators, their scripts and tests.
 *   GET /                               {"AvailableCommands": [paths]} (upstream's index)
 *   GET /v1/enis                        ENIs, CIDRs and addresses (upstream's shape, see introspect-enis.ts)
 *   GET /v1/eni-configs                 the node's ENIConfig name (a JSON string, e.g. "us-west-2a" or
 *                                       "default"), as aws-node answers it; 404 "Not Found" when custom
 *                                       networking is off or the node cannot be read (as upstream then)
 *   GET /v1/ipamd-env-settings          the pool settings in force, by env var name
 *   GET /v1/networkutils-env-settings   the host-networking settings in force, by env var name
 *   GET /v1/status                      ours: pool counts, ENIs, release freeze and why, waiting ADDs
 *   GET /v1/allocations                 ours: every attachment (key, IPv4/ENI, IPv6, egress IPv4, pod)
 *   GET /v1/stage-trace                 ours: ADD/DEL and checkpoint write latency per stage (service/stage-trace.ts)
 * Only GET and HEAD: any other method answers 405 with `Allow: GET, HEAD`; nothing that
 * changes state is reachable over TCP. Unknown paths answer 404 (JSON).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A producer of the JSON documents served; each is computed per request. */
export interface IntrospectionSource {
  status(): unknown;
  allocations(): unknown;
  enis?(): unknown;
  /** The node's ENIConfig name, or undefined (404) when custom networking is off or the node is unreadable. */
  eniConfig?(): string | undefined;
  ipamdEnv?(): Record<string, unknown>;
  networkEnv?(): Record<string, unknown>;
  /** Per-stage latency summary of the request path (service/stage-trace.ts). */
  stageTrace?(): unknown;
}

/** Parses `host:port` (`:61679` = all interfaces). @throws Error for a malformed address. */
export function parseBindAddress(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const port = Number(addr.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`bad bind address "${addr}": expected host:port`);
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, '') || '0.0.0.0', port };
}

/** The routes served, in the order `GET /` lists them: path → body producer (undefined body = 404). */
function routes(src: IntrospectionSource): Record<string, () => unknown> {
  return {
    '/v1/enis': () => src.enis?.() ?? {},
    '/v1/eni-configs': () => src.eniConfig?.(),
    '/v1/ipamd-env-settings': () => src.ipamdEnv?.() ?? {},
    '/v1/networkutils-env-settings': () => src.networkEnv?.() ?? {},
    '/v1/status': () => src.status(),
    '/v1/allocations': () => src.allocations(),
    '/v1/stage-trace': () => src.stageTrace?.() ?? {},
  };
}

/** Starts the endpoint; resolves with the server and the bound port. @throws Error for a bad address or a port in use. */
export async function startIntrospection(
  bind: string,
  src: IntrospectionSource,
): Promise<{ server: http.Server; port: number }> {
  const { host, port } = parseBindAddress(bind);
  const table = routes(src);
  const index = JSON.stringify({ AvailableCommands: Object.keys(table) });
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res
        .writeHead(405, { 'content-type': 'application/json', allow: 'GET, HEAD' })
        .end('{"error":"method not allowed: introspection is read-only (GET, HEAD)"}');
      return;
    }
    const route = (req.url ?? '').split('?')[0]!;
    let body: string | undefined;
    try {
      if (route === '/') body = index;
      else if (Object.hasOwn(table, route)) {
        const v = table[route]!();
        body = v === undefined ? undefined : JSON.stringify(v);
      }
    } catch (e) {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: (e as Error).message }));
      return;
    }
    if (body === undefined) {
      if (route === '/v1/eni-configs')
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not Found\n');
      else res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
