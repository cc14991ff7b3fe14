/**
 * The EC2 Query API HTTP server: decodes `application/x-www-form-urlencoded` requests
 * (AWS EC2 API Reference, "Query requests"; the SigV4 signature is not checked), applies
 * the IAM policy when one is set (./iam.ts: 403 UnauthorizedOperation), the fault knobs
 * (throttle → latency → injected error, which fails the call before or after the action
 * takes effect, or withholds the answer), runs the action, answers with
 * EC2 XML, and records every call. Also serves the JSON admin endpoints:
 * `GET /_sim/calls`, `GET /_sim/state`, `GET|POST /_sim/faults`, `POST /_sim/reset-calls`.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { ACTIONS, callInstanceId } from './ec2-actions.js';
import { Ec2ApiError } from './ec2-errors.js';
import { renderError, renderResponse, type XmlTree } from './ec2-xml.js';
import { NO_RESPONSE, type DrawnFault, type FaultInjector } from './faults.js';
import { authorize, type IamPolicy } from './iam.js';
import type { CloudModel } from './cloud-model.js';
import { parseForm } from './query-params.js';
import { stateToJson } from './state-json.js';
import type { ApiCallRecord } from './types.js';

/** Largest request body accepted, bytes. */
const MAX_BODY = 1 << 20;

/** The EC2 endpoint. `calls` is shared with the owner (appended to, never replaced). */
export class Ec2Server {
  private readonly server: http.Server;
  private readonly sleeps = new Set<{ timer: NodeJS.Timeout; done: () => void }>();
  /** The identity policy calls are authorized against (./iam.ts); undefined: every call allowed. */
  iamPolicy: IamPolicy | undefined;

  constructor(
    private readonly model: CloudModel,
    private readonly faults: FaultInjector,
    private readonly calls: ApiCallRecord[],
  ) {
    this.server = http.createServer((req, res) => {
      this.route(req, res).catch((e: unknown) => {
        if (!res.headersSent)
          sendXml(
            res,
            500,
            renderError('InternalError', `An internal error has occurred: ${(e as Error).message}`, randomUUID()),
          );
      });
    });
  }

  /** Listens; resolves with the bound port. */
  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  /** Closes the server, its connections, and ends pending latency waits. */
  close(): Promise<void> {
    for (const s of this.sleeps) {
      clearTimeout(s.timer);
      s.done();
    }
    this.sleeps.clear();
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://ec2');
    const body = await readBody(req);
    if (url.pathname.startsWith('/_sim/')) return this.admin(req.method ?? 'GET', url.pathname, body, res);
    const params = req.method === 'POST' ? parseForm(body) : Object.fromEntries(url.searchParams);
    return this.ec2(params, res);
  }

  private admin(method: string, path: string, body: string, res: http.ServerResponse): void {
    const json = (status: number, v: unknown): void => {
      const s = JSON.stringify(v);
      res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
      res.end(s);
    };
    if (method === 'GET' && path === '/_sim/calls') return json(200, this.calls);
    if (method === 'GET' && path === '/_sim/state') return json(200, stateToJson(this.model.state));
    if (method === 'GET' && path === '/_sim/faults') return json(200, this.faults.snapshot());
    if (method === 'POST' && path === '/_sim/reset-calls') {
      this.calls.length = 0;
      return json(200, { ok: true });
    }
    if (method === 'POST' && path === '/_sim/faults') {
      try {
        this.faults.configure(body.trim() ? JSON.parse(body) : {});
      } catch (e) {
        return json(400, { error: (e as Error).message });
      }
      return json(200, { ok: true, faults: this.faults.snapshot() });
    }
    return json(404, { error: `no admin endpoint ${method} ${path}` });
  }

