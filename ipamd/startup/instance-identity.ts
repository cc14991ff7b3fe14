/**
 * Which EC2 instance this ipamd runs on, read from IMDS before ipamd takes its node guard
 * (node-guard.ts) and so before it opens its log or touches anything on the node: the
 * instance id and the identity document's account, region and pending time
 * (`meta-data/instance-id`, `dynamic/instance-identity/document`; AWS EC2 User Guide,
 * "Instance identity documents"). Retried as discovery retries IMDS (8 retries, jittered
 * back-off 0.5 s → 8 s), each failure one line on stderr (the log is not open yet).
 */
import pRetry from 'p-retry';
import { ImdsClient } from '../cloud/imds.js';

/** What names the instance (node-guard.ts hashes all four). */
export interface InstanceIdentity {
  instanceId: string;
  accountId: string;
  region: string;
  /** The identity document's `pendingTime` (ISO 8601): when the instance was launched. */
  pendingTime: string;
}

/**
 * Reads the identity through IMDS at `endpoint` (AWS_EC2_METADATA_SERVICE_ENDPOINT).
 * `retries` (default 8) bounds the retries; `warn` gets one line per failed attempt.
 * @throws Error naming the endpoint and the last failure after the retries.
 */
export async function readInstanceIdentity(
  endpoint: string,
  o: { retries?: number; warn?: (line: string) => void } = {},
): Promise<InstanceIdentity> {
  const imds = new ImdsClient({ endpoint });
  try {
    return await pRetry(
      async () => {
        const [id, doc] = await Promise.all([
          imds.get('meta-data/instance-id'),
          imds.get('dynamic/instance-identity/document'),
        ]);
        let d: Record<string, unknown>;
        try {
          d = JSON.parse(doc) as Record<string, unknown>;
        } catch {
          throw new Error('dynamic/instance-identity/document is not JSON');
        }
        const instanceId = id.trim();
        if (!/^i-[0-9a-f]{8,17}$/.test(instanceId))
          throw new Error(`meta-data/instance-id is not an instance id: ${JSON.stringify(instanceId.slice(0, 40))}`);
        return {
          instanceId,
          accountId: String(d.accountId ?? ''),
          region: String(d.region ?? ''),
          pendingTime: String(d.pendingTime ?? ''),
        };
      },
      {
        retries: o.retries ?? 8,
        minTimeout: 500,
        maxTimeout: 8000,
        randomize: true,
        onFailedAttempt: (e) =>
          o.warn?.(
            `reading the instance identity from IMDS ${endpoint} failed (attempt ${e.attemptNumber}, ${e.retriesLeft} retries left): ${e.message}`,
          ),
      },
    );
  } catch (e) {
    throw new Error(
      `cannot read the instance identity from IMDS (AWS_EC2_METADATA_SERVICE_ENDPOINT=${endpoint}): ${(e as Error).message}`,
    );
  } finally {
    imds.close();
  }
}
