/**
 * The Prometheus metrics endpoint (METRICS_BIND_ADDRESS, default `:61678` like
 * amazon-vpc-cni-k8s; off with DISABLE_METRICS): `GET /metrics` in the Prometheus text
 * format (prom-client's registry content type). Anything else is 404.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseBindAddress } from './introspection.js';
import type { IpamdMetrics } from './metrics.js';

/** A running metrics endpoint. */
export interface MetricsServer {
  server: http.Server;
  /** The bound port (useful with port 0). */
  port: number;
  /** Stops listening and closes idle keep-alive connections. */
  close(): Promise<void>;
}

/**
 * Serves `metrics` on `bind` (`host:port`; `:61678` = all interfaces).
 * @throws Error for a malformed address or when the port cannot be bound (e.g. EADDRINUSE).
 */
export async function startMetricsServer(bind: string, metrics: IpamdMetrics): Promise<MetricsServer> {
  const { host, port } = parseBindAddress(bind);
  const server = http.createServer((req, res) => {
    const route = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || route !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    metrics.text().then(
      (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
      (e: Error) =>
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics collection failed: ${e.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
