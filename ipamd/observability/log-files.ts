/**
 * Log files with rotation (docs/design.md#12-running-on-a-cluster item 7), as amazon-vpc-cni-k8s users expect them:
 * ipamd's own log at AWS_VPC_K8S_CNI_LOG_FILE and the CNI plugin's invocation log at
 * AWS_VPC_K8S_PLUGIN_LOG_FILE (written into the installed conflist as `logFile`). The
 * live file keeps its configured name (`tail -f ipamd.log` works); when it reaches
 * ENI_IPAM_LOG_FILE_MAX_SIZE it is rotated to `<name>.1.gz`, older ones shift to `.2.gz`…
 * and only ENI_IPAM_LOG_FILE_MAX_FILES are kept (aws-node keeps 5 backups of 100 MB,
 * compressed). Rotation is rotating-file-stream's (classical logrotate mode, `rotate`),
 * which creates the directory too.
 *
 * The plugin log: invocations run inside ipamd (the shim's exec socket) write through
 * {@link PluginLogFiles}, so they are rotated; the Node plugin run as a process (ipamd
 * down) appends to the same file directly and is not (it is a developer tool).
 *
 * Directories are made here, loop-free (nodefs/dirs.ts), before rotating-file-stream is
 * given a path: its own recursive mkdir is Node's, which spins forever where a mkdir fails
 * with ENOENT under an existing parent (/proc, /sys). A plugin log that cannot be opened or
 * written backs off (jittered, 1 s doubling to 5 min) and is reported as a stalled part;
 * its lines are dropped meanwhile (docs/design.md#bounds-on-bad-input).
 */
import path from 'node:path';
import { createStream, type RotatingFileStream } from 'rotating-file-stream';
import { mkdirParentsSync } from '../../nodefs/dirs.js';
import { backoffDelay, type BackoffPolicy } from '../cloud/retry.js';
import type { StalledParts } from './stalled-parts.js';

/** Rotation settings. `maxSize` like `100M` (units K, M, G); `maxFiles` rotated files kept. */
export interface RotationOptions {
  maxSize: string;
  maxFiles: number;
}

/**
 * Opens `file` (absolute) for appending with rotation, making its directory first. Errors
 * after opening (disk full, directory removed) go to `onError` (default: one line on
 * stderr), never thrown.
 * @throws the mkdir error when the directory cannot be made (e.g. ENOENT under /proc).
 */
export function openRotatingLog(
  file: string,
  o: RotationOptions,
  onError: (e: Error) => void = (e) => process.stderr.write(`eni-ipamd: log file ${file}: ${e.message}\n`),
): RotatingFileStream {
  mkdirParentsSync(path.dirname(file));
  const s = createStream(path.basename(file), {
    path: path.dirname(file),
    size: o.maxSize as `${number}K`,
    rotate: o.maxFiles,
    compress: 'gzip',
  });
  s.on('error', onError);
  return s;
}

/** Ends a stream and waits for its data to reach the file. */
export function closeLog(s: RotatingFileStream): Promise<void> {
  return new Promise((resolve) => s.end(() => resolve()));
}

/** Backoff of a plugin log file that failed: 1 s doubling to 5 min, jittered. */
const PLUGIN_LOG_BACKOFF: BackoffPolicy = { baseMs: 1000, capMs: 300_000 };

/** A plugin log file that failed and waits before the next try. */
interface Failing {
  failures: number;
  /** performance.now() before which lines are dropped (ms). */
  retryAt: number;
}

/**
 * The CNI plugin's log files written by invocations run in ipamd: one rotating stream per
 * path (a conflist names one; at most {@link PluginLogFiles.MAX_FILES} distinct paths,
 * further ones are appended without rotation by the caller's fallback). A path that cannot
 * be opened or written backs off and is reported to `stalled` (see the module docstring).
 */
export class PluginLogFiles {
  static readonly MAX_FILES = 4;
  private readonly streams = new Map<string, RotatingFileStream>();
  private readonly failing = new Map<string, Failing>();

  constructor(private readonly o: RotationOptions & { stalled?: StalledParts }) {}

  /**
   * Appends `line` (one JSON line, newline included) to `file`, or drops it while `file`
   * backs off after a failure.
   * @returns false when `file` would be one path too many (the caller appends it itself).
   */
  append(file: string, line: string): boolean {
    let s = this.streams.get(file);
    if (!s) {
      const f = this.failing.get(file);
      if (f && performance.now() < f.retryAt) return true; // dropped: reported when it failed
      if (this.streams.size >= PluginLogFiles.MAX_FILES) return false;
      try {
        s = openRotatingLog(file, this.o, (e) => this.fail(file, e));
      } catch (e) {
        this.fail(file, e as Error);
        return true;
      }
      this.streams.set(file, s);
    }
    s.write(line, (err) => {
      if (!err && this.failing.delete(file)) this.o.stalled?.recovered(`plugin-log ${file}`);
    });
    return true;
  }

  /** Closes `file`'s stream after an error and schedules the next try. */
  private fail(file: string, e: Error): void {
    const s = this.streams.get(file);
    if (s) {
      this.streams.delete(file);
      s.destroy();
    }
    const f = this.failing.get(file) ?? { failures: 0, retryAt: 0 };
    f.failures++;
    const wait = backoffDelay(f.failures, PLUGIN_LOG_BACKOFF);
    f.retryAt = performance.now() + wait;
    this.failing.set(file, f);
    this.o.stalled?.failed(`plugin-log ${file}`, e.message, wait);
  }

  /** Flushes and closes every stream (each for at most `ms`: a wedged file is abandoned). */
  async close(ms = 2000): Promise<void> {
    const streams = [...this.streams.values()];
    this.streams.clear();
    await Promise.all(
      streams.map(async (s) => {
        let timer: NodeJS.Timeout | undefined;
        const ended = await Promise.race([
          closeLog(s).then(() => true),
          new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms))),
        ]);
        clearTimeout(timer);
        if (!ended) s.destroy();
      }),
    );
  }
}
