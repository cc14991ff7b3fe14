/**
 * Shared pieces of the image build (scripts/image/*.mjs): repository paths, the one error
 * type whose message is the single line the build prints on failure, a child-process
 * runner that turns a failed tool into that line, and the reproducible timestamp.
 */
import { execFile } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pRetry, { AbortError } from 'p-retry';

/** Absolute path of the repository root (ends without a slash). */
export const ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** Where build outputs and caches go: `<ROOT>/build/image` (gitignored). */
export const BUILD_DIR = path.join(ROOT, 'build', 'image');

/**
 * A failure the image build reports as ONE line (`eni-ipam image: <message>`) and exit
 * status 1: what could not be done, naming the input (package, file, tool) and where the
 * full output is when there is more to read.
 */
export class ImageBuildError extends Error {
  /** @param {string} message one line, no trailing period needed */
  constructor(message) {
    super(message.replace(/\s*\n\s*/g, ' ').trim());
    this.name = 'ImageBuildError';
  }
}

/**
 * Picks the lines of a tool's stderr/stdout that say what went wrong: apt's "Failed to
 * fetch" warning (an unreachable mirror) or `E:` lines, `npm error` lines (without the
 * code/errno/log-file boilerplate), else lines saying error/fatal (tar, umoci).
 * @param {string} text the tool's combined output
 * @param {number} [max] how many lines to keep (default 1: the first says what failed)
 * @returns {string} those lines joined with "; " (or the last non-empty line, or "")
 */
export function errorSummary(text, max = 1) {
  const lines = String(text).split('\n').map((l) => l.trim()).filter(Boolean);
  const tool = lines.filter((l) =>
    /^(E: |W: Failed to fetch )/.test(l) ||
    (/^npm (error|ERR!) /.test(l) && !/(A complete log of this run|log of this run can be found|^npm (error|ERR!) *$|^npm (error|ERR!) (code|syscall|errno) )/.test(l)));
  const errs = tool.length > 0 ? tool : lines.filter((l) => /(^|: )(error|fatal|Error)\b/.test(l));
  const picked = (errs.length > 0 ? errs : lines.slice(-1)).slice(0, max);
  return picked.map((l) => l.replace(/^npm (error|ERR!) (notarget )?/, '')).join('; ');
}

/**
 * Runs `cmd args` without a shell and resolves with its output.
 * @param {string} cmd executable (looked up on PATH)
 * @param {string[]} args arguments
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, what: string, maxBuffer?: number }} o
 *   `what` names the step for the error line ("cannot <what>: <tool's error>")
 * @returns {Promise<{ stdout: string, stderr: string }>}
 * @throws ImageBuildError when the tool is missing or exits non-zero
 */
export function run(cmd, args, o) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd: o.cwd, env: o.env ?? process.env, maxBuffer: o.maxBuffer ?? 256 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (!err) { resolve({ stdout, stderr }); return; }
      if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') {
        reject(new ImageBuildError(`cannot ${o.what}: '${cmd}' is not installed (run: bash scripts/ensure-deps.sh --image)`));
        return;
      }
      const why = errorSummary(`${stdout}\n${stderr}`) || `exit status ${err.code ?? err.signal}`;
      reject(new ImageBuildError(`cannot ${o.what}: ${why}`));
    });
  });
}

/**
 * Hex SHA-256 of the given strings/buffers, fed in order with a separator.
 * @param {...(string|Buffer)} parts
 * @returns {string} 64 hex characters
 */
export function sha256(...parts) {
  const h = createHash('sha256');
  for (const p of parts) { h.update(p); h.update('\0'); }
  return h.digest('hex');
}

/**
 * The reproducible timestamp (seconds since the epoch) for files and image metadata:
 * `SOURCE_DATE_EPOCH` when set (reproducible-builds.org), else the commit time of the
 * last commit touching `paths` (all of the repository when none), else 0.
 * @param {string[]} [paths] repository-relative paths
 * @returns {Promise<number>} integer seconds
 * @throws ImageBuildError when SOURCE_DATE_EPOCH is set but not a non-negative integer
 */
export async function sourceDateEpoch(paths = []) {
  const env = process.env.SOURCE_DATE_EPOCH;
  if (env !== undefined && env !== '') {
    if (!/^\d+$/.test(env)) throw new ImageBuildError(`SOURCE_DATE_EPOCH='${env}' is not a whole number of seconds since 1970`);
    return Number(env);
  }
  try {
    const { stdout } = await run('git', ['log', '-1', '--format=%ct', '--', ...paths], { cwd: ROOT, what: 'read the commit time' });
    const t = Number(stdout.trim());
    return Number.isInteger(t) && t > 0 ? t : 0;
  } catch {
    return 0;
  }
}

/**
 * Removes the other entries of a cache family (`<dir>/<prefix>*`) once `keep` is written,
 * so build/image/cache holds one Debian tarball, one runtime and one node_modules per arch.
 * @param {string} dir cache dir
 * @param {string} prefix family prefix, e.g. `debian-amd64-`
 * @param {string} keep the entry's base name to keep (files starting with it stay too)
 */
export function pruneCache(dir, prefix, keep) {
  for (const e of readdirSync(dir)) {
    if (e.startsWith(prefix) && !e.startsWith(keep)) rmSync(path.join(dir, e), { recursive: true, force: true });
  }
}

/** A fetch that failed this way will fail again: the package or version does not exist, or it is not what was pinned. */
const PERMANENT = /E404|ETARGET|No matching version|Unable to locate package|does not match the integrity|is not a Debian package name/i;

/**
 * Runs a download step (`npm pack`, `mmdebstrap`, `npm ci`) with retries (p-retry: 3 attempts,
 * 2 s then 4 s apart): a mirror or registry that drops a connection or times out is asked
 * again, each retry logged; a failure that asking again cannot fix (a missing package or
 * version, an integrity mismatch) is thrown at once.
 * @template T
 * @param {string} what the step, for the log line ("fetch the Debian packages")
 * @param {() => Promise<T>} fn the step
 * @param {{ log?: (line: string) => void, retries?: number, minTimeoutMs?: number }} [o]
 * @returns {Promise<T>}
 * @throws the step's last error (an ImageBuildError: one line)
 */
export function withRetries(what, fn, o = {}) {
  return pRetry(
    async () => {
      try {
        return await fn();
      } catch (e) {
        if (e instanceof ImageBuildError && PERMANENT.test(e.message)) throw new AbortError(e);
        throw e;
      }
    },
    {
      retries: o.retries ?? 2,
      factor: 2,
      minTimeout: o.minTimeoutMs ?? 2000,
      onFailedAttempt: (err) => {
        if (err.retriesLeft > 0)
          o.log?.(`${what} failed (attempt ${err.attemptNumber} of ${err.attemptNumber + err.retriesLeft}): ${err.message}; trying again`);
      },
    },
  );
}
