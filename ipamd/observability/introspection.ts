/**
 * Introspection HTTP endpoint (default 127.0.0.1:61679, like amazon-vpc-cni-k8s):
 * read-only JSON for operators and tests.
 *   GET /v1/status       pool counts, ENIs, release freeze and its reasons, waiting ADDs
 *   GET /v1/allocations  every allocation (key, IP, ENI, pod)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A producer of the JSON documents served. */
export interface IntrospectionSource {
  status(): unknown;
  allocations(): unknown;
}

/** Parses `host:port` (`:61679` = all interfaces). @throws Error for a malformed address. */
export function parseBindAddress(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const port = Number(addr.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad bind address "${addr}": expected host:port`);
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, '') || '0.0.0.0', port };
}

/** Starts the endpoint; resolves with the server and the bound port. */
export async function startIntrospection(bind: string, src: IntrospectionSource): Promise<{ server: http.Server; port: number }> {
  const { host, port } = parseBindAddress(bind);
  const server = http.createServer((req, res) => {
    const route = (req.url ?? '').split('?')[0];
    const body = route === '/v1/status' ? src.status() : route === '/v1/allocations' ? src.allocations() : undefined;
    if (req.method !== 'GET' || body === undefined) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body, null, 1));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
