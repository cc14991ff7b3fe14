/**
 * A real Kubernetes API server for tests: etcd v3.6 and kube-apiserver v1.36 (the
 * binaries of cluster/build.sh) on 127.0.0.1 with free ports, no kubelet, no controller
 * manager. Static tokens (kit/cluster/pki.ts) for admin, `--authorization-mode=Node,RBAC`,
 * an audit log of every request (the evidence a test reads instead of a stand-in's
 * request list), and pods served straight from etcd (`--watch-cache-sizes=pods#0`) so a
 * test can expire a pod watch's resourceVersion by a real etcd compaction (see
 * {@link compactEtcd}). Everything lives in one temp dir, removed by close().
 *
 * Most tests share one per test run: test/cluster/apiserver-shared.ts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { waitFor } from '../wait.js';
import { clusterBinaries } from './binaries.js';
import { startDaemon, type DaemonProcess } from './daemon-process.js';
import { makePki } from './pki.js';

/** Where a running API server is; what a test needs to reach it. JSON-serialisable. */
export interface ApiServerInfo {
  /** https://127.0.0.1:<port> */
  url: string;
  /** etcd's client URL (http://127.0.0.1:<port>), for compaction. */
  etcdUrl: string;
  /** The CA that signed the serving certificate (PEM file). */
  caCert: string;
  /** Kubeconfig of `eni-ipam-admin` (system:masters). */
  adminKubeconfig: string;
  /** The audit log (JSON lines, audit.k8s.io/v1 Event at Metadata level, stage ResponseComplete). */
  auditLog: string;
  /** The temp dir holding all of it. */
  dir: string;
  /** Pids of etcd and kube-apiserver (process-group leaders). */
  pids: number[];
}

/** A running API server this process started. */
export interface ApiServer extends ApiServerInfo {
  procs: DaemonProcess[];
  /** Stops kube-apiserver then etcd and removes the dir. Idempotent. */
  close(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/**
 * GET `url` trusting `caCert` (PEM path), with an optional bearer `token`.
 * @returns the status and body; never throws for a non-2xx answer.
 * @throws Error on a connection error or after `timeoutMs` (default 5000).
 */
export function httpsGet(
  url: string,
  caCert: string,
  token?: string,
  timeoutMs = 5000,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        ca: readFileSync(caCert),
        headers: token ? { Authorization: `Bearer ${token}` } : {},
        timeout: timeoutMs,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
`;

/** The token of `user` in a static token file (`token,user,uid,...` lines). */
export function staticToken(tokenFile: string, user: string): string {
  const line = readFileSync(tokenFile, 'utf8')
    .split('\n')
    .find((l) => l.split(',')[1] === user);
  if (!line) throw new Error(`no token for ${user} in ${tokenFile}`);
  return line.split(',')[0]!;
}

/**
 * Starts etcd and kube-apiserver and waits for `/readyz` (admin token).
 * `extraFlags` are appended to kube-apiserver's command line.
 * @throws Error naming the component that exited or did not become ready (log tail
 *   included); what was started is stopped and the dir removed first.
 */
export async function startApiServer(o: { extraFlags?: string[]; readyMs?: number } = {}): Promise<ApiServer> {
  const bins = await clusterBinaries();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-apiserver-'));
  const procs: DaemonProcess[] = [];
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      for (const p of [...procs].reverse()) await p.stop(5000);
      await rm(dir, { recursive: true, force: true });
    })());
  try {
    const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
    const url = `https://127.0.0.1:${apiPort}`;
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const pki = await makePki({
      dir,
      nodeNames: ['node-1'],
      server: url,
      sanIps: ['127.0.0.1'],
      serviceIp: '10.96.0.1',
    });
    const policy = path.join(dir, 'audit-policy.yaml');
    await writeFile(policy, AUDIT_POLICY);
    const auditLog = path.join(dir, 'audit.log');
    const start = (name: string, argv: string[]): DaemonProcess => {
      const p = startDaemon({ name, argv, logFile: path.join(dir, `${name}.log`) });
      procs.push(p);
      return p;
    };
    const etcd = start('etcd', [
      path.join(bins.etcd, 'etcd'),
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ]);
    const api = start('kube-apiserver', [
      path.join(bins.k8s, 'kube-apiserver'),
      `--etcd-servers=${etcdUrl}`,
      '--advertise-address=127.0.0.1',
      '--bind-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${path.join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${pki.apiserverCert}`,
      `--tls-private-key-file=${pki.apiserverKey}`,
      `--client-ca-file=${pki.caCert}`,
      `--token-auth-file=${pki.tokenFile}`,
      '--authorization-mode=Node,RBAC',
      '--service-cluster-ip-range=10.96.0.0/16',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      '--watch-cache-sizes=pods#0',
      `--audit-policy-file=${policy}`,
      `--audit-log-path=${auditLog}`,
      '--endpoint-reconciler-type=none',
      '--profiling=false',
      '--v=1',
      ...(o.extraFlags ?? []),
    ]);
    const token = staticToken(pki.tokenFile, 'eni-ipam-admin');
    await waitFor(
      'kube-apiserver /readyz',
      async () => {
        for (const p of [etcd, api]) if (p.exited()) throw new Error(`${p.name} exited:\n${p.tail()}`);
        return (await httpsGet(`${url}/readyz`, pki.caCert, token, 2000).catch(() => ({ status: 0 }))).status === 200;
      },
      o.readyMs ?? 120_000,
      200,
    ).catch((e: Error) => {
      throw new Error(`the test API server did not start: ${e.message}\n--- kube-apiserver (tail) ---\n${api.tail()}`);
    });
    return {
      url,
      etcdUrl,
      caCert: pki.caCert,
      adminKubeconfig: pki.kubeconfigs['admin']!,
      auditLog,
      dir,
      pids: procs.map((p) => p.pid),
      procs,
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * Compacts etcd's history up to its current revision (etcd's gRPC gateway:
 * `POST /v3/kv/range`, then `POST /v3/kv/compaction`), as kube-apiserver's own compactor
 * does every 5 minutes: a pod watch resumed from an older resourceVersion then gets
 * an ERROR event 410 Expired (pods are not watch-cached here). @returns the revision compacted to.
 * @throws Error on a non-2xx answer.
 */
export async function compactEtcd(s: Pick<ApiServerInfo, 'etcdUrl'>): Promise<number> {
  const post = async (p: string, body: unknown): Promise<Record<string, unknown>> => {
    const r = await fetch(`${s.etcdUrl}${p}`, { method: 'POST', body: JSON.stringify(body) });
    if (!r.ok) throw new Error(`etcd ${p}: HTTP ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  };
  const range = await post('/v3/kv/range', { key: Buffer.from('/').toString('base64'), limit: 1 });
  const revision = Number((range['header'] as { revision: string }).revision);
  await post('/v3/kv/compaction', { revision: String(revision), physical: true });
  return revision;
}
