/**
 * Errors of ipamd's Kubernetes calls, as one readable line for the log, the freeze reason,
 * the node condition and its Event (docs/troubleshooting.md). @kubernetes/client-node's
 * ApiException message is an HTTP dump (`HTTP-Code: 403\nMessage: Unknown API Status
 * Code!\nBody: "{\"kind\":\"Status\"…}"\nHeaders: …`) for any status its generated client
 * does not declare, 403 included; the Kubernetes `Status` in its body says what happened
 * (for a 403: the verb, the resource and the user, e.g. `pods is forbidden: User
 * "system:serviceaccount:kube-system:eni-ipam" cannot list resource "pods" in API group ""
 * at the cluster scope`). https://kubernetes.io/docs/reference/using-api/api-concepts/#response-status-kind
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

/** The parts of a Kubernetes `Status` a line needs. */
interface StatusBody {
  message?: string;
  reason?: string;
}

/** The `Status` in an ApiException's `body` (a JSON string, or already an object), or undefined. */
function statusBody(e: unknown): StatusBody | undefined {
  if (typeof e !== 'object' || e === null || !('body' in e)) return undefined;
  let body = (e as { body: unknown }).body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const s = body as { kind?: unknown; message?: unknown; reason?: unknown };
  if (typeof s.message !== 'string' && typeof s.reason !== 'string') return undefined;
  return {
    ...(typeof s.message === 'string' ? { message: s.message } : {}),
    ...(typeof s.reason === 'string' ? { reason: s.reason } : {}),
  };
}

/** `HTTP 403 Forbidden: <the Status message>` for an answer with an HTTP status, else undefined. */
function httpLine(e: unknown): string | undefined {
  const status = httpStatusOf(e);
  if (status === undefined) return undefined;
  const body = statusBody(e);
  const text = e instanceof Error ? e.message : '';
  // A Watch error's message is the status text; an ApiException's is the dump (never shown).
  const reason = body?.reason ?? (text && !text.includes('\n') && !text.startsWith('HTTP-Code') ? text : undefined);
  const message = body?.message && body.message !== reason ? `: ${body.message.split('\n')[0]}` : '';
  return `HTTP ${status}${reason ? ` ${reason}` : ''}${message}`;
}

/**
 * A one-line description of any error, for logs and `lastError`: an API answer as
 * `HTTP <code> <reason>: <Status message>`, any other error by the first line of its message,
 * followed by its cause's description when the message does not hold it yet. Never the dump.
 */
export function describeError(e: unknown): string {
  // Ours carry the HTTP status too, but their message is already the line.
  const http = e instanceof KubeUnavailableError ? undefined : httpLine(e);
  if (http) return http;
  if (!(e instanceof Error)) return String(e);
  const first = e.message.split('\n')[0]!;
  const cause = (e as { cause?: unknown }).cause;
  if (cause === undefined || cause === null) return first;
  const causeText = describeError(cause);
  return first.includes(causeText) ? first : `${first}: ${causeText}`;
}

/** What a Kubernetes call was, for {@link describeApiCall}: `list`, `pods (spec.nodeName=n1)`, who asked. */
export interface ApiCall {
  verb: string;
  resource: string;
  /** The identity the call was made as (kube/config.ts `kubeIdentity`), when known. */
  identity?: string | undefined;
}

/**
 * One line for a failed call: `<verb> <resource> [as <identity>]: <describeError>`, the
 * identity left out when the server's message already names the user (a 403's does).
 */
export function describeApiCall(call: ApiCall, e: unknown): string {
  const what = describeError(e);
  const who = call.identity && !what.includes(`User "${call.identity}"`) ? ` as ${call.identity}` : '';
  return `${call.verb} ${call.resource}${who}: ${what}`;
}
