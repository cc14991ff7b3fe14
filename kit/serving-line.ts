/**
 * Recognises ipamd's "ipamd serving" log record in either of its log formats
 * (ENI_IPAM_LOG_FORMAT): one JSON line (`{"msg":"ipamd serving","introspectionPort":…}`),
 * or pino-pretty's lines (`[time] INFO (pid): ipamd serving` then one indented
 * `key: value` line per field, metricsPort right after introspectionPort; ipamd/daemon.ts).
 * Fed line by line; pure.
 */

/** The ports the serving record names. */
export interface Serving {
  introspectionPort: number;
  metricsPort?: number;
}

/** A line-by-line scanner: `push(line)` returns the record once it is complete, else undefined. */
export function servingScanner(): { push(line: string): Serving | undefined } {
  let pretty: Record<string, number> | undefined;
  const done = (f: Record<string, number | undefined>): Serving => ({
    introspectionPort: f.introspectionPort ?? 0,
    ...(f.metricsPort ? { metricsPort: f.metricsPort } : {}),
  });
  return {
    push(line: string): Serving | undefined {
      if (pretty) {
        const field = /^\s+(\w+): (\S+)/.exec(line);
        if (!field) {
          const r = done(pretty); // the record ended
          pretty = undefined;
          return r;
        }
        if (/^\d+$/.test(field[2]!)) pretty[field[1]!] = Number(field[2]);
        if (field[1] !== 'metricsPort') return undefined;
        const r = done(pretty); // ipamd logs metricsPort right after introspectionPort: nothing more is needed
        pretty = undefined;
        return r;
      }
      if (line.startsWith('{')) {
        try {
          const o = JSON.parse(line) as { msg?: string; introspectionPort?: number; metricsPort?: number };
          if (o.msg === 'ipamd serving')
            return done({ introspectionPort: o.introspectionPort, metricsPort: o.metricsPort });
        } catch {
          /* not JSON */
        }
        return undefined;
      }
      if (/\bINFO\b.*: ipamd serving\s*$/.test(line)) pretty = {};
      return undefined;
    },
  };
}
