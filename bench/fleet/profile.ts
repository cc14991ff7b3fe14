/**
 * A V8 CPU profile of the calling thread (node:inspector; in a worker thread, that
 * worker's isolate), sampled every 500 µs.
 */
import { writeFile } from 'node:fs/promises';
import inspector from 'node:inspector';

/** A running profile: `stop(file)` writes it as a `.cpuprofile` JSON file. */
export interface CpuProfile {
  stop(file: string): Promise<void>;
}

/** Starts profiling this thread. @throws Error when the inspector refuses. */
export async function startCpuProfile(): Promise<CpuProfile> {
  const session = new inspector.Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<{ profile?: object }>((resolve, reject) =>
      session.post(method, params, (e, r) => (e ? reject(e) : resolve(r as { profile?: object }))),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 500 });
  await post('Profiler.start');
  return {
    async stop(file) {
      const { profile } = await post('Profiler.stop');
      await writeFile(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}
