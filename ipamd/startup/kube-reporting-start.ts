/**
 * Starts Kubernetes reporting (Events, the node condition, the taint:
 * observability/kube-reporting.ts) once ipamd serves, loading the Kubernetes client only
 * then, so it costs start-up nothing. A client that cannot be loaded is logged at error
 * and ipamd serves without reporting.
 */
import type { Logger } from '../log.js';
import type { KubeReporter } from '../observability/kube-reporter.js';
import type { KubeReportingDeps } from '../observability/kube-reporting.js';

/** The reporter once started (undefined before, or without a node name), and when that is settled. */
export interface LazyKubeReporting {
  /** Settles once the reporter started, or could not (never rejects). */
  ready: Promise<void>;
  reporter(): KubeReporter | undefined;
}

/**
 * Waits for `serving`, then starts reporting with `deps` unless `stopping()` is true by then.
 * Never throws.
 */
export function startKubeReportingWhenServing(
  serving: Promise<unknown>,
  deps: KubeReportingDeps,
  stopping: () => boolean,
  log: Logger,
): LazyKubeReporting {
  let reporter: KubeReporter | undefined;
  const ready = serving
    .then(() => import('../observability/kube-reporting.js'))
    .then(
      ({ startKubeReporting }) => {
        if (!stopping()) reporter = startKubeReporting(deps);
      },
      (e: Error) =>
        log.error({ err: e.message }, 'could not load the Kubernetes client: no Events, node condition or taint'),
    );
  return { ready, reporter: () => reporter };
}
