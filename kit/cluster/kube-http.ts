/**
 * Raw HTTP(S) calls to a Kubernetes API server (the real one over TLS with a bearer
 * token, or sim/kube over plain HTTP), answering status codes and parsed bodies as they
 * came: what the contract test compares and what tests use to set the scene
 * (https://kubernetes.io/docs/reference/using-api/api-concepts/). No client library in
 * between, so nothing is normalised away.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** One answer: HTTP status, Content-Type and the body (parsed when JSON, else the text). */
export interface KubeAnswer {
  status: number;
  contentType: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests index into arbitrary API objects
  body: any;
}

/** A watch stream being read: its HTTP status, the events so far, and a way to end it. */
export interface WatchReader {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- watch events of any resource
  events: Array<{ type: string; object: any }>;
  /** Resolves when the server ended the stream (or close() was called). */
  ended: Promise<void>;
  close(): void;
}

/** A base URL and credentials. */
export interface KubeHttp {
  url: string;
  /** One request; `body` is sent as JSON with `contentType` (default application/json). Never throws for a status. */
  call(method: string, path: string, body?: unknown, contentType?: string): Promise<KubeAnswer>;
  /** Opens `GET path` (a watch) and collects its events line by line. @throws on a connection error. */
  watch(path: string): Promise<WatchReader>;
}

/** The bearer token and CA file of a kubeconfig written by pki.ts or sim/kube. */
export function kubeconfigCredentials(kubeconfig: string): { server: string; token: string; ca?: string } {
  const k = parse(readFileSync(kubeconfig, 'utf8')) as {
    clusters: Array<{ cluster: { server: string; 'certificate-authority'?: string } }>;
    users: Array<{ user: { token: string } }>;
  };
  const c = k.clusters[0]!.cluster;
  return {
    server: c.server,
    token: k.users[0]!.user.token,
    ...(c['certificate-authority'] ? { ca: c['certificate-authority'] } : {}),
  };
}

/** A {@link KubeHttp} with the identity and server of `kubeconfig`. */
export function kubeHttp(kubeconfig: string): KubeHttp {
  const { server, token, ca } = kubeconfigCredentials(kubeconfig);
  const caPem = ca ? readFileSync(ca) : undefined;
  const open = (method: string, p: string, data?: string, contentType?: string): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string> = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
      if (data !== undefined) {
        headers['Content-Type'] = contentType ?? 'application/json';
        headers['Content-Length'] = String(Buffer.byteLength(data));
      }
      const u = new URL(p, server);
      const req =
        u.protocol === 'https:' ? httpsRequest(u, { method, headers, ca: caPem }) : httpRequest(u, { method, headers });
      req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${p}: no answer within 30 s`)));
      req.on('response', resolve);
      req.on('error', reject);
      req.end(data);
    });
  return {
    url: server,
    async call(method, p, body, contentType) {
      const res = await open(method, p, body === undefined ? undefined : JSON.stringify(body), contentType);
      let text = '';
      res.setEncoding('utf8');
      for await (const d of res) text += d as string;
      const ct = String(res.headers['content-type'] ?? '');
      let parsed: unknown = text;
      if (ct.includes('json')) parsed = JSON.parse(text);
      return { status: res.statusCode ?? 0, contentType: ct, body: parsed };
    },
    async watch(p) {
      const res = await open('GET', p);
      const r: WatchReader = {
        status: res.statusCode ?? 0,
        events: [],
        ended: Promise.resolve(),
        close: () => res.destroy(),
      };
      let buf = '';
      res.setEncoding('utf8');
      r.ended = new Promise((resolve) => {
        res.on('data', (d: string) => {
          buf += d;
          for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 1);
            if (line) r.events.push(JSON.parse(line) as WatchReader['events'][number]);
          }
        });
        res.on('end', () => resolve());
        res.on('close', () => resolve());
        res.on('error', () => resolve());
      });
      return r;
    },
  };
}
