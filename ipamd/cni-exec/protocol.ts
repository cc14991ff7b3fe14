/**
 * The wire format of ipamd's CNI exec socket, spoken by the native shim
 * (cni-plugin/shim/eni-ipam-shim.c) and ipamd (server.ts). THE one description of it;
 * the C side points here.
 *
 * A Unix stream connection carries one invocation. All integers are unsigned 32-bit
 * big-endian. A "field" is `u32 length` followed by that many bytes.
 *
 *     request  = "EIX1" env stdin selfNetns podNetns
 *       env       field: `KEY=VALUE` entries, each ended by one NUL byte; the shim sends
 *                 its CNI_* variables only (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS,
 *                 CNI_IFNAME, CNI_ARGS, CNI_PATH)
 *       stdin     field: the bytes the runtime wrote on the plugin's stdin (the config)
 *       selfNetns field: `<st_dev>:<st_ino>` (decimal) of the shim's /proc/self/ns/net
 *       podNetns  field: `<st_dev>:<st_ino>` of stat(CNI_NETNS) as the shim sees it;
 *                 empty when CNI_NETNS is empty; `!<errno>` when stat failed
 *
 *     response = "EIX1" ( "R" exitCode stdout stderr | "U" reason | "F" reason )
 *       R         ipamd ran the invocation: u32 exit code, then the stdout and stderr
 *                 fields, which the shim writes to fd 1 and fd 2 before exiting
 *       U         "not serving", sent BEFORE anything was done (ipamd is shutting down):
 *                 the shim acts as when the socket refuses (ADD waits and retries, DEL is
 *                 spooled, CHECK/GC code 11, STATUS code 50); `reason` is one line
 *       F         "cannot run it here", sent BEFORE anything was done (ipamd wires the
 *                 node side in another netns than the shim's, cannot see the pod netns
 *                 the way the shim does, or the request is over a limit): `reason` is one
 *                 line that names the DaemonSet setting to fix. The shim reports it as a
 *                 CNI error (STATUS 50, other verbs 5; a DEL is spooled instead), or, only
 *                 with a `nodePlugin` in the config (developer mode), execs that Node
 *                 plugin with the same env and stdin
 *
 * The shim sends the whole request and then reads. A connection that ends without a
 * complete response means "unknown outcome": the shim reports CNI error 11 (try again
 * later) and never runs anything else, so an ADD cannot run twice. Limits: env ≤ 64 KiB,
 * stdin ≤ 8 MiB (the shim refuses a larger config itself, CNI error 7, never cut), each
 * netns id ≤ 64 bytes (a larger request is answered "F"). ipamd also bounds what a
 * connection may cost it (server.ts): the whole request must arrive within a deadline
 * from accept, open connections are capped, and so are the bytes held by requests still
 * arriving; a connection over a bound is closed (the shim reports code 11).
 */

/** The 4 magic bytes that start every request and response (format version 1). */
export const MAGIC = Buffer.from('EIX1', 'latin1');
/** Largest env field accepted, bytes. */
export const MAX_ENV_BYTES = 64 * 1024;
/** Largest stdin field accepted, bytes. */
export const MAX_STDIN_BYTES = 8 * 1024 * 1024;
/** Largest netns id field accepted, bytes. */
export const MAX_NETNS_ID_BYTES = 64;

/** A decoded request. */
export interface ExecRequest {
  /** The CNI_* environment the shim saw. */
  env: Record<string, string>;
  /** The runtime's stdin bytes, as UTF-8 text. */
  stdin: string;
  /** `dev:ino` of the shim's own netns. */
  selfNetns: string;
  /** `dev:ino` of CNI_NETNS as the shim sees it, '' (no CNI_NETNS) or `!<errno>`. */
  podNetns: string;
}

/** Result of {@link decodeRequest}: complete, incomplete (read more) or refused (answer "F"). */
export type DecodeResult =
  | { state: 'complete'; request: ExecRequest }
  /** `need`: total bytes required before decoding again can make progress (no point before). */
  | { state: 'incomplete'; need: number }
  | { state: 'refused'; reason: string };

const LIMITS = [MAX_ENV_BYTES, MAX_STDIN_BYTES, MAX_NETNS_ID_BYTES, MAX_NETNS_ID_BYTES] as const;
const NAMES = ['env', 'stdin', 'selfNetns', 'podNetns'] as const;

/**
 * Decodes a request from the bytes received so far. Pure.
 * @returns "incomplete" while bytes are missing (with the size worth waiting for); "refused" for a foreign magic or a
 *   field over its limit (known as soon as its length arrives).
 */
