/**
 * The real Prometheus server (Debian's `prometheus` package, /usr/bin/prometheus) for
 * tests: on loopback on a free port, with its own temp data dir, scraping the given
 * targets at a short interval and evaluating the given rule files. Queried through its
 * HTTP API (prometheus.io/docs/prometheus/latest/querying/api/). `stop()` ends it and
 * removes the dir.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { waitFor } from '../../kit/wait.js';

/** The prometheus binary (scripts/ensure-deps.sh --containerd installs it). */
export const PROMETHEUS_BIN = '/usr/bin/prometheus';

/** One series of an instant vector: its labels and value (NaN and ±Inf as numbers). */
export interface PromSeries {
  metric: Record<string, string>;
  value: number;
}
/** One active alert of /api/v1/alerts. */
export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

/** A running Prometheus. */
export interface PrometheusServer {
  /** e.g. http://127.0.0.1:40123 */
  url: string;
  /** Instant query (`/api/v1/query`). @throws Error with Prometheus's error text on a bad query. */
  query(expr: string): Promise<PromSeries[]>;
  /** The active (pending or firing) alerts (`/api/v1/alerts`). */
  alerts(): Promise<PromAlert[]>;
  /** The scrape targets' health (`/api/v1/targets`), by scrape URL. */
  targets(): Promise<Array<{ scrapeUrl: string; health: string; lastError: string }>>;
  /** Stops the server (SIGTERM, SIGKILL after 5 s) and removes its dir; idempotent. */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (bound and released; the caller binds it soon after). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function exited(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Starts Prometheus scraping `targets` (host:port, job `job`) every `scrapeInterval`
 * and evaluating `ruleFiles` every `evaluationInterval`; resolves once `/-/ready` answers.
 * @throws Error with Prometheus's output when it exits or is not ready within 20 s.
 */
export async function startPrometheus(p: {
  targets: string[];
  job: string;
  ruleFiles?: string[];
  scrapeInterval?: string;
  evaluationInterval?: string;
}): Promise<PrometheusServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-prom-'));
  const config = [
    'global:',
    `  scrape_interval: ${p.scrapeInterval ?? '1s'}`,
    '  scrape_timeout: 900ms',
    `  evaluation_interval: ${p.evaluationInterval ?? '1s'}`,
    `rule_files: ${JSON.stringify(p.ruleFiles ?? [])}`,
    'scrape_configs:',
    `  - job_name: ${JSON.stringify(p.job)}`,
    '    static_configs:',
    `      - targets: ${JSON.stringify(p.targets)}`,
    '',
  ].join('\n');
  await writeFile(path.join(dir, 'prometheus.yml'), config);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  const child = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
      '--storage.tsdb.retention.time=1h',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout!.on('data', (b: Buffer) => {
    output += b.toString();
  });
  child.stderr!.on('data', (b: Buffer) => {
    output += b.toString();
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      if (!(await exited(child, 5000))) {
        child.kill('SIGKILL');
        await exited(child, 5000);
      }
    }
    await rm(dir, { recursive: true, force: true });
  };
  const api = async <T>(pathAndQuery: string): Promise<T> => {
    const r = await fetch(`${url}${pathAndQuery}`);
    const body = (await r.json()) as { status: string; data: T; error?: string; errorType?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${pathAndQuery}: ${body.errorType}: ${body.error}`);
    return body.data;
  };
  try {
    await waitFor(
      `Prometheus ready on ${url}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}: ${output}`);
        return (await fetch(`${url}/-/ready`).catch(() => undefined))?.status === 200;
      },
      20_000,
      100,
    );
  } catch (e) {
    await stop();
    throw new Error(`${(e as Error).message}\nprometheus output:\n${output}`);
  }
  return {
    url,
    async query(expr) {
      const d = await api<{
        resultType: string;
        result: Array<{ metric: Record<string, string>; value: [number, string] }>;
      }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      if (d.resultType !== 'vector') throw new Error(`${expr}: a ${d.resultType}, not an instant vector`);
      return d.result.map((s) => ({
        metric: s.metric,
        value: s.value[1] === '+Inf' ? Infinity : s.value[1] === '-Inf' ? -Infinity : Number(s.value[1]),
      }));
    },
    async alerts() {
      return (await api<{ alerts: PromAlert[] }>('/api/v1/alerts')).alerts;
    },
    async targets() {
      return (
        await api<{ activeTargets: Array<{ scrapeUrl: string; health: string; lastError: string }> }>('/api/v1/targets')
      ).activeTargets;
    },
    stop,
  };
}
