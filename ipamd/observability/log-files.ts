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
 */
import path from 'node:path';
import { createStream, type RotatingFileStream } from 'rotating-file-stream';

/** Rotation settings. `maxSize` like `100M` (units K, M, G); `maxFiles` rotated files kept. */
export interface RotationOptions {
  maxSize: string;
  maxFiles: number;
}

/**
 * Opens `file` (absolute) for appending with rotation. Errors after opening (disk full,
 * directory removed) go to `onError` (default: one line on stderr), never thrown.
 */
export function openRotatingLog(
  file: string,
  o: RotationOptions,
  onError: (e: Error) => void = (e) => process.stderr.write(`eni-ipamd: log file ${file}: ${e.message}\n`),
): RotatingFileStream {
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

/**
 * The CNI plugin's log files written by invocations run in ipamd: one rotating stream per
 * path (a conflist names one; at most {@link PluginLogFiles.MAX_FILES} distinct paths,
 * further ones are appended without rotation by the caller's fallback).
 */
export class PluginLogFiles {
  static readonly MAX_FILES = 4;
  private readonly streams = new Map<string, RotatingFileStream>();

  constructor(private readonly o: RotationOptions) {}

  /**
   * Appends `line` (one JSON line, newline included) to `file`.
   * @returns false when `file` would be one path too many (the caller appends it itself).
   */
  append(file: string, line: string): boolean {
    let s = this.streams.get(file);
    if (!s) {
      if (this.streams.size >= PluginLogFiles.MAX_FILES) return false;
      s = openRotatingLog(file, this.o);
      this.streams.set(file, s);
    }
    s.write(line);
    return true;
  }

  /** Flushes and closes every stream. */
  async close(): Promise<void> {
    await Promise.all([...this.streams.values()].map(closeLog));
    this.streams.clear();
  }
}
