/**
 * One small HTTP request for the IMDS client, over node:http (node:https for an https
 * endpoint), not the global `fetch`: `fetch` loads undici and compiles its WebAssembly
 * HTTP parser on first use, which costs ipamd 13–37 MiB of resident memory for a few
 * dozen tiny GETs (docs/design.md#16-footprint-and-latency). With an `agent` (the IMDS
 * client's keep-alive agent) requests reuse idle connections; a request whose reused
 * connection the server had closed (reset, or closed before any answer: the race every
 * keep-alive client has) is sent once more on a new connection of its own.
 */
import http from 'node:http';
import https from 'node:https';

/** What came back: the HTTP status and the body as UTF-8 text. */
export interface HttpAnswer {
  status: number;
  body: string;
}

/** Largest body accepted (bytes); IMDS answers are a few KiB. */
export const MAX_BODY_BYTES = 1 << 20;

/**
 * Sends `method url` with `headers` and reads the whole answer within `timeoutMs` (ms,
 * connection, headers and body together; a resend after a reset reused connection gets
 * its own `timeoutMs`). `agent`: an http.Agent to take connections from (keep-alive);
 * without it, one connection for the request.
 * @throws Error on a refused or reset connection, a timeout (`timed out after N ms`), a
 *   body over {@link MAX_BODY_BYTES}, or a URL that is neither http: nor https:.
 */
export async function httpRequest(
  url: string,
  o: { method?: string; headers?: Record<string, string>; timeoutMs: number; agent?: http.Agent },
): Promise<HttpAnswer> {
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new Error(`unsupported URL ${url}: only http: and https: are accepted`);
  try {
    return await requestOnce(u, o, o.agent ?? false);
  } catch (e) {
    if (!(e instanceof ReusedConnectionClosed)) throw e;
    return requestOnce(u, o, false);
  }
}

/** A request that failed on a reused keep-alive connection before any answer arrived. */
class ReusedConnectionClosed extends Error {}

function requestOnce(
  u: URL,
  o: { method?: string; headers?: Record<string, string>; timeoutMs: number },
  agent: http.Agent | false,
): Promise<HttpAnswer> {
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise<HttpAnswer>((resolve, reject) => {
    let answered = false;
    const req = mod.request(u, { method: o.method ?? 'GET', headers: o.headers ?? {}, agent }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > MAX_BODY_BYTES) req.destroy(new Error(`answer over ${MAX_BODY_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', fail);
    });
    let timedOut = false;
    function fail(e: Error): void {
      clearTimeout(timer);
      const closedUnderUs =
        req.reusedSocket &&
        !answered &&
        !timedOut &&
        ['ECONNRESET', 'EPIPE'].includes((e as { code?: string }).code ?? '');
      reject(closedUnderUs ? new ReusedConnectionClosed(e.message) : e);
    }
    const timer = setTimeout(() => {
      timedOut = true;
      req.destroy(new Error(`timed out after ${o.timeoutMs} ms`));
    }, o.timeoutMs);
    req.on('error', fail);
    req.end();
  });
}
