/**
 * ipamd's two HTTP endpoints, started together and closed together: introspection
 * (INTROSPECTION_BIND_ADDRESS, read-only `/v1/*` JSON; observability/introspection.ts) and
 * Prometheus metrics (METRICS_BIND_ADDRESS, `/metrics`; observability/metrics-server.ts),
 * each off with DISABLE_INTROSPECTION / DISABLE_METRICS.
 */
import type { IpamdConfig } from '../config.js';
import { startIntrospection, type IntrospectionSource } from './introspection.js';
import type { IpamdMetrics } from './metrics.js';
import { startMetricsServer } from './metrics-server.js';

/** The started endpoints. */
export interface HttpEndpoints {
  /** The introspection server's bound port (the kernel's pick for port 0); undefined when disabled. */
  introspectionPort: number | undefined;
  /** The metrics server's bound port; undefined when disabled. */
  metricsPort: number | undefined;
  /** Stops listening on both (idle keep-alive connections closed). */
  close(): Promise<void>;
}

/**
 * Starts the endpoints `config` enables. When the metrics server cannot start, the
 * introspection server already started is closed before the error is thrown.
 * @throws Error for a bad bind address or a port in use (the message names the address).
 */
export async function startHttpEndpoints(
  config: Pick<
    IpamdConfig,
    'disableIntrospection' | 'introspectionBindAddress' | 'disableMetrics' | 'metricsBindAddress'
  >,
  introspect: IntrospectionSource,
  metrics: IpamdMetrics,
): Promise<HttpEndpoints> {
  const introspection = config.disableIntrospection
    ? undefined
    : await startIntrospection(config.introspectionBindAddress, introspect);
  const closeIntrospection = () =>
    new Promise<void>((r) => (introspection ? introspection.server.close(() => r()) : r()));
  let metricsServer;
  try {
    metricsServer = config.disableMetrics ? undefined : await startMetricsServer(config.metricsBindAddress, metrics);
  } catch (e) {
    await closeIntrospection();
    throw e;
  }
  return {
    introspectionPort: introspection?.port,
    metricsPort: metricsServer?.port,
    async close() {
      await closeIntrospection();
      await metricsServer?.close();
    },
  };
}