export function decodeRequest(buf: Buffer): DecodeResult {
  if (buf.length < MAGIC.length) {
    return MAGIC.subarray(0, buf.length).equals(buf)
      ? { state: 'incomplete', need: MAGIC.length }
      : { state: 'refused', reason: 'not an eni-ipam exec request (bad magic)' };
  }
  if (!buf.subarray(0, MAGIC.length).equals(MAGIC))
    return {
      state: 'refused',
      reason: `unsupported exec protocol ${JSON.stringify(buf.subarray(0, 4).toString('latin1'))}; this ipamd speaks EIX1`,
    };
  const fields: Buffer[] = [];
  let off = MAGIC.length;
  for (let i = 0; i < NAMES.length; i++) {
    if (buf.length < off + 4) return { state: 'incomplete', need: off + 4 };
    const len = buf.readUInt32BE(off);
    if (len > LIMITS[i]!) return { state: 'refused', reason: `${NAMES[i]} field of ${len} bytes exceeds ${LIMITS[i]}` };
    off += 4;
    if (buf.length < off + len) return { state: 'incomplete', need: off + len };
    fields.push(buf.subarray(off, off + len));
    off += len;
  }
  const env: Record<string, string> = {};
  for (const entry of fields[0]!.toString('utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return {
    state: 'complete',
    request: {
      env,
      stdin: fields[1]!.toString('utf8'),
      selfNetns: fields[2]!.toString('latin1'),
      podNetns: fields[3]!.toString('latin1'),
    },
  };
}

function field(b: Buffer): Buffer[] {
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32BE(b.length, 0);
  return [len, b];
}

/** Encodes a request (what the shim sends; used by tests and tools written in TypeScript). */
export function encodeRequest(r: ExecRequest): Buffer {
  const env = Buffer.from(
    Object.entries(r.env)
      .map(([k, v]) => `${k}=${v}\0`)
      .join(''),
    'utf8',
  );
  return Buffer.concat([
    MAGIC,
    ...field(env),
    ...field(Buffer.from(r.stdin, 'utf8')),
    ...field(Buffer.from(r.selfNetns, 'latin1')),
    ...field(Buffer.from(r.podNetns, 'latin1')),
  ]);
}

/** Encodes an "R" response: the invocation ran; `exitCode`, stdout and stderr text. */
export function encodeResult(exitCode: number, stdout: string, stderr: string): Buffer {
  const code = Buffer.allocUnsafe(4);
  code.writeUInt32BE(exitCode >>> 0, 0);
  return Buffer.concat([
    MAGIC,
    Buffer.from('R', 'latin1'),
    code,
    ...field(Buffer.from(stdout, 'utf8')),
    ...field(Buffer.from(stderr, 'utf8')),
  ]);
}

/** Encodes an "F" response: nothing was done; `reason` names what to fix (the shim reports it). */
export function encodeFallback(reason: string): Buffer {
  return Buffer.concat([MAGIC, Buffer.from('F', 'latin1'), ...field(Buffer.from(reason, 'utf8'))]);
}

/** Encodes a "U" response: ipamd is not serving; nothing was done (the shim acts as if the socket refused). */
export function encodeUnavailable(reason: string): Buffer {
  return Buffer.concat([MAGIC, Buffer.from('U', 'latin1'), ...field(Buffer.from(reason, 'utf8'))]);
}

/** A decoded response (for tests). */
export type ExecResponse =
  { kind: 'R'; exitCode: number; stdout: string; stderr: string } | { kind: 'F' | 'U'; reason: string };

/**
 * Decodes a complete response. Pure.
 * @throws Error when `buf` is not exactly one well-formed response.
 */
export function decodeResponse(buf: Buffer): ExecResponse {
  if (buf.length < 5 || !buf.subarray(0, 4).equals(MAGIC)) throw new Error('not an EIX1 response');
  let off = 5;
  const take = (): string => {
    if (buf.length < off + 4) throw new Error('truncated response');
    const len = buf.readUInt32BE(off);
    if (buf.length < off + 4 + len) throw new Error('truncated response');
    const s = buf.subarray(off + 4, off + 4 + len).toString('utf8');
    off += 4 + len;
    return s;
  };
  const kind = String.fromCharCode(buf[4]!);
  let out: ExecResponse;
  if (kind === 'F' || kind === 'U') out = { kind, reason: take() };
  else if (kind === 'R') {
    if (buf.length < 9) throw new Error('truncated response');
    const exitCode = buf.readUInt32BE(5);
    off = 9;
    out = { kind, exitCode, stdout: take(), stderr: take() };
  } else throw new Error(`unknown response kind ${JSON.stringify(kind)}`);
  if (off !== buf.length) throw new Error(`${buf.length - off} bytes after the response`);
  return out;
}
