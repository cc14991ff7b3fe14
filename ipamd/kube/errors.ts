/**
 * Errors of ipamd's Kubernetes pod source.
 */

/**
 * The Kubernetes API could not be read: no configuration, connection refused, timeout,
 * HTTP 5xx or any other failed request. The caller must treat the source as unreadable
 * (docs/design.md#4-restore-after-restart: releases are frozen), never as "no pods".
 */
export class KubeUnavailableError extends Error {
  /** HTTP status when the API answered with an error, else undefined. */
  readonly statusCode?: number;

  constructor(message: string, o: { cause?: unknown; statusCode?: number } = {}) {
    super(message, o.cause !== undefined ? { cause: o.cause } : undefined);
    this.name = 'KubeUnavailableError';
    if (o.statusCode !== undefined) this.statusCode = o.statusCode;
  }
}

/** HTTP status carried by errors of @kubernetes/client-node (`code` on ApiException, `statusCode` on Watch errors). */
export function httpStatusOf(e: unknown): number | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const o = e as { code?: unknown; statusCode?: unknown };
  if (typeof o.statusCode === 'number') return o.statusCode;
  if (typeof o.code === 'number') return o.code;
  return undefined;
}

/** A one-line description of any error, for logs and `lastError`. */
export function describeError(e: unknown): string {
  if (e instanceof Error) {
    const status = httpStatusOf(e);
    const cause = (e as { cause?: unknown }).cause;
    const causeText = cause instanceof Error && !e.message.includes(cause.message) ? `: ${cause.message}` : '';
    return `${e.message.split('\n')[0]}${status !== undefined && !e.message.includes(String(status)) ? ` (HTTP ${status})` : ''}${causeText}`;
  }
  return String(e);
}
