/**
 * A TCP relay on 127.0.0.1 in front of a real server, to give a client the network
 * faults a server cannot be asked for: `hold()` cuts every open connection and then
 * accepts new ones without ever forwarding a byte (a server that stops answering: the
 * client's deadline must fire), `cut()` resets the open connections once (a dropped
 * watch), `resume()` forwards again (held connections are reset, so clients retry at
 * once), `close()` stops listening (connection refused). TLS passes through untouched.
 *
 * Resets go through {@link resetSocket}: `resetAndDestroy()` on a socket whose write side
 * is shutting down (its peer half-closed and the relay passed the FIN on) leaks the socket
 * in Node 20, and the process then spins at 100 % CPU at exit instead of ending.
 */
import net from 'node:net';

/**
 * Resets `s` (RST to its peer) when it can, else destroys it (FIN). libuv refuses to reset
 * a TCP handle with a shutdown in progress (`uv_tcp_close_reset` answers EINVAL: "mixing
 * uv_shutdown and uv_tcp_close_reset is not allowed"), and Node 20 then marks the handle
 * closing without ever closing it: the event loop empties, but the exit's handle cleanup
 * (`Environment::CleanupHandles`) waits for that handle forever, spinning `uv_run`. A socket
 * that was asked to end (`writableEnded`: `end()` was called, by `pipe()` or by
 * `allowHalfOpen: false`) may have that shutdown in progress, so it is only destroyed; it
 * is ending anyway. Never throws.
 */
export function resetSocket(s: net.Socket): void {
  if (s.destroyed) return;
  if (s.writableEnded || s.connecting) s.destroy();
  else s.resetAndDestroy();
}

/** A running relay; see the module docstring. */
export interface FaultRelay {
  /** The port it listens on (127.0.0.1). */
  port: number;
  hold(): void;
  cut(): void;
  resume(): void;
  close(): Promise<void>;
}

/**
 * Starts a relay from 127.0.0.1:<free port> to `target`.
 * @throws Error when it cannot listen.
 */
export async function startFaultRelay(target: { host: string; port: number }): Promise<FaultRelay> {
  const open = new Set<net.Socket>();
  const held = new Set<net.Socket>();
  let holding = false;
  const server = net.createServer((down) => {
    down.on('error', () => undefined);
    if (holding) {
      held.add(down);
      down.on('close', () => held.delete(down));
      return;
    }
    const up = net.connect(target);
    open.add(down).add(up);
    const drop = (): void => {
      down.destroy();
      up.destroy();
      open.delete(down);
      open.delete(up);
    };
    up.on('error', drop).on('close', drop);
    down.on('close', drop);
    down.pipe(up).pipe(down);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const reset = (set: Set<net.Socket>): void => {
    for (const s of set) resetSocket(s);
    set.clear();
  };
  return {
    port: (server.address() as net.AddressInfo).port,
    hold() {
      holding = true;
      reset(open);
    },
    cut: () => reset(open),
    resume() {
      holding = false;
      reset(held);
    },
    async close() {
      reset(open);
      reset(held);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