  private async ec2(params: Record<string, string>, res: http.ServerResponse): Promise<void> {
    const action = params.Action ?? '';
    const requestId = randomUUID();
    const t0 = Date.now();
    const rec: ApiCallRecord = { action, params, at: t0, ok: false };
    const inst = safeInstanceId(this.model, params);
    if (inst) rec.instanceId = inst;
    this.calls.push(rec);
    try {
      if (!action) throw new Ec2ApiError('MissingAction', 'The request must contain the parameter Action');
      const handler = ACTIONS.get(action);
      if (!handler) throw new Ec2ApiError('InvalidAction', `The action ${action} is not valid for this web service.`);
      if (this.iamPolicy)
        authorize(this.iamPolicy, { region: this.model.state.region, account: this.model.state.accountId }, params);
      if (!this.faults.takeToken(action)) throw new Ec2ApiError('RequestLimitExceeded', 'Request limit exceeded.');
      const delay = this.faults.latencyFor(action);
      if (delay > 0) await this.sleep(delay);
      const injected = this.faults.takeInjectedError(action, { laterPage: params.NextToken !== undefined });
      if (injected?.when === 'before') return await this.injectedFailure(injected, rec, res, t0);
      if (params.DryRun === 'true')
        throw new Ec2ApiError('DryRunOperation', 'Request would have succeeded, but DryRun flag is set.', 412);
      const body = handler(this.model, params);
      if (action === 'AssignPrivateIpAddresses') rec.assigned = assignedIn(body);
      // 'after': the action took effect, but the client hears a failure (or nothing).
      if (injected) return await this.injectedFailure(injected, rec, res, t0);
      const xml = this.faults.garbage.garble(action, renderResponse(action, requestId, body));
      rec.ok = true;
      rec.durationMs = Date.now() - t0;
      sendXml(res, 200, xml, requestId);
    } catch (e) {
      const err =
        e instanceof Ec2ApiError
          ? e
          : new Ec2ApiError('InternalError', `An internal error has occurred: ${(e as Error).message}`);
      rec.errorCode = err.code;
      rec.durationMs = Date.now() - t0;
      sendXml(res, err.status, renderError(err.code, err.message, requestId), requestId);
    }
  }

  /**
   * Answers a call that drew an injected fault: the EC2 error, or for {@link NO_RESPONSE}
   * no answer at all until the client hangs up (or the server closes).
   */
  private async injectedFailure(
    f: DrawnFault,
    rec: ApiCallRecord,
    res: http.ServerResponse,
    t0: number,
  ): Promise<void> {
    if (f.code !== NO_RESPONSE) throw new Ec2ApiError(f.code, f.message);
    rec.errorCode = NO_RESPONSE;
    if (!res.destroyed) await new Promise<void>((resolve) => res.once('close', () => resolve()));
    rec.durationMs = Date.now() - t0;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry: { timer: NodeJS.Timeout; done: () => void } = {
        timer: setTimeout(() => {
          this.sleeps.delete(entry);
          resolve();
        }, ms),
        done: () => resolve(),
      };
      this.sleeps.add(entry);
    });
  }
}

function safeInstanceId(model: CloudModel, p: Record<string, string>): string | undefined {
  try {
    return callInstanceId(model, p);
  } catch {
    return undefined;
  }
}

function sendXml(res: http.ServerResponse, status: number, xml: string, requestId = randomUUID()): void {
  if (res.destroyed) return;
  res.writeHead(status, {
    'Content-Type': 'text/xml;charset=UTF-8',
    'Content-Length': Buffer.byteLength(xml),
    'x-amzn-RequestId': requestId,
  });
  res.end(xml);
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > MAX_BODY) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The addresses and prefixes an AssignPrivateIpAddresses response body names (ec2-actions.ts shape). */
function assignedIn(body: XmlTree): string[] {
  const b = body as Record<string, { item?: Array<Record<string, string>> } | undefined>;
  return [
    ...(b['assignedPrivateIpAddressesSet']?.item ?? []).map((i) => i['privateIpAddress'] ?? ''),
    ...(b['assignedIpv4PrefixSet']?.item ?? []).map((i) => i['ipv4Prefix'] ?? ''),
  ];
}
