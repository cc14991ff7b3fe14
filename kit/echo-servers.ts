/**
 * TCP servers that answer each connection with the peer address they see (one line:
 * `10.0.0.5\n`), run inside a network namespace the caller made: the VPC side of a test bed
 * or the demo learns whether a flow was SNATed, and from which address it came. One Node
 * process (`nsenter --net`) serves every address given; nothing runs in the caller's own
 * namespace, and the process ends with its caller (stop function, or the caller's death).
 */
import { spawn } from 'node:child_process';
import type { Netns } from './netns.js';

/**
 * Starts TCP servers in `ns` on `hosts` (addresses `ns` has) at `port`, each answering a
 * connection with the peer address it sees, then ending it. @returns a stop function (kills
 * the server process; idempotent).
 * @throws Error with the server's stderr (after killing it) when it exits before listening,
 *   e.g. on an address `ns` does not have, or is not listening within `timeoutMs` (default 10 000).
 */
export async function startEchoServers(
  ns: Netns,
  hosts: string[],
  port: number,
  timeoutMs = 10_000,
): Promise<() => void> {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS; // adds ~130 ms to every Node start here
  const server = spawn(
    'nsenter',
    [
      `--net=${ns.path}`,
      process.execPath,
      '-e',
      // Reads and drops what a client sends (so each connection ends when the client closes it),
      // and exits when its stdin closes: the caller's end of the pipe goes when the caller dies.
      `const net=require('net');let n=0;process.stdin.on('end',()=>process.exit(0)).resume();` +
        `for(const h of ${JSON.stringify(hosts)})` +
        `net.createServer(s=>s.resume().end(s.remoteAddress+'\\n')).listen(${port},h,()=>{if(++n===${hosts.length})console.log('listening')})`,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'], env },
  );
  const stop = () => {
    server.kill('SIGKILL');
  };
  const what = `the echo servers on ${hosts.join(', ')} port ${port} in ${ns.path}`;
  let out = '';
  let err = '';
  server.stderr!.on('data', (b: Buffer) => (err = (err + b.toString()).slice(-2000)));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what}: not listening after ${timeoutMs} ms`)), timeoutMs);
      server.stdout!.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      server.on('error', (e) => {
        clearTimeout(timer);
        reject(new Error(`${what}: ${e.message}`));
      });
      server.on('exit', (code, sig) => {
        clearTimeout(timer);
        reject(new Error(`${what}: exited ${code ?? sig} before listening: ${err.trim()}`));
      });
    });
  } catch (e) {
    stop();
    throw e;
  }
  return stop;
}
