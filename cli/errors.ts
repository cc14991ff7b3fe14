/**
 * Exit codes of `eni-ipam` and the one error type commands throw. Scripts can rely on
 * the codes (docs/cli.md):
 *
 * | code | meaning |
 * |---|---|
 * | 0 | done; for `audit`: no mismatch |
 * | 1 | `audit` found at least one mismatch |
 * | 2 | usage: unknown command or flag, bad value, unknown instance type |
 * | 3 | ipamd unreachable: introspection refused/timed out, socket missing or not serving |
 * | 4 | permission denied (a file, socket or namespace the CLI may not read; run as root) |
 * | 5 | a source other than ipamd could not be read, so the answer is incomplete |
 */
export const EXIT = { ok: 0, findings: 1, usage: 2, unreachable: 3, permission: 4, incomplete: 5 } as const;

/** An expected failure: printed as one line `eni-ipam: <message>`, exit with `code`. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

/**
 * Maps a Node system error on `what` (a path or address) to a {@link CliError}:
 * EACCES/EPERM → permission (4), ENOENT/ECONNREFUSED/timeouts → unreachable (3).
 * Anything else keeps its message with `fallback` as the code.
 */
export function systemError(e: unknown, what: string, fallback: number = EXIT.incomplete): CliError {
  if (e instanceof CliError) return e;
  const err = e as NodeJS.ErrnoException;
  const code = err?.code ?? (err?.cause as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EACCES' || code === 'EPERM')
    return new CliError(
      `permission denied reading ${what}: run eni-ipam as root (or with the node's privileges)`,
      EXIT.permission,
    );
  if (code === 'ENOENT') return new CliError(`${what} does not exist`, fallback);
  if (code === 'ECONNREFUSED') return new CliError(`${what}: connection refused`, fallback);
  return new CliError(`${what}: ${err?.message ?? String(e)}`, fallback);
}
