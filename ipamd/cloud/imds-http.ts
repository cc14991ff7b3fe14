/**
 * One small HTTP request for the IMDS client, over node:http (node:https for an https
 * endpoint), not the global `fetch`: `fetch` loads undici and compiles its WebAssembly
 * HTTP parser on first use, which costs ipamd 13–37 MiB of resident memory for a few
 * dozen tiny GETs (docs/design.md#16-footprint-and-latency). No keep-alive: every
 * request has its own connection, so none can race a server closing an idle one.
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
 * connection, headers and body together).
 * @throws Error on a refused or reset connection, a timeout (`timed out after N ms`), a
 *   body over {@link MAX_BODY_BYTES}, or a URL that is neither http: nor https:.
 */
export function httpRequest(
  url: string,
  o: { method?: string; headers?: Record<string, string>; timeoutMs: number },
): Promise<HttpAnswer> {
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return Promise.reject(new Error(`unsupported URL ${url}: only http: and https: are accepted`));
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise<HttpAnswer>((resolve, reject) => {
    const req = mod.request(u, { method: o.method ?? 'GET', headers: o.headers ?? {}, agent: false }, (res) => {
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
    function fail(e: Error): void {
      clearTimeout(timer);
      reject(e);
    }
    const timer = setTimeout(() => req.destroy(new Error(`timed out after ${o.timeoutMs} ms`)), o.timeoutMs);
    req.on('error', fail);
    req.end();
  });
}
