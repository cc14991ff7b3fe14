/** Runs the built operator CLI (dist/cli/main.js) as a child process, as an operator would. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Path of the compiled CLI. */
export const CLI_PATH = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

/** What one run printed and its exit code. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `eni-ipam <args>` with `env` added to the current environment; `prefix` wraps the
 * command (e.g. `['setpriv', '--reuid=65534', ...]`). Resolves with the exit code; never rejects on a non-zero exit.
 */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  prefix: string[] = [],
  timeoutMs = 60_000,
): Promise<CliRun> {
  const argv = [...prefix, process.execPath, CLI_PATH, ...args];
  return new Promise((resolve) => {
    execFile(
      argv[0]!,
      argv.slice(1),
      { env: { ...process.env, NO_COLOR: '1', ...env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as NodeJS.ErrnoException & { code?: unknown }).code === 'number'
            ? Number((err as { code: number }).code)
            : -1
          : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
